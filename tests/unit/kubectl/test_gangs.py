"""`kubectl lws` on a LeaderWorkerSet with spec.scheduling: each group's PodGroup and
gang state, from hand-made pods and PodGroups shaped as kube-scheduler v1.37 leaves
them (docs/gang-scheduling.md, "(g) Status"); the columns only where gangs are asked
for; one LIST of PodGroups per namespace, and a cluster that does not serve them or a
reader who may not list them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, POD_GROUPS, PODS
from leaderworkerset.group.gang_state import GangState, short_reason
from leaderworkerset.kubectl.describe import describe, find_group
from leaderworkerset.kubectl.render import group_objects, group_table
from leaderworkerset.kubectl.rows import GroupRow, rows_of
from leaderworkerset.kubectl.snapshot import PodGroups, Snapshot, read
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.fake_client import FakeApiClient, not_found
from tests.toolkit.lws import web_hash_lws
from tests.toolkit.pods import WEB_NOW as NOW
from tests.toolkit.pods import web_pod

JSON = dict[str, Any]
SIZE = 3
UNSCHEDULABLE = (
    "pod group is unschedulable, 0/2 placements are available, first placement status: "
    "minCount (3) cannot be satisfied: 1 scheduled, 2 remaining, pod group preemption: "
    "No preemption victims found for incoming preemptor"
)
NODES_FULL = (
    "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated "
    "taint(s). preemption: 0/6 nodes are available: 2 No preemption victims found."
)
PRIORITY = (
    "all pods in a single pod group should have the same priority as the pod group's "
    "priority, got 1000 and 0"
)


def web(scheduling: JSON | None = None) -> JSON:
    spec: JSON = {
        "groupIdentity": c.GROUP_IDENTITY_ORDINAL,
        "replicas": 2,
        "leaderWorkerTemplate": {"size": SIZE},
    }
    if scheduling is not None:
        spec["scheduling"] = scheduling
    return web_hash_lws(**spec)


def member(
    group: str,
    worker: int,
    *,
    bound: bool = True,
    gated: bool = False,
    message: str | None = None,
    pod_group: str | None = "",
) -> JSON:
    """A pod of group `group` naming its PodGroup (`web-<group>-r1` unless given; None
    for a pod made without spec.scheduling), bound to n1 or pending."""
    name = f"web-{group}" + (f"-{worker}" if worker else "")
    pod = web_pod(
        name,
        key=group,
        worker=worker,
        node="n1" if bound else "",
        phase="Running" if bound else "Pending",
        ready=bound,
        gated=gated,
        size=SIZE,
    )
    if pod_group is not None:
        pod["spec"]["schedulingGroup"] = {"podGroupName": pod_group or f"web-{group}-r1"}
    if message is not None:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
        }
        pod["status"].setdefault("conditions", []).append(condition)
    return pod


def pod_group(
    group: str, *, status: str | None = None, reason: str = "", message: str = ""
) -> JSON:
    obj: JSON = {
        "metadata": {"name": f"web-{group}-r1", "namespace": "ns"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": SIZE}}},
    }
    if status is not None:
        obj["status"] = {
            "conditions": [
                {
                    "type": "PodGroupInitiallyScheduled",
                    "status": status,
                    "reason": reason,
                    "message": message,
                }
            ]
        }
    return obj


def snapshot(pods: list[JSON], groups: list[JSON], *, problem: str = "") -> Snapshot:
    sts = {"metadata": {"name": "web", "labels": {c.LABEL_TEMPLATE_REVISION_HASH: "r1"}}}
    by_name = {g["metadata"]["name"]: g for g in groups}
    return Snapshot(web({}), pods, [sts], sts, pod_groups=PodGroups(by_name, problem))


def whole(group: str, **kwargs: Any) -> list[JSON]:
    return [member(group, i, **kwargs) for i in range(SIZE)]


def row(snap: Snapshot, group: str = "0") -> GroupRow:
    return next(r for r in rows_of(snap, NOW) if r.index == group)


# --- the states -------------------------------------------------------------------------


def test_a_placed_gang_is_scheduled() -> None:
    snap = snapshot(whole("0"), [pod_group("0", status="True", reason="Scheduled")])
    gang = row(snap).gang
    assert gang is not None
    assert (gang.pod_group, gang.state, gang.reason) == ("web-0-r1", GangState.SCHEDULED, "")
    assert (gang.min_count, gang.members, gang.bound) == (3, 3, 3)


def test_a_gang_that_does_not_fit_waits_for_capacity_with_the_schedulers_reason() -> None:
    pods = [
        member("1", 0, bound=False, message=UNSCHEDULABLE),
        member("1", 1, bound=False, message=UNSCHEDULABLE),
        member("1", 2, bound=False, message=NODES_FULL),
    ]
    group = pod_group("1", status="False", reason="Unschedulable", message=UNSCHEDULABLE)
    gang = row(snapshot(pods, [group]), "1").gang
    assert gang is not None
    assert gang.state is GangState.WAITING_FOR_CAPACITY
    assert gang.reason == "only 1 of 3 fit"
    assert gang.message == UNSCHEDULABLE


def test_the_sticky_scheduled_condition_does_not_hide_a_gang_that_no_longer_fits() -> None:
    """Placed once (True is never taken back), its pods since recreated and pending: the
    pods decide, and a pending pod's own verdict names the resource."""
    pods = [
        member("0", 0, bound=False, message=UNSCHEDULABLE),
        member("0", 1, bound=False, message=NODES_FULL),
        member("0", 2, bound=False, message=UNSCHEDULABLE),
    ]
    gang = row(snapshot(pods, [pod_group("0", status="True", reason="Scheduled")])).gang
    assert gang is not None
    assert (gang.state, gang.reason) == (
        GangState.WAITING_FOR_CAPACITY,
        "2 Insufficient nvidia.com/gpu",
    )
    assert gang.bound == 0


