"""LeaderWorkerSet status: counting, conditions, the conditions-changed event, the
done flag, and the Hash-mode counting (docs/hash-mode.md)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers.held import HeldReplacements
from leaderworkerset.controllers.lws.status import (
    CONDITION_REPLACEMENT_HELD,
    EXCLUSIVE_PAIRS,
    REASON_NO_REPLACEMENT_HELD,
    REASON_WAITING_FOR_TERMINATION,
    GroupCounts,
    GroupObservation,
    StatusUpdate,
    chosen_condition_types,
    count_groups,
    hash_groups,
    hash_status,
    held_condition,
    merge_conditions,
    new_condition,
    ordinal_groups,
    ordinal_status,
    status_changed,
    with_held_condition,
)
from leaderworkerset.group.readiness import (
    container_restarted,
    pod_running_and_ready,
    statefulset_ready,
    workers_ready_for_leader,
)
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import LATER, NOW, leader_pod
from tests.toolkit.statefulsets import leader_sts, worker_sts

JSON = dict[str, Any]
NAME = "lws"
SELECTOR = f"{c.LABEL_SET_NAME}={NAME},{c.LABEL_WORKER_INDEX}=0"


def _groups(
    n: int, key: str = "k", ready: bool = True, size: int = 2, start: int = 0
) -> tuple[list[JSON], list[JSON]]:
    pods = [leader_pod(NAME, i, key, ready) for i in range(start, start + n)]
    sets = [worker_sts(NAME, i, key, size, ready) for i in range(start, start + n)]
    return pods, sets


def _status(
    lws: JSON, pods: list[JSON], sets: list[JSON], key: str = "k", now: str = NOW
) -> StatusUpdate:
    replicas = len(pods)
    return ordinal_status(view_of(lws), key, leader_sts(NAME, key, replicas), pods, sets, now)


def _conditions(update: StatusUpdate) -> dict[str, str]:
    return {cond["type"]: cond["status"] for cond in update.status["conditions"]}


def _write(lws: JSON, update: StatusUpdate) -> JSON:
    out = copy.deepcopy(lws)
    out["status"] = update.status
    return out


# --- Counting -----------------------------------------------------------------------
def test_counts_ready_and_updated_groups() -> None:
    lws = lws_object(name=NAME, replicas=3)
    pods = [leader_pod(NAME, 0, "k"), leader_pod(NAME, 1, "old"), leader_pod(NAME, 2, "k", False)]
    sets = [worker_sts(NAME, 0, "k"), worker_sts(NAME, 1, "old"), worker_sts(NAME, 2, "k")]
    groups, skipped = ordinal_groups(view_of(lws), "k", pods, sets)
    assert skipped == []
    assert count_groups(groups) == GroupCounts(
        ready=2, updated=2, current=3, part_updated=2, ready_non_burst=2, part_updated_ready=1
    )


def test_worker_statefulset_must_be_ready_and_updated_too() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods = [leader_pod(NAME, 0, "k"), leader_pod(NAME, 1, "k")]
    sets = [worker_sts(NAME, 0, "k", ready=False), worker_sts(NAME, 1, "old")]
    sets[1]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "old"
    counts = count_groups(ordinal_groups(view_of(lws), "k", pods, sets)[0])
    assert (counts.ready, counts.updated) == (1, 1)


def test_groups_without_a_worker_statefulset_are_not_counted() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    counts = count_groups(ordinal_groups(view_of(lws), "k", pods, sets[:1])[0])
    assert (counts.current, counts.ready) == (1, 1)


def test_size_one_groups_are_their_leaders() -> None:
    lws = lws_object(name=NAME, replicas=2, size=1)
    pods = [leader_pod(NAME, 0, "k"), leader_pod(NAME, 1, "k", ready=False)]
    counts = count_groups(ordinal_groups(view_of(lws), "k", pods, [])[0])
    assert (counts.current, counts.ready, counts.updated) == (2, 1, 2)


def test_surge_groups_count_in_ready_and_updated_only() -> None:
    """R=4, maxSurge=1 mid-rollout can report readyReplicas 5."""
    lws = lws_object(name=NAME, replicas=4, max_surge=1)
    old_pods, old_sets = _groups(4, key="old")
    surge_pods, surge_sets = _groups(1, key="k", start=4)
    update = _status(lws, old_pods + surge_pods, old_sets + surge_sets)
    assert update.status["readyReplicas"] == 5
    assert update.status["updatedReplicas"] == 1
    assert update.status["replicas"] == 5


def test_other_pods_in_the_list_are_ignored() -> None:
    lws = lws_object(name=NAME, replicas=1)
    pods, sets = _groups(1)
    stranger = leader_pod("other", 0, "k")
    worker = leader_pod(NAME, 0, "k", name=f"{NAME}-0-1")
    worker["metadata"]["labels"][c.LABEL_WORKER_INDEX] = "1"
    update = _status(lws, [*pods, stranger, worker], sets)
    assert update.status["readyReplicas"] == 1


def test_leader_without_a_group_index_is_skipped_and_reported() -> None:
    """One bad pod does not fail the status of the whole LWS, unlike upstream (see
    docs/upstream-deviations.md#unparseable-group-index-does-not-block-status)."""
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    del pods[1]["metadata"]["labels"][c.LABEL_GROUP_INDEX]
    bad = leader_pod(NAME, "seven", "k", name="odd")
    update = _status(lws, [*pods, bad], sets)
    assert update.skipped_leaders == (f"{NAME}-1", "odd")
    assert update.status["readyReplicas"] == 1


# --- Conditions -------------------------------------------------------------
def test_creation_shows_progressing_only() -> None:
    """UpdateInProgress is never set on a fresh LWS."""
    lws = lws_object(name=NAME, replicas=2, max_surge=1)
    pods, sets = _groups(2, ready=False)
    update = _status(lws, pods, sets)
    assert _conditions(update) == {c.CONDITION_PROGRESSING: "True"}
    assert update.changed and not update.done
    assert update.event is not None
    assert (update.event.type, update.event.reason, update.event.action) == (
        "Normal",
        c.REASON_GROUPS_PROGRESSING,
        "Update",
    )
    assert update.event.note == "Replicas are progressing, with 0 groups ready of total 2 groups"
    assert update.status["hpaPodSelector"] == SELECTOR
    assert update.status["observedGeneration"] == 1
    (cond,) = update.status["conditions"]
    assert cond == {
        "type": c.CONDITION_PROGRESSING,
        "status": "True",
        "observedGeneration": 1,
        "lastTransitionTime": NOW,
        "reason": c.REASON_GROUPS_PROGRESSING,
        "message": c.MESSAGE_GROUPS_PROGRESSING,
    }


def test_all_groups_ready_is_available_and_progressing_turns_false() -> None:
    """A False condition keeps its reason and message."""
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2, ready=False)
    lws = _write(lws, _status(lws, pods, sets))
    pods, sets = _groups(2)
    update = _status(lws, pods, sets, now=LATER)
    assert _conditions(update) == {c.CONDITION_PROGRESSING: "False", c.CONDITION_AVAILABLE: "True"}
    progressing = update.status["conditions"][0]
    assert progressing["message"] == c.MESSAGE_GROUPS_PROGRESSING
    assert progressing["lastTransitionTime"] == LATER
    assert update.done
    assert update.event is not None
    assert update.event.note == "All replicas are ready, with 2 groups ready of total 2 groups"


