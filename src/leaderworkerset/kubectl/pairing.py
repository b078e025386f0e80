"""Which tearing-down group each gated replacement leader waits for, as the
controller decides it.

The PostTermination rule releases the oldest G - T gated leaders (T: the groups
tearing down that still count) and pairs each held leader with the group expected to
go first. `kubectl lws` asks the very decision the group-replacement reconciler acts
on (`group.post_termination.decide`), so what it shows is what the controller does.
It knows less than the controller: it reads no Nodes (so a wait bounded by a lost
node is not seen to end) and assumes the default release thresholds, which a
controller configured otherwise does not use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.objects import JSON, name_of
from leaderworkerset.group.options import ReleaseThresholds
from leaderworkerset.group.post_termination import decide


@dataclass
class Pairing:
    gated: int = 0  # G
    tearing_down: int = 0  # T: the tearing-down groups that still count
    # Leader pod name -> the group key it waits for.
    waits_for: dict[str, str] = field(default_factory=dict)
    # Gated leaders the rule releases now (the oldest G - T).
    admitting: set[str] = field(default_factory=set)


def pair(
    pods: Iterable[JSON],
    *,
    now: float,
    immediate: bool = False,
    statefulsets: Iterable[JSON] = (),
    thresholds: ReleaseThresholds | None = None,
) -> Pairing:
    """`pods`: every pod of one Hash-mode LeaderWorkerSet, terminating ones included;
    `statefulsets` its StatefulSets (an orphaned worker set's pods stop counting);
    `now`: epoch seconds. `immediate`: the policy is Immediate, under which every gated
    leader is released."""
    decision = decide(
        list(pods),
        None,  # not read: no node releases anything
        now,
        thresholds or ReleaseThresholds(),
        immediate=immediate,
        worker_sets={name_of(s): s for s in statefulsets},
    )
    return Pairing(
        gated=len(decision.admit) + len(decision.held),
        tearing_down=len(decision.holding),
        waits_for=dict(decision.waits_for),
        admitting={name_of(p) for p in decision.admit},
    )