def test_enough_members_not_yet_tried_wait_for_capacity_pending() -> None:
    gang = row(snapshot(whole("0", bound=False), [pod_group("0")])).gang
    assert gang is not None
    assert (gang.state, gang.reason) == (GangState.WAITING_FOR_CAPACITY, "pending")


def test_fewer_members_than_min_count_wait_for_members() -> None:
    # No condition: the scheduler does not try a gang short of members.
    pods = [member("0", 0, bound=False), member("0", 1, bound=False)]
    gang = row(snapshot(pods, [pod_group("0")])).gang
    assert gang is not None
    assert (gang.state, gang.reason) == (GangState.WAITING_FOR_MEMBERS, "2/3 pods")


def test_a_gated_member_does_not_count() -> None:
    pods = [member("0", 0, gated=True), *whole("0", bound=False)[1:]]
    gang = row(snapshot(pods, [pod_group("0")])).gang
    assert gang is not None
    assert (gang.state, gang.reason) == (GangState.WAITING_FOR_MEMBERS, "2/3 pods, 1 gated")


def test_a_stale_unschedulable_condition_with_members_missing_waits_for_members() -> None:
    group = pod_group("0", status="False", reason="Unschedulable", message=UNSCHEDULABLE)
    gang = row(snapshot([member("0", 0, bound=False)], [group])).gang
    assert gang is not None and gang.state is GangState.WAITING_FOR_MEMBERS


def test_a_scheduler_error_is_an_error_with_its_message() -> None:
    group = pod_group("0", status="False", reason="SchedulerError", message=PRIORITY)
    gang = row(snapshot(whole("0", bound=False, message=PRIORITY), [group])).gang
    assert gang is not None
    assert gang.state is GangState.ERROR
    assert gang.message == PRIORITY
    assert gang.reason.startswith("all pods in a single pod group should have the same priority")


def test_no_pod_group_is_missing() -> None:
    gang = row(snapshot(whole("0", bound=False), [])).gang
    assert gang is not None
    assert (gang.pod_group, gang.state) == ("web-0-r1", GangState.MISSING)
    assert "web-0-r1 does not exist" in gang.message


def test_pods_made_without_scheduling_have_no_gang() -> None:
    """A group from before spec.scheduling was set: its pods name no PodGroup."""
    snap = snapshot(whole("0", pod_group=None), [])
    assert row(snap).gang is None
    text = group_table(rows_of(snap, NOW), hash_mode=False, gangs=True)
    assert text.splitlines()[1].split()[-2:] == ["<none>", "-"]


def test_the_pod_group_the_pods_name_wins_over_the_expected_name() -> None:
    """Matched by name, as a pod's spec.schedulingGroup names it: a PodGroup another
    controller made under another name is still found."""
    group = pod_group("0", status="True", reason="Scheduled")
    group["metadata"]["name"] = "made-elsewhere"
    gang = row(snapshot(whole("0", pod_group="made-elsewhere"), [group])).gang
    assert gang is not None
    assert (gang.pod_group, gang.state) == ("made-elsewhere", GangState.SCHEDULED)


@pytest.mark.parametrize(
    ("message", "short"),
    [
        (UNSCHEDULABLE, "only 1 of 3 fit"),
        (NODES_FULL, "2 Insufficient nvidia.com/gpu"),
        (
            "pod group is unschedulable, 0/2 placements are available",
            "0/2 placements are available",
        ),
        (PRIORITY, PRIORITY.split(",")[0]),
        ("something new, with detail.", "something new"),
    ],
)
def test_short_reasons(message: str, short: str) -> None:
    assert short_reason(message) == short


# --- the table, JSON and describe -----------------------------------------------------------


def two_groups() -> Snapshot:
    waiting = [member("1", i, bound=False, message=UNSCHEDULABLE) for i in range(SIZE)]
    groups = [
        pod_group("0", status="True", reason="Scheduled"),
        pod_group("1", status="False", reason="Unschedulable", message=UNSCHEDULABLE),
    ]
    return snapshot(whole("0") + waiting, groups)