def test_rolling_update_sets_update_in_progress() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2, key="old")
    lws = _write(lws, _status(lws, pods, sets, key="old"))
    update = _status(lws, pods, sets, key="new", now=LATER)
    assert _conditions(update) == {
        c.CONDITION_AVAILABLE: "False",
        c.CONDITION_UPDATE_IN_PROGRESS: "True",
        c.CONDITION_PROGRESSING: "True",
    }
    assert update.event is not None and update.event.reason == c.REASON_GROUPS_UPDATING
    assert update.event.note == (
        "Rolling Upgrade is in progress, with 2 groups ready of total 2 groups"
    )
    assert not update.done
    lws = _write(lws, update)
    pods, sets = _groups(2, key="new")
    final = _status(lws, pods, sets, key="new")
    assert _conditions(final) == {
        c.CONDITION_AVAILABLE: "True",
        c.CONDITION_UPDATE_IN_PROGRESS: "False",
        c.CONDITION_PROGRESSING: "False",
    }
    assert final.done


def test_scale_up_of_an_available_set_is_progressing() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    lws = _write(lws, _status(lws, pods, sets))
    lws["spec"]["replicas"] = 3
    lws["metadata"]["generation"] = 2
    more_pods, more_sets = _groups(1, ready=False, start=2)
    update = _status(lws, pods + more_pods, sets + more_sets)
    assert _conditions(update) == {c.CONDITION_AVAILABLE: "False", c.CONDITION_PROGRESSING: "True"}
    assert update.event is not None
    assert update.event.note == "Replicas are progressing, with 2 groups ready of total 3 groups"
    assert all(cond["observedGeneration"] == 2 for cond in update.status["conditions"])


