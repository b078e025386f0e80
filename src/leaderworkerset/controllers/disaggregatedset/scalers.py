"""The RoleScalers of a set, as upstream's v0.10.0 scaler manager decides them.

Each External role has one, `<set>-<role>`, controlled by the set. A missing one is
created with a seed: the role's replicas over all its LeaderWorkerSets (a Static role
turned External keeps its size), or 1 for a role with none yet (an HPA reading 0 from
/scale would not scale at all). One the set controls whose role is no longer External
is deleted. One of that name the set does not control is left alone and not used.
Its status reports the role's groups over all revisions (status.replicas of its
LeaderWorkerSets), the leader-pod selector, and a Ready condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import scaler_name, scaler_selector
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.objects import JSON, labels_of, meta_of, name_of


@dataclass
class ScalerPlan:
    # role -> seed replicas of a RoleScaler to create
    create: dict[str, int] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    # role -> the RoleScaler the set controls and uses
    bound: dict[str, JSON] = field(default_factory=dict)
    # roles whose RoleScaler name is taken by an object the set does not control
    conflicts: list[str] = field(default_factory=list)


def controlled_by(obj: JSON, uid: str) -> bool:
    return any(
        isinstance(ref, dict) and ref.get("controller") is True and ref.get("uid") == uid
        for ref in meta_of(obj).get("ownerReferences") or ()
    )


def plan_scalers(
    ds: DisaggregatedSet, uid: str, scalers: Iterable[JSON], lwss: Sequence[JSON]
) -> ScalerPlan:
    """`scalers`: the RoleScalers labelled with the set's name; `lwss`: all its
    LeaderWorkerSets."""
    plan = ScalerPlan()
    external = [role.name or "" for role in ds.roles if role.external]
    by_name = {name_of(s): s for s in scalers}
    for scaler in by_name.values():
        if not controlled_by(scaler, uid):
            continue
        role = str(labels_of(scaler).get(c.LABEL_ROLE, ""))
        if role in external:
            plan.bound[role] = scaler
        else:
            plan.delete.append(name_of(scaler))
    for role in external:
        if role in plan.bound:
            continue
        other = by_name.get(scaler_name(ds.name, role))
        if other is not None:
            plan.conflicts.append(role)
        else:
            plan.create[role] = seed(role, lwss)
    return plan


def seed(role: str, lwss: Iterable[JSON]) -> int:
    """The role's spec.replicas summed over its LeaderWorkerSets (absent counts 1), or 1
    when it has none."""
    replicas = [
        (lws.get("spec") or {}).get("replicas")
        for lws in lwss
        if labels_of(lws).get(c.LABEL_ROLE) == role
    ]
    if not replicas:
        return 1
    return sum(r if isinstance(r, int) else 1 for r in replicas)


def spec_replicas(scaler: JSON) -> int:
    value = (scaler.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) else c.DEFAULT_SCALER_REPLICAS


def observed_groups(role: str, lwss: Iterable[JSON]) -> int:
    return sum(
        int((lws.get("status") or {}).get("replicas") or 0)
        for lws in lwss
        if labels_of(lws).get(c.LABEL_ROLE) == role
    )


def scaler_status(scaler: JSON, set_name: str, role: str, groups: int, now: str) -> JSON | None:
    """The status to write, or None when the scaler already has it. The Ready
    condition keeps its transition time while it stays True."""
    current = scaler.get("status") or {}
    generation = meta_of(scaler).get("generation")
    conditions = [x for x in current.get("conditions") or () if isinstance(x, dict)]
    ready = next((x for x in conditions if x.get("type") == c.SCALER_CONDITION_READY), None)
    wanted = {
        "type": c.SCALER_CONDITION_READY,
        "status": "True",
        "observedGeneration": generation,
        "reason": c.SCALER_REASON_BOUND,
        "message": c.SCALER_MESSAGE_BOUND,
    }
    same_condition = ready is not None and all(ready.get(k) == v for k, v in wanted.items())
    status = {
        "replicas": groups,
        "selector": scaler_selector(set_name, role),
        "observedGeneration": generation,
    }
    if same_condition and all(current.get(k) == v for k, v in status.items()):
        return None
    kept = ready.get("lastTransitionTime") if ready and ready.get("status") == "True" else None
    condition = {**wanted, "lastTransitionTime": kept or now}
    others = [x for x in conditions if x.get("type") != c.SCALER_CONDITION_READY]
    return {**status, "conditions": [*others, condition]}