def test_the_table_ends_with_podgroup_and_gang() -> None:
    snap = two_groups()
    assert snap.gang_scheduled
    text = group_table(rows_of(snap, NOW), hash_mode=False, gangs=True)
    header, placed, waiting = text.splitlines()
    assert header.split()[-2:] == ["PODGROUP", "GANG"]
    assert placed.split()[-2:] == ["web-0-r1", "Scheduled"]
    assert waiting.endswith("web-1-r1   WaitingForCapacity (only 1 of 3 fit)")
    wide = group_table(rows_of(snap, NOW), hash_mode=False, wide=True, gangs=True)
    assert wide.splitlines()[0].endswith("WORKER STATEFULSET   PODGROUP   GANG")


def test_json_carries_the_gang() -> None:
    rows = rows_of(two_groups(), NOW)
    document = json.loads(
        group_objects(rows, name="web", namespace="ns", hash_mode=False, output="json", gangs=True)
    )
    waiting = document["groups"][1]
    assert waiting["podGroup"] == "web-1-r1"
    assert waiting["gang"] == "WaitingForCapacity"
    assert waiting["gangReason"] == "only 1 of 3 fit"
    assert waiting["gangMessage"] == UNSCHEDULABLE
    placed = document["groups"][0]
    assert (placed["gang"], placed["gangReason"]) == ("Scheduled", None)


def test_without_scheduling_nothing_changes() -> None:
    sts = {"metadata": {"name": "web", "labels": {c.LABEL_TEMPLATE_REVISION_HASH: "r1"}}}
    plain = Snapshot(web(), whole("0", pod_group=None), [sts], sts)
    assert not plain.gang_scheduled and plain.pod_groups is None
    rows = rows_of(plain, NOW)
    assert rows[0].gang is None
    assert "GANG" not in group_table(rows, hash_mode=False)
    document = json.loads(
        group_objects(rows, name="web", namespace="ns", hash_mode=False, output="json")
    )
    assert "gang" not in document["groups"][0] and "podGroup" not in document["groups"][0]
    assert "PodGroup:" not in describe(plain, find_group(plain, "0"), NOW)


def test_describe_names_the_pod_group_and_the_whole_message() -> None:
    snap = two_groups()
    snap.events = [
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "PodGroup", "name": "web-1-r1"},
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": "about the gang",
            "lastTimestamp": "2026-01-01T11:59:00Z",
        }
    ]
    text = describe(snap, find_group(snap, "1"), NOW)
    assert "PodGroup:        web-1-r1, gang of 3, 0/3 member(s) bound" in text
    assert f"Gang:            WaitingForCapacity: {UNSCHEDULABLE}" in text
    assert "about the gang" in text
    placed = describe(snap, find_group(snap, "0"), NOW)
    assert "Gang:            Scheduled: all 3 member(s) are bound to nodes" in placed


# --- reading ------------------------------------------------------------------------------


def seeded(client: FakeApiClient, *names: str) -> None:
    for name in names:
        lws = web({})
        lws["metadata"]["name"] = name
        client.put(LEADERWORKERSETS, lws)
    for pod in whole("0"):
        pod["metadata"]["namespace"] = "ns"
        client.put(PODS, pod)
    client.put(POD_GROUPS, pod_group("0", status="True", reason="Scheduled"))


async def test_one_list_of_the_namespaces_pod_groups() -> None:
    client = FakeApiClient()
    seeded(client, "web")
    snap = await read(client, "web", "ns")
    lists = client.calls_of("list", "podgroups")
    assert [(call.namespace, call.options["label_selector"]) for call in lists] == [("ns", None)]
    assert client.calls_of("get", "podgroups") == []
    assert snap.pod_groups is not None and set(snap.pod_groups.by_name or {}) == {"web-0-r1"}
    assert row(snap).gang is not None


async def test_no_pod_group_list_without_scheduling() -> None:
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, web())
    snap = await read(client, "web", "ns")
    assert client.calls_of("list", "podgroups") == [] and snap.pod_groups is None


async def test_a_cluster_without_the_api_shows_missing_and_says_why() -> None:
    client = FakeApiClient()
    seeded(client, "web")
    client.fail[("list", "podgroups")] = not_found("podgroups", "")
    gang = row(await read(client, "web", "ns")).gang
    assert gang is not None and gang.state is GangState.MISSING
    assert "the cluster does not serve scheduling.k8s.io/v1beta1" in gang.message


async def test_a_reader_who_may_not_list_pod_groups_sees_unknown() -> None:
    client = FakeApiClient()
    seeded(client, "web")
    refused = ApiError(403, {"reason": "Forbidden", "message": "podgroups is forbidden"})
    client.fail[("list", "podgroups")] = refused
    gang = row(await read(client, "web", "ns")).gang
    assert gang is not None
    assert (gang.state, gang.message) == (GangState.UNKNOWN, "cannot list podgroups: Forbidden")
    assert gang.members == 3