def test_a_new_generation_alone_is_a_status_change_and_then_settles() -> None:
    """A spec edit that changes no group (a rollout-strategy tweak on a settled set)
    still raises status.observedGeneration, in one write; a resync after it writes nothing."""
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    lws = _write(lws, _status(lws, pods, sets))
    lws = _write(lws, _status(lws, pods, sets))
    assert not _status(lws, pods, sets, now=LATER).changed
    lws["metadata"]["generation"] = 2
    update = _status(lws, pods, sets, now=LATER)
    assert update.changed
    assert update.status["observedGeneration"] == 2
    assert {
        k: v for k, v in update.status.items() if k not in ("observedGeneration", "conditions")
    } == {k: v for k, v in lws["status"].items() if k not in ("observedGeneration", "conditions")}
    # lastTransitionTime is left out: upstream's merge (ported as is) takes a condition
    # whose observedGeneration changed as new, time included.
    assert [(x["type"], x["status"]) for x in update.status["conditions"]] == [
        (x["type"], x["status"]) for x in lws["status"]["conditions"]
    ]
    assert not _status(_write(lws, update), pods, sets, now=LATER).changed


def test_hash_mode_status_carries_the_generation_too() -> None:
    lws = lws_object(name=NAME, replicas=1, groupIdentity=c.GROUP_IDENTITY_HASH)
    lws["metadata"]["generation"] = 4
    update = hash_status(view_of(lws), "k", [], NOW)
    assert update.status["observedGeneration"] == 4


def test_scaled_to_zero_is_available_and_done() -> None:
    lws = lws_object(name=NAME, replicas=0)
    update = _status(lws, [], [])
    assert _conditions(update) == {c.CONDITION_AVAILABLE: "True"}
    assert update.done
    assert update.event is not None
    assert update.event.note == "All replicas are ready, with 0 groups ready of total 0 groups"


def test_partition_floor_allows_available_but_not_done() -> None:
    """Only groups in [P_user, R) must be updated."""
    lws = lws_object(name=NAME, replicas=4, partition=2)
    old_pods, old_sets = _groups(2, key="old")
    new_pods, new_sets = _groups(2, key="k", start=2)
    update = _status(lws, old_pods + new_pods, old_sets + new_sets)
    assert _conditions(update) == {c.CONDITION_AVAILABLE: "True"}
    assert not update.done


def test_nothing_changed_means_no_write_and_no_event() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    lws = _write(lws, _status(lws, pods, sets))
    again = _status(lws, pods, sets, now=LATER)
    assert not again.changed and again.event is None
    assert again.status == lws["status"]


def test_a_generation_bump_alone_rewrites_and_re_emits() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    lws = _write(lws, _status(lws, pods, sets))
    lws["metadata"]["generation"] = 5
    update = _status(lws, pods, sets, now=LATER)
    assert update.changed and update.event is not None
    (available,) = update.status["conditions"]
    assert available["observedGeneration"] == 5
    assert available["lastTransitionTime"] == LATER, "replaced: the generation differed"


def test_deleted_conditions_are_repaired() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2, ready=False)
    lws = _write(lws, _status(lws, pods, sets))
    lws["status"]["conditions"] = []
    update = _status(lws, pods, sets)
    assert _conditions(update) == {c.CONDITION_PROGRESSING: "True"}
    assert update.changed


def test_existing_selector_and_unknown_members_are_kept() -> None:
    lws = lws_object(name=NAME, replicas=1)
    lws["status"] = {"hpaPodSelector": "custom", "xExtra": 1}
    pods, sets = _groups(1)
    update = _status(lws, pods, sets)
    assert update.status["hpaPodSelector"] == "custom"
    assert update.status["xExtra"] == 1


def test_status_replicas_come_from_the_leader_statefulset() -> None:
    lws = lws_object(name=NAME, replicas=2)
    sts = leader_sts(NAME, "k", 3)
    sts["status"] = {"replicas": 7}
    update = ordinal_status(view_of(lws), "k", sts, [], [], NOW)
    assert update.status["replicas"] == 7


