"""The status of a DisaggregatedSet: the generation it describes (`observedGeneration`);
per role, its groups over all slices and revisions (`replicas`, `readyReplicas`) and
those of the current revision (`updatedReplicas`); and two conditions.

Upstream v0.10.0 declares `roleStatuses` and `conditions` but writes none of them;
`observedGeneration` came after it (upstream #933, with the LeaderWorkerSet's meaning).
The conditions are ours:
- `Available`: True when every role has at least one ready group (the set can serve);
  reason `AllRolesAvailable`, else False with `RolesUnavailable` naming the roles.
- `Progressing`: True while a slice rolls out (`RollingUpdate`) or a role's current
  revision has fewer ready groups than its target (`Scaling`); False (`Complete`)
  once every role runs its target, all ready, at the current revision.
A condition keeps its lastTransitionTime while its status stays the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.objects import JSON, labels_of

AVAILABLE = "Available"
PROGRESSING = "Progressing"


@dataclass(frozen=True)
class RoleCounts:
    replicas: int = 0
    ready: int = 0
    updated: int = 0
    updated_ready: int = 0


def role_counts(roles: Sequence[str], revision: str, lwss: Iterable[JSON]) -> dict[str, RoleCounts]:
    counts = {role: RoleCounts() for role in roles}
    for lws in lwss:
        labels = labels_of(lws)
        role = str(labels.get(c.LABEL_ROLE, ""))
        if role not in counts:
            continue
        status = lws.get("status") or {}
        replicas, ready = int(status.get("replicas") or 0), int(status.get("readyReplicas") or 0)
        current = labels.get(c.LABEL_REVISION) == revision
        was = counts[role]
        counts[role] = RoleCounts(
            was.replicas + replicas,
            was.ready + ready,
            was.updated + (replicas if current else 0),
            was.updated_ready + (ready if current else 0),
        )
    return counts


def set_status(
    ds: DisaggregatedSet,
    counts: Mapping[str, RoleCounts],
    targets: Mapping[str, int],
    rolling_out: bool,
    current: JSON | None,
    now: str,
) -> JSON:
    """The status to have; `targets`: each role's target groups over all slices."""
    roles = [role.name or "" for role in ds.roles]
    role_statuses = [
        {
            "name": role,
            "replicas": counts[role].replicas,
            "readyReplicas": counts[role].ready,
            "updatedReplicas": counts[role].updated,
        }
        for role in roles
    ]
    generation = (ds.metadata or {}).get("generation")
    unavailable = [role for role in roles if counts[role].ready < 1]
    if unavailable:
        available = ("False", "RolesUnavailable", f"No ready group in {', '.join(unavailable)}")
    else:
        available = ("True", "AllRolesAvailable", "Every role has a ready group")
    short = [role for role in roles if counts[role].updated_ready < targets.get(role, 0)]
    if rolling_out:
        progressing = ("True", "RollingUpdate", "Rolling out a new revision")
    elif short:
        progressing = ("True", "Scaling", f"Waiting for ready groups in {', '.join(short)}")
    else:
        progressing = ("False", "Complete", "Every role runs its target at the current revision")
    previous = {x.get("type"): x for x in (current or {}).get("conditions") or ()}
    conditions = [
        _condition(kind, value, generation, previous.get(kind), now)
        for kind, value in ((AVAILABLE, available), (PROGRESSING, progressing))
    ]
    status: JSON = {"roleStatuses": role_statuses, "conditions": conditions}
    if isinstance(generation, int):
        # Part of the same write as the rest, and compared with it: a spec change alone
        # (a new generation, nothing else different) is then a change to write.
        status = {"observedGeneration": generation, **status}
    return status


def _condition(
    kind: str, value: tuple[str, str, str], generation: object, before: JSON | None, now: str
) -> JSON:
    status, reason, message = value
    since = before.get("lastTransitionTime") if before and before.get("status") == status else None
    condition: JSON = {"type": kind, "status": status}
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    condition.update(lastTransitionTime=since or now, reason=reason, message=message)
    return condition
