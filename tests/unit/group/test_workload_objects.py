"""The Workload and PodGroups of a LeaderWorkerSet with spec.scheduling (upstream #982's
shapes and names), and which PodGroups a pass needs."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.group.workload_objects import (
    GroupRevision,
    groups_needed,
    only_priority_drifted,
    pod_group,
    pod_group_for_labels,
    pod_group_of_pod,
    pod_group_template,
    stored_template,
    template_drift,
    with_min_count,
    workload,
)
from tests.toolkit.lws import lws_object


def _view(scheduling: dict | None = None, size: int = 4, **spec: object):  # type: ignore[no-untyped-def]
    obj = lws_object(
        "infer", size=size, **({"scheduling": scheduling} if scheduling is not None else {}), **spec
    )
    obj["metadata"]["namespace"] = "ml"
    return view_of(obj)


def test_an_empty_scheduling_is_a_gang_of_the_whole_group() -> None:
    template = pod_group_template(_view({}, size=4))
    assert template == {"name": "replica", "schedulingPolicy": {"gang": {"minCount": 4}}}


def test_a_gang_without_min_count_takes_the_size_and_basic_stays_basic() -> None:
    assert pod_group_template(_view({"schedulingPolicy": {"gang": {}}}, size=3))[
        "schedulingPolicy"
    ] == {"gang": {"minCount": 3}}
    assert pod_group_template(_view({"schedulingPolicy": {"basic": {}}}))["schedulingPolicy"] == {
        "basic": {}
    }


def test_constraints_disruption_claims_and_priority_are_carried() -> None:
    view = _view(
        {
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "disruptionMode": {"all": {}},
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu-tmpl"}],
        }
    )
    view.obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["priorityClassName"] = "high"
    view = view_of(view.obj)
    template = pod_group_template(view)
    assert template["schedulingConstraints"] == {
        "topology": [{"key": "topology.kubernetes.io/rack"}]
    }
    assert template["disruptionMode"] == {"all": {}}
    assert template["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gpu-tmpl"}]
    assert template["priorityClassName"] == "high"


def test_the_workload_is_named_like_the_lws_and_controlled_by_it() -> None:
    view = _view({})
    body = workload(view)
    assert body["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert body["kind"] == "Workload"
    assert body["metadata"]["name"] == "infer"
    assert body["metadata"]["namespace"] == "ml"
    owner = body["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        c.KIND,
        "infer",
        "uid-infer",
        True,
    )
    assert body["spec"]["controllerRef"] == {
        "apiGroup": "leaderworkerset.x-k8s.io",
        "kind": "LeaderWorkerSet",
        "name": "infer",
    }


def test_a_pod_group_is_named_for_group_and_revision_and_copies_the_stored_template() -> None:
    view = _view({})
    stored = {"name": "replica", "schedulingPolicy": {"gang": {"minCount": 4}}, "priority": 1000}
    body = pod_group(view, stored, "2", "abc")
    assert body["metadata"]["name"] == "infer-2-abc"
    assert body["metadata"]["labels"] == {
        c.LABEL_SET_NAME: "infer",
        c.LABEL_GROUP_INDEX: "2",
        c.LABEL_TEMPLATE_REVISION_HASH: "abc",
    }
    assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-infer"
    assert body["spec"] == {
        "workloadRef": {"workloadName": "infer", "templateName": "replica"},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "priority": 1000,
    }


def test_every_member_names_the_pod_group_of_its_labels() -> None:
    labels = {
        c.LABEL_SET_NAME: "infer",
        c.LABEL_GROUP_INDEX: "k3y",
        c.LABEL_TEMPLATE_REVISION_HASH: "r1",
    }
    assert pod_group_for_labels(labels) == "infer-k3y-r1"
    assert pod_group_of_pod({"spec": {"schedulingGroup": {"podGroupName": "x"}}}) == "x"
    assert pod_group_of_pod({"spec": {}}) is None


def _leader(group: str, revision: str) -> dict:
    labels = {c.LABEL_GROUP_INDEX: group, c.LABEL_TEMPLATE_REVISION_HASH: revision}
    return {"metadata": {"labels": labels}}


def test_needed_groups_are_the_planned_ones_and_every_leaders_own() -> None:
    planned = [GroupRevision("0", "new"), GroupRevision("1", "new")]
    # Group 0 still runs the old revision behind the partition; group 5 is a Hash key.
    needed = groups_needed("infer", planned, [_leader("0", "old"), _leader("5", "new")])
    assert set(needed) == {"infer-0-new", "infer-1-new", "infer-0-old", "infer-5-new"}
    assert needed["infer-0-old"] == GroupRevision("0", "old")


def test_only_min_count_may_change_in_a_stored_template() -> None:
    stored_wl = workload(_view({}, size=4))
    desired = pod_group_template(_view({}, size=6))
    resized = with_min_count(stored_wl, desired)
    assert resized is not None
    assert stored_template(resized)["schedulingPolicy"] == {"gang": {"minCount": 6}}  # type: ignore[index]
    assert stored_template(stored_wl)["schedulingPolicy"] == {"gang": {"minCount": 4}}  # type: ignore[index]
    assert with_min_count(stored_wl, pod_group_template(_view({}, size=4))) is None
    basic = pod_group_template(_view({"schedulingPolicy": {"basic": {}}}))
    assert template_drift(stored_template(stored_wl) or {}, basic) == ["schedulingPolicy"]
    topo = pod_group_template(
        _view({"schedulingConstraints": {"topology": [{"key": "rack"}]}}, size=4)
    )
    assert template_drift(stored_template(stored_wl) or {}, topo) == ["schedulingConstraints"]
    assert template_drift(stored_template(stored_wl) or {}, desired) == []


def test_only_a_priority_class_change_makes_the_workload_again() -> None:
    assert only_priority_drifted(["priorityClassName"])
    assert not only_priority_drifted([])
    assert not only_priority_drifted(["priorityClassName", "disruptionMode"])