def test_status_changed_treats_absent_as_zero() -> None:
    new = {
        "replicas": 0,
        "readyReplicas": 0,
        "updatedReplicas": 0,
        "observedGeneration": 0,
        "hpaPodSelector": "",
        "conditions": [],
    }
    assert not status_changed({}, new)
    assert not status_changed(None, new)
    assert status_changed({}, new | {"readyReplicas": 1})


def test_chosen_conditions() -> None:
    assert chosen_condition_types(GroupCounts(current=2, part_updated=1), 2) == [
        c.CONDITION_UPDATE_IN_PROGRESS,
        c.CONDITION_PROGRESSING,
    ]
    full = GroupCounts(current=2, part_updated=2, ready_non_burst=2, part_updated_ready=2)
    assert chosen_condition_types(full, 2) == [c.CONDITION_AVAILABLE]
    assert chosen_condition_types(full, 3) == [c.CONDITION_PROGRESSING]


def test_merge_appends_only_missing_true_conditions() -> None:
    merged = merge_conditions([], [new_condition(c.CONDITION_PROGRESSING, 3, NOW)], 3, NOW)
    assert [m["type"] for m in merged] == [c.CONDITION_PROGRESSING]


def test_merge_keeps_an_unchanged_condition_untouched() -> None:
    existing = [new_condition(c.CONDITION_AVAILABLE, 3, NOW)]
    merged = merge_conditions(existing, [new_condition(c.CONDITION_AVAILABLE, 3, LATER)], 3, LATER)
    assert merged == existing


# --- Properties -----------------------------------------------------------------------------
condition_types = st.sampled_from(
    [c.CONDITION_AVAILABLE, c.CONDITION_PROGRESSING, c.CONDITION_UPDATE_IN_PROGRESS]
)
existing_conditions = st.lists(
    st.builds(
        lambda t, s, g: {
            "type": t,
            "status": s,
            "observedGeneration": g,
            "lastTransitionTime": NOW,
            "reason": "R",
            "message": "M",
        },
        condition_types,
        st.sampled_from(["True", "False", "Unknown"]),
        st.integers(1, 3),
    ),
    max_size=4,
    unique_by=lambda cond: cond["type"],
)
counts = st.builds(
    GroupCounts,
    ready=st.integers(0, 5),
    updated=st.integers(0, 5),
    current=st.integers(0, 5),
    part_updated=st.integers(0, 5),
    ready_non_burst=st.integers(0, 5),
    part_updated_ready=st.integers(0, 5),
)


@settings(max_examples=300)
@given(existing_conditions, counts, st.integers(0, 5), st.integers(1, 3))
def test_exclusive_conditions_are_never_both_true(
    existing: list[JSON], observed: GroupCounts, replicas: int, generation: int
) -> None:
    fresh = [
        new_condition(t, generation, LATER) for t in chosen_condition_types(observed, replicas)
    ]
    merged = merge_conditions(existing, fresh, generation, LATER)
    true = {m["type"] for m in merged if m["status"] == "True"}
    assert not any(pair <= true for pair in EXCLUSIVE_PAIRS)
    assert {f["type"] for f in fresh} <= true
    assert all(m["observedGeneration"] == generation for m in merged)
    assert {m["type"] for m in existing} <= {m["type"] for m in merged}, "never removed"
    assert merge_conditions(merged, fresh, generation, LATER) == merged, "idempotent"


@settings(max_examples=200)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=8))
def test_counts_are_bounded(flags: list[tuple[bool, bool, bool]]) -> None:
    groups = [GroupObservation(r, u, d, d) for r, u, d in flags]
    got = count_groups(groups)
    assert got.part_updated_ready <= min(got.part_updated, got.ready_non_burst)
    assert got.part_updated <= got.current <= len(groups)
    assert got.ready <= len(groups) and got.updated <= len(groups)


# --- Hash mode ---------------------------------------------------------------------
def _hash_lws(replicas: int = 2, size: int = 2) -> JSON:
    return lws_object(name=NAME, replicas=replicas, size=size, groupIdentity=c.GROUP_IDENTITY_HASH)


