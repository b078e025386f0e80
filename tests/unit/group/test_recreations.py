"""The records behind the restart budget and the group back-off: the delays, when they
reset, reading and writing the annotations, which groups are past their budget, and
which record a new Hash group takes over."""

from __future__ import annotations

import json
import re

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.group.recreations import (
    BackoffPolicy,
    GroupRecords,
    RecordError,
    Recreation,
    claimable,
    exhausted,
    failed_groups,
    format_epoch,
    read_records_leniently,
)

POLICY = BackoffPolicy(initial=10, cap=300, reset_after=600)


def test_the_first_recreation_is_immediate_then_the_waits_double_up_to_the_cap() -> None:
    assert [POLICY.delay(n) for n in range(8)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_the_wait_counts_from_the_last_recreation() -> None:
    record = Recreation(recent=2, last=1000.0)
    assert POLICY.due(record, now=1005.0) == 1020.0
    assert POLICY.due(None, now=1005.0) == 1005.0


def test_a_group_quiet_for_reset_after_starts_again_without_a_wait() -> None:
    record = Recreation(recent=6, last=1000.0)
    assert POLICY.recent(record, now=1599.0) == 6
    assert POLICY.recent(record, now=1600.0) == 0
    assert POLICY.due(record, now=1600.0) == 1600.0
    # The record says when the next recreation may come, for readers without the policy.
    assert POLICY.next_record(record, now=1600.0) == Recreation(1, 1600.0, 1610.0)
    assert POLICY.next_record(record, now=1100.0) == Recreation(7, 1100.0, 1400.0)
    assert BackoffPolicy(initial=0).next_record(None, now=5.0) == Recreation(1, 5.0, None)


def test_a_thousand_recreations_stay_at_the_cap() -> None:
    assert POLICY.delay(5000) == 300


def test_initial_zero_turns_the_back_off_off() -> None:
    off = BackoffPolicy(initial=0)
    assert not off.enabled
    assert off.due(Recreation(5, 1000.0), now=1001.0) == 1001.0


def test_records_round_trip_through_their_annotations() -> None:
    records = GroupRecords(
        {"0": 2}, {"0": Recreation(3, 1_700_000_000.5, 1_700_000_040.5), "1": Recreation(1, 7.0)}
    )
    annotations = {k: v for k, v in records.annotations().items() if v is not None}
    assert json.loads(annotations[c.ANNOTATION_GROUP_RESTART_COUNTS]) == {"0": 2}
    assert read_records_leniently(annotations) == (records, [])
    assert GroupRecords({}, {}).annotations() == {
        c.ANNOTATION_GROUP_RESTART_COUNTS: None,
        c.ANNOTATION_GROUP_RECREATIONS: None,
    }


def test_upstreams_counts_annotation_is_read_as_upstream_writes_it() -> None:
    records, _ = read_records_leniently({c.ANNOTATION_GROUP_RESTART_COUNTS: '{"0":1,"3":4}'})
    assert records.counts == {
        "0": 1,
        "3": 4,
    }


@pytest.mark.parametrize(
    "annotation,value",
    [
        (c.ANNOTATION_GROUP_RESTART_COUNTS, "not json"),
        (c.ANNOTATION_GROUP_RESTART_COUNTS, '{"0": -1}'),
        (c.ANNOTATION_GROUP_RESTART_COUNTS, "[1]"),
        (c.ANNOTATION_GROUP_RECREATIONS, '{"0": {"recent": 1}}'),
        (c.ANNOTATION_GROUP_RECREATIONS, '{"0": {"recent": 1, "last": "yesterday"}}'),
    ],
)
def test_a_malformed_record_is_an_error_naming_its_annotation(annotation: str, value: str) -> None:
    records, (problem,) = read_records_leniently({annotation: value})
    assert isinstance(problem, RecordError)
    assert re.search(annotation.replace(".", r"\."), str(problem))
    assert records == GroupRecords({}, {})


def test_the_budget_is_used_up_at_count_equal_to_it_and_failed_past_it() -> None:
    assert not exhausted(2, None)
    assert not exhausted(1, 2)
    assert exhausted(2, 2)
    assert exhausted(0, 0)
    records = GroupRecords({"0": 3, "1": 2, "gone": 9}, {})
    assert failed_groups(records, 2, live={"0": 0, "1": 0}) == ["0"]
    assert failed_groups(records, None, live={"0": 0}) == []
    # Upstream reads the leader's own count too: the higher one counts.
    assert failed_groups(records, 2, live={"1": 3}) == ["1"]
    assert failed_groups(GroupRecords({}, {}), 2, live={"1": 2}) == []


def test_moving_a_record_carries_both_the_count_and_the_back_off() -> None:
    records = GroupRecords({"old": 2}, {"old": Recreation(2, 10.0), "other": Recreation(1, 5.0)})
    moved = records.moved("old", "new")
    assert moved.counts == {"new": 2}
    assert moved.recreations == {"new": Recreation(2, 10.0), "other": Recreation(1, 5.0)}


def test_a_new_hash_group_takes_the_oldest_record_of_a_group_without_a_live_leader() -> None:
    records = GroupRecords(
        {},
        {
            "live": Recreation(1, 100.0),
            "gone-late": Recreation(1, 300.0),
            "gone-early": Recreation(1, 200.0),
        },
    )
    assert claimable(records, live={"live"}, created=400.0) == "gone-early"
    # A group made before a recreation cannot be its replacement.
    assert claimable(records, live={"live"}, created=150.0) is None
    # Whole seconds: a group made in the same second as the recreation may be.
    assert claimable(records, live={"live", "gone-early"}, created=299.4) == "gone-late"
    assert claimable(GroupRecords({}, {}), live=set(), created=1.0) is None
    # A group past its budget went by a scale-down or a rollout: nobody takes it over.
    failed = GroupRecords({"gone-early": 3}, records.recreations)
    assert claimable(failed, live={"live"}, created=400.0, budget=2) == "gone-late"


def test_one_unreadable_record_leaves_the_other() -> None:
    records, problems = read_records_leniently(
        {c.ANNOTATION_GROUP_RESTART_COUNTS: '{"0": 4}', c.ANNOTATION_GROUP_RECREATIONS: "x"}
    )
    assert records.counts == {"0": 4} and records.recreations == {}
    assert len(problems) == 1 and c.ANNOTATION_GROUP_RECREATIONS in str(problems[0])


def test_times_are_written_in_rfc_3339() -> None:
    assert format_epoch(0.25) == "1970-01-01T00:00:00.250000Z"
