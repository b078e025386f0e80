"""What the PostTermination rule holds back, per LeaderWorkerSet, as the replacement
reconciler's last pass decided it.

The LWS reconciler reports it in the `GroupReplacementHeld` condition. Reading the
decision made once per replacement pass, instead of deciding again over every pod
of the LWS on each status pass, is what keeps a Hash-mode status pass cheap at
thousands of pods; the condition follows the gates by one replacement pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from leaderworkerset.api.objects import name_of
from leaderworkerset.controllers.replacement.post_termination import Decision


@dataclass(frozen=True)
class HeldReplacements:
    leaders: tuple[str, ...] = ()  # gated leaders left waiting
    groups: tuple[str, ...] = ()  # the tearing-down groups they wait for

    @property
    def any(self) -> bool:
        return bool(self.leaders)


def held_of(decision: Decision) -> HeldReplacements:
    return HeldReplacements(
        leaders=tuple(name_of(p) for p in decision.held),
        groups=tuple(decision.holding) if decision.held else (),
    )


class HeldBoard:
    """The last decision per LeaderWorkerSet key; `on_change(key)` when it changes."""

    def __init__(self) -> None:
        self._held: dict[str, HeldReplacements] = {}
        self.on_change: Callable[[str], None] | None = None

    def publish(self, key: str, held: HeldReplacements) -> None:
        if self._held.get(key) == held:
            return
        self._held[key] = held
        if self.on_change is not None:
            self.on_change(key)

    def get(self, key: str) -> HeldReplacements | None:
        """None until the replacement reconciler has decided for this key."""
        return self._held.get(key)

    def forget(self, key: str) -> None:
        self._held.pop(key, None)