def _hash_leader(suffix: str, key: str, ready: bool = True, **kw: Any) -> JSON:
    pod = leader_pod(NAME, f"gk{suffix}", key, ready, name=f"{NAME}-abc-{suffix}", **kw)
    if not ready:
        pod["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    return pod


def test_hash_status_counts_every_live_leader() -> None:
    lws = _hash_lws(replicas=3)
    pods = [
        _hash_leader("a", "k"),
        _hash_leader("b", "old"),
        _hash_leader("c", "k", ready=False),
        _hash_leader("d", "old", terminating=True),
    ]
    update = hash_status(view_of(lws), "k", pods, NOW)
    assert update.status["replicas"] == 3, "gated counts, terminating does not"
    assert update.status["readyReplicas"] == 2
    assert update.status["updatedReplicas"] == 2
    assert update.status["hpaPodSelector"] == SELECTOR
    assert update.skipped_leaders == ()


def test_hash_rollout_conditions() -> None:
    lws = _hash_lws(replicas=2)
    old = [_hash_leader("a", "old"), _hash_leader("b", "old")]
    lws = _write(lws, hash_status(view_of(lws), "old", old, NOW))
    assert _conditions(hash_status(view_of(lws), "old", old, NOW)) == {
        c.CONDITION_AVAILABLE: "True"
    }
    surge = [*old, _hash_leader("c", "k", ready=False)]
    update = hash_status(view_of(lws), "k", surge, LATER)
    assert _conditions(update) == {
        c.CONDITION_AVAILABLE: "False",
        c.CONDITION_UPDATE_IN_PROGRESS: "True",
        c.CONDITION_PROGRESSING: "True",
    }
    lws = _write(lws, update)
    almost = [_hash_leader("a", "old"), _hash_leader("c", "k"), _hash_leader("d", "k")]
    update = hash_status(view_of(lws), "k", almost, LATER)
    assert _conditions(update)[c.CONDITION_AVAILABLE] == "True", "the old surplus is surge"
    # The old leader may still need its revision to rebuild its workers.
    assert not update.done
    done = hash_status(view_of(lws), "k", [_hash_leader("c", "k"), _hash_leader("d", "k")], LATER)
    assert done.done
    assert update.status["replicas"] == 3


def test_hash_groups_rank_updated_and_ready_groups_as_the_desired_ones() -> None:
    lws = _hash_lws(replicas=2)
    pods = [
        _hash_leader("a", "old"),
        _hash_leader("b", "k", ready=False),
        _hash_leader("c", "k"),
    ]
    groups = hash_groups(view_of(lws), "k", pods)
    assert [(g.ready, g.updated, g.desired) for g in groups] == [
        (True, True, True),
        (False, True, True),
        (True, False, False),
    ]
    counts = count_groups(groups)
    assert (counts.current, counts.part_updated, counts.ready_non_burst) == (2, 2, 1)


def test_hash_scale_up_is_progressing() -> None:
    lws = _hash_lws(replicas=3)
    update = hash_status(view_of(lws), "k", [_hash_leader("a", "k"), _hash_leader("b", "k")], NOW)
    assert _conditions(update) == {c.CONDITION_PROGRESSING: "True"}
    assert not update.done


# --- Readiness helpers --------------------------------------------------------------------
def test_pod_running_and_ready() -> None:
    assert pod_running_and_ready(leader_pod(NAME, 0, "k"))
    assert not pod_running_and_ready(leader_pod(NAME, 0, "k", ready=False))
    assert not pod_running_and_ready(leader_pod(NAME, 0, "k", phase="Succeeded"))
    assert not pod_running_and_ready({})


def test_statefulset_ready() -> None:
    assert statefulset_ready(worker_sts(NAME, 0, "k", size=3))
    assert not statefulset_ready(worker_sts(NAME, 0, "k", size=3, ready=False))
    rolling = worker_sts(NAME, 0, "k")
    rolling["status"]["updateRevision"] = "rev-2"
    assert not statefulset_ready(rolling)
    assert statefulset_ready({"spec": {"replicas": 0}, "status": {}})


def test_workers_ready_for_leader() -> None:
    pod = leader_pod(NAME, 0, "k")
    assert workers_ready_for_leader(pod, worker_sts(NAME, 0, "k"))
    assert not workers_ready_for_leader(pod, worker_sts(NAME, 0, "old"))
    assert not workers_ready_for_leader(pod, worker_sts(NAME, 0, "k", ready=False))
    assert not workers_ready_for_leader(pod, None)


def _with_statuses(phase: str, restarts: int, init_restarts: int = 0) -> JSON:
    return {
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
            "initContainerStatuses": [{"name": "i", "restartCount": init_restarts}],
        }
    }


