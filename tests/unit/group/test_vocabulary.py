"""The group vocabulary shared by the controllers and the webhooks: roles, gates,
TPU detection, Go integers and the Hash-mode names."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.api.go.ints import GoIntError, go_atoi, go_atoi_or_none, go_div, go_mod
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.headless_service import headless_service
from leaderworkerset.group import gates, roles
from leaderworkerset.group import names as naming
from leaderworkerset.group.tpu import pod_requests_tpus
from leaderworkerset.runtime.events import object_reference
from leaderworkerset.webhooks.denial import Denied, atoi, display_name
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.recorded_events import RecordedEvents, Told

JSON = dict[str, Any]
KEY = "0123456789abcdef0123456789abcdef01234567"


def pod(labels: dict[str, str] | None = None, **spec: Any) -> JSON:
    return a_pod("p", labels=labels or {}, spec=dict(spec))


# --- roles -------------------------------------------------------------------------------
def test_leader_and_worker_by_worker_index() -> None:
    leader = pod({c.LABEL_WORKER_INDEX: "0"})
    worker = pod({c.LABEL_WORKER_INDEX: "3"})
    unlabelled = pod()
    assert roles.is_leader(leader) and not roles.is_worker(leader)
    assert roles.is_worker(worker) and not roles.is_leader(worker)
    assert not roles.is_leader(unlabelled) and not roles.is_worker(unlabelled)
    assert roles.worker_index(worker) == "3" and roles.worker_index(unlabelled) is None
    assert roles.leaders([worker, leader, unlabelled]) == [leader]


def test_group_labels_read_as_strings_or_none() -> None:
    labelled = pod({c.LABEL_GROUP_INDEX: "2", c.LABEL_GROUP_KEY: KEY, c.LABEL_SET_NAME: "lws"})
    assert roles.group_index(labelled) == "2"
    assert roles.group_key(labelled) == KEY
    assert roles.lws_name(labelled) == "lws"
    bare: JSON = {"metadata": None}
    assert roles.group_index(bare) is None
    assert roles.group_key(bare) is None
    assert roles.lws_name(bare) is None


def test_group_size_is_the_pods_annotation_else_the_live_size_if_given() -> None:
    live = view_of(leaderworkerset(size=5))
    sized: JSON = {"metadata": {"annotations": {c.ANNOTATION_SIZE: "3"}}}
    assert roles.group_size(sized) == 3 and roles.group_size(sized, live) == 3
    for unsized in (pod(), {"metadata": {"annotations": {c.ANNOTATION_SIZE: "x"}}}, None):
        assert roles.group_size(unsized) is None
        assert roles.group_size(unsized, live) == 5


# --- gates -------------------------------------------------------------------------------
def test_scheduling_gate_added_once_and_found_by_position() -> None:
    spec: JSON = {"schedulingGates": [{"name": "other"}]}
    gates.add_scheduling_gate(spec)
    gates.add_scheduling_gate(spec)
    names = [g["name"] for g in spec["schedulingGates"]]
    assert names == ["other", c.SCHEDULING_GATE_GROUP_REPLACEMENT]
    gated = {"spec": spec}
    assert gates.scheduling_gate_index(gated) == 1
    assert gates.is_scheduling_gated(gated)
    assert gates.scheduling_gate_index(pod()) is None
    assert not gates.is_scheduling_gated({"spec": {"schedulingGates": None}})


def test_remove_scheduling_gate_patch_tests_the_name_first() -> None:
    assert gates.remove_scheduling_gate_patch(2) == [
        {
            "op": "test",
            "path": "/spec/schedulingGates/2/name",
            "value": c.SCHEDULING_GATE_GROUP_REPLACEMENT,
        },
        {"op": "remove", "path": "/spec/schedulingGates/2"},
    ]


def test_group_ready_gate_added_once() -> None:
    spec: JSON = {}
    gates.add_group_ready_gate(spec)
    gates.add_group_ready_gate(spec)
    assert spec == {"readinessGates": [{"conditionType": c.CONDITION_GROUP_READY}]}
    assert gates.has_group_ready_gate({"spec": spec})
    assert not gates.has_group_ready_gate({"spec": {"readinessGates": [{"conditionType": "x"}]}})
    assert not gates.has_group_ready_gate(pod())


def test_group_ready_condition_status() -> None:
    leader = pod()
    assert gates.group_ready_condition(leader) is None
    leader["status"] = {
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": c.CONDITION_GROUP_READY, "status": "True"},
        ]
    }
    assert gates.group_ready_condition(leader) == "True"


# --- TPUs ----------------------------------------------------------------------------------
def test_pod_requests_tpus_in_any_container() -> None:
    tpu = {"resources": {"limits": {c.TPU_RESOURCE_NAME: "4"}}}
    assert pod_requests_tpus(pod(initContainers=[tpu], containers=[{}]))
    assert not pod_requests_tpus(pod(containers=[{"resources": {"limits": {"cpu": "1"}}}]))
    assert not pod_requests_tpus(pod())


# --- Go integers -----------------------------------------------------------------------------
def test_go_atoi_raises_a_value_error_with_go_text_that_webhooks_turn_into_a_denial() -> None:
    with pytest.raises(GoIntError, match=r'^strconv.Atoi: parsing " 1": invalid syntax$'):
        go_atoi(" 1")
    assert issubclass(GoIntError, ValueError)
    with pytest.raises(Denied) as denied:
        atoi("1_0")
    assert denied.value.message == 'strconv.Atoi: parsing "1_0": invalid syntax'
    assert go_atoi("-12") == -12


def test_go_atoi_or_none_reads_what_atoi_reads_and_nothing_else() -> None:
    assert go_atoi_or_none("+7") == 7 and go_atoi_or_none("-0") == 0
    assert go_atoi_or_none("9223372036854775807") == 2**63 - 1
    for unread in (None, 3, "", "+", " 1", "1_0", "\u0663", "9223372036854775808"):
        assert go_atoi_or_none(unread) is None, unread


@given(st.integers(-1000, 1000), st.integers(-50, 50).filter(lambda b: b != 0))
def test_go_div_and_mod_recompose(a: int, b: int) -> None:
    quotient, remainder = go_div(a, b), go_mod(a, b)
    assert quotient * b + remainder == a
    assert abs(remainder) < abs(b)
    assert remainder == 0 or (remainder > 0) == (a > 0)


def test_display_name_falls_back_to_generate_name() -> None:
    assert display_name({"metadata": {"name": "a", "generateName": "b-"}}) == "a"
    assert display_name({"metadata": {"generateName": "b-"}}) == "b-"
    assert display_name({}) == ""


# --- Hash-mode names ---------------------------------------------------------------------------
def test_hash_names_share_the_key_prefix() -> None:
    host = naming.hash_hostname(KEY)
    assert host == KEY[:8]
    assert naming.hash_worker_hostname(KEY, 3) == f"{host}-3"
    assert naming.hash_group_service_name("lws", KEY) == f"lws-{host}"
    assert naming.subgroup_key(KEY, 1) == naming.subgroup_key(KEY, "1")
    assert naming.leader_pod_name("lws", "2") == naming.leader_pod_name("lws", 2) == "lws-2"


def test_parse_ordinal_reads_the_int32_suffix_only() -> None:
    assert naming.parse_ordinal("web-3-2") == ("web-3", 2)
    assert naming.parse_ordinal("web-2147483647") == ("web", 2**31 - 1)
    for unread in ("web", "web-", "web-2147483648"):
        assert naming.parse_ordinal(unread) == ("", -1), unread


def test_revision_name_cuts_the_owner_to_220_bytes_without_splitting_a_character() -> None:
    assert naming.revision_name("a" * 300, "h", 3) == f"{'a' * 220}-h-3"
    # "é" is two bytes, the second past the cut: the whole character goes.
    assert naming.revision_name("a" * 219 + "é", "h", 3) == f"{'a' * 219}-h-3"


# --- Services and events ------------------------------------------------------------------------
def test_headless_service_publishes_not_ready_addresses() -> None:
    owner = {"kind": "Pod", "name": "lws-0", "uid": "u"}
    svc = headless_service("s", "ns", "lws", {"a": "b"}, owner)
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": {"a": "b"},
        "publishNotReadyAddresses": True,
    }
    assert svc["metadata"]["labels"] == {c.LABEL_SET_NAME: "lws"}
    assert svc["metadata"]["ownerReferences"] == [owner]


def test_record_hands_every_field_to_the_recorder() -> None:
    recorder = RecordedEvents()
    lws = {"metadata": {"name": "lws"}}
    event = ev.leader_created("lws", related={"kind": "ControllerRevision"})
    ev.record(recorder, copy.deepcopy(lws), event)
    ev.record(None, lws, event)
    assert recorder.told == [
        Told(
            object_reference(lws), event.type, event.reason, event.action, event.note, event.related
        )
    ]
