"""meta.SetStatusCondition semantics of runtime.conditions."""

from __future__ import annotations

import datetime
from typing import Any

from leaderworkerset.runtime.conditions import (
    find_condition,
    is_status_condition_false,
    is_status_condition_true,
    remove_status_condition,
    rfc3339,
    set_status_condition,
)

T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T01:00:00Z"


def cond(
    status: str = "True", reason: str = "R", message: str = "m", **extra: object
) -> dict[str, Any]:
    return {"type": "Available", "status": status, "reason": reason, "message": message, **extra}


def test_new_condition_is_appended_with_transition_time_now() -> None:
    conditions: list[dict[str, Any]] = []
    assert set_status_condition(conditions, cond(), now=T0)
    assert conditions == [cond(lastTransitionTime=T0)]


def test_new_condition_keeps_its_own_transition_time() -> None:
    conditions: list[dict[str, Any]] = []
    set_status_condition(conditions, cond(lastTransitionTime=T1), now=T0)
    assert conditions[0]["lastTransitionTime"] == T1


def test_same_condition_again_changes_nothing() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    assert not set_status_condition(conditions, cond(), now=T1)
    assert conditions == [cond(lastTransitionTime=T0)]


def test_reason_and_message_change_without_moving_transition_time() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    assert set_status_condition(conditions, cond(reason="Other", message="new"), now=T1)
    assert conditions == [cond(reason="Other", message="new", lastTransitionTime=T0)]


def test_status_change_moves_transition_time() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    assert set_status_condition(conditions, cond(status="False"), now=T1)
    assert conditions[0]["status"] == "False"
    assert conditions[0]["lastTransitionTime"] == T1


def test_status_change_prefers_the_given_transition_time() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    given = "2030-01-01T00:00:00Z"
    set_status_condition(conditions, cond(status="False", lastTransitionTime=given), now=T1)
    assert conditions[0]["lastTransitionTime"] == given


def test_transition_time_is_not_overwritten_without_status_change() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    set_status_condition(conditions, cond(lastTransitionTime=T1), now=T1)
    assert conditions[0]["lastTransitionTime"] == T0


def test_observed_generation_is_updated_and_zero_omitted() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    assert set_status_condition(conditions, cond(observedGeneration=3), now=T1)
    assert conditions[0]["observedGeneration"] == 3
    assert set_status_condition(conditions, cond(observedGeneration=0), now=T1)
    assert "observedGeneration" not in conditions[0]


def test_other_conditions_are_untouched() -> None:
    other = {"type": "Progressing", "status": "True", "reason": "P", "message": ""}
    conditions = [dict(other), cond(lastTransitionTime=T0)]
    set_status_condition(conditions, cond(status="False"), now=T1)
    assert conditions[0] == other


def test_now_defaults_to_the_clock_and_datetimes_format_as_rfc3339() -> None:
    conditions: list[dict[str, Any]] = []
    set_status_condition(conditions, cond())
    stamp = datetime.datetime.strptime(conditions[0]["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert abs(stamp - now).total_seconds() < 60
    moment = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC)
    assert rfc3339(moment) == "2024-05-06T07:08:09Z"
    assert set_status_condition([], cond(), now=moment)


def test_find_remove_and_predicates() -> None:
    conditions = [cond(lastTransitionTime=T0)]
    assert find_condition(conditions, "Available") is conditions[0]
    assert find_condition(conditions, "Missing") is None
    assert find_condition(None, "Available") is None
    assert is_status_condition_true(conditions, "Available")
    assert not is_status_condition_false(conditions, "Available")
    assert not is_status_condition_true(conditions, "Missing")
    assert not remove_status_condition(conditions, "Missing")
    assert remove_status_condition(conditions, "Available")
    assert conditions == []