def test_container_restarted() -> None:
    assert container_restarted(_with_statuses("Running", 1))
    assert container_restarted(_with_statuses("Pending", 0, init_restarts=2))
    assert not container_restarted(_with_statuses("Running", 0))
    assert not container_restarted(_with_statuses("Failed", 3))
    assert not container_restarted(_with_statuses("Succeeded", 3))


# --- The observation memo -------------------------------------------------------------
def _observed(
    lws: JSON, pods: list[JSON], sets: list[JSON], memo: dict[str, Any] | None = None
) -> Any:
    """One observation pass of `lws`'s mode: Hash mode reads the leaders alone."""
    if lws["spec"].get("groupIdentity") == c.GROUP_IDENTITY_HASH:
        return hash_groups(view_of(lws), "k", pods, memo)
    return ordinal_groups(view_of(lws), "k", pods, sets, memo)


@pytest.mark.parametrize("mode", [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH])
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.booleans(), st.booleans(), st.sampled_from("kq")),
        min_size=1,
    )
)
def test_memo_gives_what_a_fresh_pass_gives(
    mode: str, changes: list[tuple[int, bool, bool, str]]
) -> None:
    """Objects replaced one at a time, as the caches replace them: each pass with the
    memo counts what a pass without one counts (Hash mode has no worker StatefulSets
    to read: it ignores the drawn worker readiness)."""
    lws = lws_object(name=NAME, replicas=4)
    if mode == c.GROUP_IDENTITY_HASH:
        lws["spec"]["groupIdentity"] = mode
    pods, sets = _groups(6)
    memo: dict[str, Any] = {}
    for index, leader_ready, workers_ready, key in changes:
        pods[index] = leader_pod(NAME, index, key, leader_ready)
        sets[index] = worker_sts(NAME, index, key, 2, workers_ready)
        assert _observed(lws, pods, sets, memo) == _observed(lws, pods, sets)
    assert len(memo) == 6


def test_memo_keeps_the_observation_of_the_same_objects() -> None:
    """The caches never edit a cached object, so the same object is not looked at
    again; an edit in place (which they never make) shows the reuse."""
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    memo: dict[str, Any] = {}
    first, _ = ordinal_groups(view_of(lws), "k", pods, sets, memo)
    pods[0]["status"]["conditions"] = []
    assert ordinal_groups(view_of(lws), "k", pods, sets, memo)[0] == first
    pods[0] = leader_pod(NAME, 0, "k", False)
    assert count_groups(ordinal_groups(view_of(lws), "k", pods, sets, memo)[0]).ready == 1
    # What the observation depends on besides the objects is part of the memo.
    assert count_groups(ordinal_groups(view_of(lws), "q", pods, sets, memo)[0]).updated == 0


def test_hash_memo_keeps_the_observation_of_the_same_objects() -> None:
    """As for Ordinal mode: the same leader object is not looked at again, until it is
    replaced or the revision it is compared with changes."""
    lws = _hash_lws(replicas=2)
    pods = [_hash_leader("a", "k"), _hash_leader("b", "k")]
    memo: dict[str, Any] = {}
    first = hash_groups(view_of(lws), "k", pods, memo)
    pods[0]["status"]["conditions"] = []
    assert hash_groups(view_of(lws), "k", pods, memo) == first
    pods[0] = _hash_leader("a", "k", ready=False)
    assert count_groups(hash_groups(view_of(lws), "k", pods, memo)).ready == 1
    assert count_groups(hash_groups(view_of(lws), "q", pods, memo)).updated == 0


@pytest.mark.parametrize("mode", [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH])
def test_the_status_of_each_mode_reads_through_its_memo(mode: str) -> None:
    lws = lws_object(name=NAME, replicas=2, groupIdentity=mode)
    pods, sets = _groups(2)
    memo: dict[str, Any] = {}

    def ready() -> int:
        if mode == c.GROUP_IDENTITY_HASH:
            return int(hash_status(view_of(lws), "k", pods, NOW, memo=memo).status["readyReplicas"])
        update = ordinal_status(view_of(lws), "k", leader_sts(NAME, "k", 2), pods, sets, NOW, memo)
        return int(update.status["readyReplicas"])

    assert ready() == 2
    pods[0]["status"]["conditions"] = []  # an edit in place: only a fresh look sees it
    assert ready() == 2


