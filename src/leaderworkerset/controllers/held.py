"""What the PostTermination rule holds back, per LeaderWorkerSet, as the replacement
reconciler's last pass decided it.

The replacement reconciler publishes it and the LWS reconciler reports it in the
`GroupReplacementHeld` condition; it sits here, below both, so that neither
imports the other (the wiring hands both the same board). Reading the
decision made once per replacement pass, instead of deciding again over every pod
of the LWS on each status pass, is what keeps a Hash-mode status pass cheap at
thousands of pods; the condition follows the gates by one replacement pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HeldReplacements:
    leaders: tuple[str, ...] = ()  # gated leaders left waiting, oldest first
    groups: tuple[str, ...] = ()  # groups[i]: the tearing-down group leaders[i] waits for

    @property
    def any(self) -> bool:
        return bool(self.leaders)


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
