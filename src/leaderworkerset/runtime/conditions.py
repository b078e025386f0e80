"""metav1.Condition list helpers with apimachinery's `meta.SetStatusCondition` semantics.

Conditions are plain dicts (type, status, reason, message, observedGeneration,
lastTransitionTime), as they travel on the wire. `lastTransitionTime` moves only when
the status flips, so clients can tell how long a condition has held.
"""

from __future__ import annotations

import datetime
from typing import Any

Condition = dict[str, Any]

TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"


def rfc3339(moment: datetime.datetime) -> str:
    """metav1.Time's wire format: UTC, whole seconds."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(now: datetime.datetime | str | None) -> str:
    if isinstance(now, str):
        return now
    return rfc3339(now or datetime.datetime.now(datetime.UTC))


def find_condition(conditions: list[Condition] | None, type_: str) -> Condition | None:
    for condition in conditions or ():
        if condition.get("type") == type_:
            return condition
    return None


def set_status_condition(
    conditions: list[Condition],
    new: Condition,
    now: datetime.datetime | str | None = None,
) -> bool:
    """Add or update `new` in place; True when anything changed.

    A new condition, or a status change, stamps `lastTransitionTime` with the one in
    `new` if set, else with `now`. Reason, message and observedGeneration are copied.
    """
    existing = find_condition(conditions, new["type"])
    if existing is None:
        added = dict(new)
        if not added.get("lastTransitionTime"):
            added["lastTransitionTime"] = _time(now)
        _drop_zero_generation(added)
        conditions.append(added)
        return True

    changed = False
    if existing.get("status") != new.get("status"):
        existing["status"] = new.get("status")
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or _time(now)
        changed = True
    for key in ("reason", "message"):
        if existing.get(key, "") != new.get(key, ""):
            existing[key] = new.get(key, "")
            changed = True
    if existing.get("observedGeneration", 0) != new.get("observedGeneration", 0):
        existing["observedGeneration"] = new.get("observedGeneration", 0)
        _drop_zero_generation(existing)
        changed = True
    return changed


def _drop_zero_generation(condition: Condition) -> None:
    # observedGeneration is `omitempty`: a zero is never written.
    if not condition.get("observedGeneration"):
        condition.pop("observedGeneration", None)


def remove_status_condition(conditions: list[Condition], type_: str) -> bool:
    """Remove every condition of `type_` in place; True when one was there."""
    kept = [c for c in conditions if c.get("type") != type_]
    removed = len(kept) != len(conditions)
    conditions[:] = kept
    return removed


def is_status_condition_true(conditions: list[Condition] | None, type_: str) -> bool:
    return is_status_condition_present_and_equal(conditions, type_, TRUE)


def is_status_condition_false(conditions: list[Condition] | None, type_: str) -> bool:
    return is_status_condition_present_and_equal(conditions, type_, FALSE)


def is_status_condition_present_and_equal(
    conditions: list[Condition] | None, type_: str, status: str
) -> bool:
    condition = find_condition(conditions, type_)
    return condition is not None and condition.get("status") == status