# --- Observing groups: edges ---------------------------------------------------------------
def test_a_size_one_group_ignores_a_stale_worker_statefulset() -> None:
    lws = lws_object(name=NAME, replicas=1, size=1)
    pods = [leader_pod(NAME, 0, "k")]
    groups, _ = ordinal_groups(view_of(lws), "k", pods, [worker_sts(NAME, 0, "old", ready=False)])
    counts = count_groups(groups)
    assert (counts.ready, counts.updated) == (1, 1)


def test_a_group_still_being_built_is_not_reported_as_skipped() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    groups, skipped = ordinal_groups(view_of(lws), "k", pods, sets[:1])
    assert (len(groups), skipped) == (1, [])


def test_a_group_at_or_above_the_replicas_is_surge() -> None:
    lws = lws_object(name=NAME, replicas=2, partition=1)
    pods, sets = _groups(3)
    groups, _ = ordinal_groups(view_of(lws), "k", pods, sets)
    assert [(g.desired, g.in_range) for g in groups] == [
        (True, False),
        (True, True),
        (False, False),
    ]


def test_hash_groups_rank_ready_outdated_groups_before_unready_outdated_ones() -> None:
    lws = _hash_lws(replicas=1)
    pods = [_hash_leader("a", "old", ready=False), _hash_leader("b", "old")]
    assert [(g.ready, g.desired) for g in hash_groups(view_of(lws), "k", pods)] == [
        (True, True),
        (False, False),
    ]


def test_hash_status_ignores_another_lws_leaders() -> None:
    lws = _hash_lws(replicas=1)
    stranger = leader_pod("other", "gk", "k", name="other-abc")
    update = hash_status(view_of(lws), "k", [_hash_leader("a", "k"), stranger], NOW)
    assert (update.status["replicas"], update.status["readyReplicas"]) == (1, 1)


def test_a_condition_turned_false_by_its_partner_keeps_its_own_text() -> None:
    existing = [new_condition(c.CONDITION_AVAILABLE, 1, NOW)]
    merged = merge_conditions(
        existing, [new_condition(c.CONDITION_PROGRESSING, 2, LATER)], 2, LATER
    )
    assert merged == [
        {
            **existing[0],
            "status": "False",
            "observedGeneration": 2,
            "lastTransitionTime": LATER,
        },
        new_condition(c.CONDITION_PROGRESSING, 2, LATER),
    ]
    assert existing == [new_condition(c.CONDITION_AVAILABLE, 1, NOW)], "input left alone"


# --- Hash mode: held replacements ---------------------------------------------------------
def _held(count: int) -> HeldReplacements:
    leaders = tuple(f"leader-{i}" for i in range(count))
    return HeldReplacements(leaders, tuple(f"group{i}-0123456789" for i in range(count)))


def _waiting(count: int, *shown: str) -> str:
    return (
        f"{count} replacement leader(s) wait for tearing-down groups to finish terminating: "
        + "; ".join(shown)
    )


def test_the_held_condition_names_at_most_three_waits_and_counts_the_rest() -> None:
    def message(count: int) -> str:
        return str(held_condition(_held(count), 4, NOW)["message"])

    assert message(1) == _waiting(1, "leader-0 waits for group group0-0")
    three = ["leader-0 waits for group group0-0", "leader-1 waits for group group1-0"]
    three.append("leader-2 waits for group group2-0")
    assert message(3) == _waiting(3, *three)
    assert message(4) == _waiting(4, *three, "and 1 more")
    assert message(6) == _waiting(6, *three, "and 3 more")


def test_the_held_condition_when_something_is_held_and_when_not() -> None:
    assert held_condition(_held(1), 4, NOW) == {
        "type": CONDITION_REPLACEMENT_HELD,
        "status": "True",
        "observedGeneration": 4,
        "lastTransitionTime": NOW,
        "reason": REASON_WAITING_FOR_TERMINATION,
        "message": _waiting(1, "leader-0 waits for group group0-0"),
    }
    assert held_condition(HeldReplacements(), 4, NOW) == {
        "type": CONDITION_REPLACEMENT_HELD,
        "status": "False",
        "observedGeneration": 4,
        "lastTransitionTime": NOW,
        "reason": REASON_NO_REPLACEMENT_HELD,
        "message": "No replacement group is waiting for a group to terminate",
    }


