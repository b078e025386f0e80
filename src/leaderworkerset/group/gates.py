"""The two gates of a Hash-mode leader, one helper per question.

* The `group-replacement` scheduling gate holds a leader (PostTermination) until
  the replacement reconciler removes it.
* The `group-ready` readiness gate keeps a leader unready until the pod
  reconciler sets the matching condition, which it does while the group's
  workers are ready.

The pod webhook adds both at admission; gates are fixed at pod creation.
"""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, condition_of

_SCHEDULING_GATES = "schedulingGates"
_READINESS_GATES = "readinessGates"


def _gates(pod: JSON, field: str) -> list[JSON]:
    gates: list[JSON] = (pod.get("spec") or {}).get(field) or []
    return gates


def _add_once(spec: JSON, field: str, key: str, value: str) -> None:
    gates: list[JSON] = spec.get(field) or []
    if not any(gate.get(key) == value for gate in gates):
        gates.append({key: value})
    spec[field] = gates


# --- the group-replacement scheduling gate ---------------------------------------------
def scheduling_gate_index(pod: JSON) -> int | None:
    """The position of our scheduling gate in the pod's list; None when it is not there."""
    for i, gate in enumerate(_gates(pod, _SCHEDULING_GATES)):
        if gate.get("name") == c.SCHEDULING_GATE_GROUP_REPLACEMENT:
            return i
    return None


def is_scheduling_gated(pod: JSON) -> bool:
    return scheduling_gate_index(pod) is not None


def add_scheduling_gate(spec: JSON) -> None:
    """Add the gate to a pod spec, in place, unless it is there already."""
    _add_once(spec, _SCHEDULING_GATES, "name", c.SCHEDULING_GATE_GROUP_REPLACEMENT)


def remove_scheduling_gate_patch(index: int) -> list[JSON]:
    """A JSON patch removing exactly our gate at `index`; its test makes the API
    server refuse the patch if the list moved since the pod was read."""
    path = f"/spec/{_SCHEDULING_GATES}/{index}"
    return [
        {"op": "test", "path": f"{path}/name", "value": c.SCHEDULING_GATE_GROUP_REPLACEMENT},
        {"op": "remove", "path": path},
    ]


# --- the group-ready readiness gate --------------------------------------------------
def has_group_ready_gate(pod: JSON) -> bool:
    return any(
        gate.get("conditionType") == c.CONDITION_GROUP_READY
        for gate in _gates(pod, _READINESS_GATES)
    )


def add_group_ready_gate(spec: JSON) -> None:
    """Add the gate to a pod spec, in place, unless it is there already."""
    _add_once(spec, _READINESS_GATES, "conditionType", c.CONDITION_GROUP_READY)


def group_ready_condition(pod: JSON) -> str | None:
    """The status ("True"/"False") of the pod's group-ready condition; None when absent."""
    condition = condition_of(pod, c.CONDITION_GROUP_READY)
    return None if condition is None else str(condition.get("status"))