def test_the_held_condition_appears_only_once_something_was_held() -> None:
    assert with_held_condition([], HeldReplacements(), 1, NOW) == []
    (added,) = with_held_condition([], _held(1), 1, NOW)
    assert (added["status"], added["lastTransitionTime"]) == ("True", NOW)
    (still,) = with_held_condition([added], _held(2), 1, LATER)
    assert (still["status"], still["lastTransitionTime"]) == ("True", NOW)
    assert still["message"].startswith("2 replacement")
    (released,) = with_held_condition([still], HeldReplacements(), 1, LATER)
    assert (released["status"], released["lastTransitionTime"]) == ("False", LATER)


def test_a_held_condition_without_a_transition_time_gets_now() -> None:
    (old,) = with_held_condition([], _held(1), 1, NOW)
    del old["lastTransitionTime"]
    (same,) = with_held_condition([old], _held(1), 1, LATER)
    assert same["lastTransitionTime"] == LATER


def test_hash_status_reports_held_replacements_at_the_lws_generation() -> None:
    lws = lws_object(name=NAME, replicas=1, generation=3, groupIdentity=c.GROUP_IDENTITY_HASH)
    update = hash_status(view_of(lws), "k", [_hash_leader("a", "k")], LATER, held=_held(1))
    conditions = {cond["type"]: cond for cond in update.status["conditions"]}
    held = conditions[CONDITION_REPLACEMENT_HELD]
    assert (held["status"], held["observedGeneration"], held["lastTransitionTime"]) == (
        "True",
        3,
        LATER,
    )
    assert conditions[c.CONDITION_AVAILABLE]["lastTransitionTime"] == LATER
    assert update.changed


# --- The restart budget (maxGroupRestarts, upstream #877) -----------------------------------
def _with_budget(lws: JSON, budget: int, counts: dict[str, int]) -> JSON:
    lws = copy.deepcopy(lws)
    lws["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = budget
    annotations = lws["metadata"].setdefault("annotations", {})
    annotations[c.ANNOTATION_GROUP_RESTART_COUNTS] = json.dumps(counts)
    return lws


def test_a_live_group_past_its_budget_makes_the_set_failed_and_not_available() -> None:
    lws = lws_object(name=NAME, replicas=2)
    pods, sets = _groups(2)
    lws = _write(lws, _status(lws, pods, sets))
    assert _conditions(_status(lws, pods, sets)) == {c.CONDITION_AVAILABLE: "True"}
    # At the budget the group may still be recreated no more, but it is not past it.
    assert c.CONDITION_FAILED not in _conditions(
        _status(_with_budget(lws, 2, {"1": 2}), pods, sets)
    )
    failed = _with_budget(lws, 2, {"1": 3})
    update = _status(failed, pods, sets, now=LATER)
    assert _conditions(update) == {c.CONDITION_AVAILABLE: "False", c.CONDITION_FAILED: "True"}
    cond = next(x for x in update.status["conditions"] if x["type"] == c.CONDITION_FAILED)
    assert (cond["reason"], cond["message"]) == (
        "MaxGroupRestartsExceeded",
        "One or more groups exceeded maxGroupRestarts",
    )
    # A count of a group that no longer exists (scaled away) fails nothing.
    assert c.CONDITION_FAILED not in _conditions(
        _status(_with_budget(lws, 2, {"7": 3}), pods, sets)
    )
    # Raising the budget lets the set become Available again, and Failed turns False.
    healed = _write(failed, update)
    healed["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 5
    assert _conditions(_status(healed, pods, sets)) == {
        c.CONDITION_AVAILABLE: "True",
        c.CONDITION_FAILED: "False",
    }


def test_failed_excludes_every_other_condition() -> None:
    for other in (c.CONDITION_AVAILABLE, c.CONDITION_PROGRESSING, c.CONDITION_UPDATE_IN_PROGRESS):
        assert frozenset({c.CONDITION_FAILED, other}) in EXCLUSIVE_PAIRS
    counts = GroupCounts(0, 0, 2, 0, 0, 0)
    assert chosen_condition_types(counts, 2, failed=True) == [c.CONDITION_FAILED]
