"""The group restart policy (GroupRestarter): which restarts and deletions recreate a
group, that a worker reaches only its own group's leader (never one it is not owned by,
through its StatefulSet or directly), RecreateGroupAfterStart's wait for a started group,
and that a leader is deleted once per group restart, even when the pod cache has not
caught up with that deletion yet."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from typing import Any, cast

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.pod.restart_policy import DELETED_LEADER_MEMORY, GroupRestarter
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import lws_json, lws_object
from tests.toolkit.pods import lws_labels, pod
from tests.toolkit.statefulsets import statefulset

JSON = dict[str, Any]


def fake_client(fail: ApiError | None = None) -> FakeApiClient:
    client = FakeApiClient()

    async def pause(call: Call) -> None:
        await asyncio.sleep(0)  # let a concurrent reconcile run in between

    client.on_call = pause
    if fail is not None:
        client.fail[("delete", "pods")] = fail
    return client


def leader_deletes(client: FakeApiClient) -> list[Call]:
    """The foreground pod DELETEs: the leaders (group_teardown.py deletes the rest)."""
    return [
        call
        for call in client.calls_of("delete")
        if call.plural == "pods" and call.options["propagation_policy"] == "Foreground"
    ]


def deletes(client: FakeApiClient) -> list[tuple[str, JSON | None]]:
    """The leaders deleted, with the preconditions of each delete."""
    return [(call.name, call.options["preconditions"]) for call in leader_deletes(client)]


def restarted_leader(uid: str = "uid-1") -> JSON:
    """A leader pod whose container restarted, as the (stale) cache shows it: alive."""
    return pod(
        "test-sample-0",
        "default",
        uid=uid,
        labels=lws_labels("test-sample", worker="0", group_index="0"),
        phase="Running",
        container_statuses=[{"name": "c", "restartCount": 1}],
    )


def restarter(client: FakeApiClient, now: list[float]) -> GroupRestarter:
    # A restarting leader is its own leader: the caches are not consulted.
    return GroupRestarter(
        client, cast(LwsCaches, None), clock=lambda: now[0], parallel_teardown=False
    )


def on_pod_restart() -> JSON:
    body = lws_json()
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
        c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    )
    return body


VIEW = view_of(on_pod_restart())


async def test_leader_deleted_once_while_cache_lags() -> None:
    client, now = fake_client(), [0.0]
    r = restarter(client, now)
    first = await r.handle(restarted_leader(), VIEW)
    assert first[0] and first[1] is not None
    assert first[1].reason == c.EVENT_REASON_RECREATE_GROUP
    # The cache still shows the leader alive: no second DELETE, no second event.
    assert await r.handle(restarted_leader(), VIEW) == (True, None)
    assert deletes(client) == [("test-sample-0", {"uid": "uid-1"})]
    # A new leader (new UID) of the same group is deleted again when it fails.
    second = await r.handle(restarted_leader("uid-2"), VIEW)
    assert second[1] is not None
    assert [uid for _, uid in deletes(client)] == [{"uid": "uid-1"}, {"uid": "uid-2"}]


async def test_concurrent_reconciles_delete_once() -> None:
    client, now = fake_client(), [0.0]
    r = restarter(client, now)
    results = await asyncio.gather(
        r.handle(restarted_leader(), VIEW), r.handle(copy.deepcopy(restarted_leader()), VIEW)
    )
    assert len(deletes(client)) == 1
    assert sorted(e is not None for _, e in results) == [False, True]


async def test_failed_delete_is_retried_and_memory_expires() -> None:
    client, now = fake_client(ApiError(500, {"message": "boom"})), [0.0]
    r = restarter(client, now)
    with pytest.raises(ApiError):
        await r.handle(restarted_leader(), VIEW)
    client.fail.clear()
    assert (await r.handle(restarted_leader(), VIEW))[1] is not None
    assert len(deletes(client)) == 2
    now[0] = DELETED_LEADER_MEMORY + 1
    assert (await r.handle(restarted_leader("uid-3"), VIEW))[1] is not None
    assert "uid-1" not in r.deleted_leaders


# --- a worker's restart reaches its own leader, and only its own ----------------------------
# A group as the controllers leave it: the leader, the worker StatefulSet it owns, and a
# worker that StatefulSet made. Its pieces are changed one at a time below.
KEY = "0123456789abcdef0123456789abcdef01234567"
RECREATIONS = "lws_group_recreations_total"


def group_lws(identity: str, policy: str = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART) -> JSON:
    body = lws_object("lws", replicas=1, size=2, groupIdentity=identity)
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy
    return body


def owner(kind: str, name: str, uid: str) -> JSON:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": True}


class Group:
    """One group of LWS "lws" (size 2) in the given mode, its worker restarted once."""

    def __init__(self, identity: str) -> None:
        hash_mode = identity == c.GROUP_IDENTITY_HASH
        # Each group's leader is new, even to a second run of the suite in the same process:
        # the recreation metric counts a leader UID once.
        leader_uid = f"uid-leader-{uuid.uuid4()}"
        self.lws = group_lws(identity)
        self.metrics = GroupMetrics()
        self.leader_name = "lws-5d8f9c7b4-x7k2p" if hash_mode else "lws-0"
        index = KEY if hash_mode else "0"
        labels = {c.LABEL_SET_NAME: "lws", c.LABEL_GROUP_INDEX: index}
        labels[c.LABEL_TEMPLATE_REVISION_HASH] = "rev-1"
        self.leader: JSON = pod(
            self.leader_name,
            "default",
            kind="Pod",
            uid=leader_uid,
            labels={**labels, c.LABEL_WORKER_INDEX: "0"},
            phase="Running",
        )
        self.sts: JSON = statefulset(
            self.leader_name,
            "default",
            kind="StatefulSet",
            uid="uid-sts",
            labels=labels,
            owners=[owner("Pod", self.leader_name, leader_uid)],
        )
        annotations = {c.ANNOTATION_SIZE: "2"}
        if hash_mode:
            annotations[c.ANNOTATION_LEADER_NAME] = self.leader_name
        self.worker: JSON = pod(
            f"{self.leader_name}-1",
            "default",
            kind="Pod",
            uid="uid-worker",
            labels={**labels, c.LABEL_WORKER_INDEX: "1"},
            annotations=annotations,
            owners=[owner("StatefulSet", self.leader_name, "uid-sts")],
            phase="Running",
            container_statuses=[{"name": "c", "restartCount": 1}],
        )

    @property
    def leader_uid(self) -> str:
        return str(self.leader["metadata"]["uid"])

    def objects(self) -> list[JSON]:
        return [self.lws, self.leader, self.sts, self.worker]

    async def restart(self, *objects: JSON) -> tuple[tuple[bool, ev.Event | None], FakeApiClient]:
        """What the restarter makes of the worker, with the caches holding `objects`
        (the whole group unless given)."""
        client = FakeApiClient()
        async with seeded_caches(*(objects or self.objects())) as caches:
            restarter = GroupRestarter(client, caches, metrics=self.metrics)
            result = await restarter.handle(self.worker, view_of(self.lws))
        return result, client


def recreations(group: Group, identity: str, cause: str) -> float:
    labels = {"namespace": "default", "leaderworkerset": "lws", "group_identity": identity}
    return group.metrics.registry.get_sample_value(RECREATIONS, {**labels, "cause": cause}) or 0.0


MODES = [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH]


@pytest.mark.parametrize("identity", MODES)
async def test_a_restarted_worker_recreates_its_group_through_its_leader(identity: str) -> None:
    group = Group(identity)
    counted = recreations(group, identity, "container_restart")
    (recreating, event), client = await group.restart()
    assert recreating
    assert deletes(client) == [(group.leader_name, {"uid": group.leader_uid})]
    (delete,) = leader_deletes(client)
    assert delete.options["propagation_policy"] == "Foreground"
    assert delete.namespace == "default"
    assert event is not None and event.reason == c.EVENT_REASON_RECREATE_GROUP
    index = group.leader["metadata"]["labels"][c.LABEL_GROUP_INDEX]
    assert event.note == (
        f"Worker pod {group.leader_name}-1 failed, deleted leader pod {group.leader_name}"
        f" to recreate group {index}"
    )
    assert event.related is not None and event.related["name"] == group.leader_name
    assert recreations(group, identity, "container_restart") == counted + 1


# Ways a restarted worker is not (or no longer) of this leader's group: each leaves the
# group alone. Most are the pods of a predecessor leader still being garbage collected.
def worker_of_another_statefulset(group: Group) -> None:
    group.worker["metadata"]["ownerReferences"] = [owner("StatefulSet", "lws-0", "uid-old")]


def worker_of_a_statefulset_of_another_name(group: Group) -> None:
    group.worker["metadata"]["ownerReferences"] = [owner("StatefulSet", "other", "uid-sts")]


def worker_owned_by_a_replicaset(group: Group) -> None:
    group.worker["metadata"]["ownerReferences"] = [
        owner("ReplicaSet", group.leader_name, "uid-sts")
    ]


def worker_without_a_controller(group: Group) -> None:
    ref = owner("StatefulSet", group.leader_name, "uid-sts")
    group.worker["metadata"]["ownerReferences"] = [{**ref, "controller": False}]


def statefulset_of_a_predecessor(group: Group) -> None:
    group.sts["metadata"]["ownerReferences"] = [owner("Pod", group.leader_name, "uid-old")]


def statefulset_of_a_leader_of_another_name(group: Group) -> None:
    group.sts["metadata"]["ownerReferences"] = [owner("Pod", "lws-9", group.leader_uid)]


def statefulset_owned_by_a_replicaset(group: Group) -> None:
    ref = owner("ReplicaSet", group.leader_name, group.leader_uid)
    group.sts["metadata"]["ownerReferences"] = [ref]


def statefulset_without_a_controller(group: Group) -> None:
    group.sts["metadata"]["ownerReferences"] = []


def leader_of_another_revision(group: Group) -> None:
    group.leader["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "rev-2"


STRANGERS = [
    worker_of_another_statefulset,
    worker_of_a_statefulset_of_another_name,
    worker_owned_by_a_replicaset,
    worker_without_a_controller,
    statefulset_of_a_predecessor,
    statefulset_of_a_leader_of_another_name,
    statefulset_owned_by_a_replicaset,
    statefulset_without_a_controller,
    leader_of_another_revision,
]


@pytest.mark.parametrize("identity", MODES)
@pytest.mark.parametrize("stranger", STRANGERS, ids=lambda f: f.__name__)
async def test_a_restarted_pod_of_another_group_leaves_the_leader_alone(
    identity: str, stranger: Callable[[Group], None]
) -> None:
    group = Group(identity)
    stranger(group)
    result, client = await group.restart()
    assert result == (False, None)
    assert client.writes() == []


@pytest.mark.parametrize("identity", MODES)
async def test_a_worker_whose_group_is_gone_leaves_nothing_to_do(identity: str) -> None:
    group = Group(identity)
    for missing in (group.leader, group.sts):
        present = [o for o in group.objects() if o is not missing]
        result, client = await group.restart(*present)
        assert result == (False, None) and client.writes() == [], missing["kind"]


async def test_a_worker_made_by_its_leader_directly_counts_as_its_groups() -> None:
    """A controller reference straight to the leader pod (name and UID) is as good as
    one through the leader's worker StatefulSet."""
    group = Group(c.GROUP_IDENTITY_HASH)
    group.worker["metadata"]["ownerReferences"] = [
        owner("Pod", group.leader_name, group.leader_uid)
    ]
    (recreating, event), client = await group.restart(group.lws, group.leader, group.worker)
    assert recreating and event is not None
    assert [call.name for call in leader_deletes(client)] == [group.leader_name]
    for name, uid in (("lws-9", group.leader_uid), (group.leader_name, "uid-old")):
        group.worker["metadata"]["ownerReferences"] = [owner("Pod", name, uid)]
        result, client = await group.restart(group.lws, group.leader, group.worker)
        assert result == (False, None) and client.writes() == [], name


async def test_a_hash_worker_without_its_leaders_name_is_left_alone() -> None:
    group = Group(c.GROUP_IDENTITY_HASH)
    del group.worker["metadata"]["annotations"][c.ANNOTATION_LEADER_NAME]
    result, client = await group.restart()
    assert result == (False, None) and client.writes() == []


async def test_an_ordinal_worker_without_an_ordinal_is_an_error() -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    group.worker["metadata"]["name"] = "lws-worker"
    with pytest.raises(ValueError, match="parsing pod name for pod lws-worker"):
        await group.restart()


# --- when the policy acts at all --------------------------------------------------------------
@pytest.mark.parametrize(
    "policy", [c.RESTART_POLICY_NONE, c.RESTART_POLICY_DEPRECATED_DEFAULT], ids=str
)
async def test_policies_that_keep_groups_leave_a_restart_alone(policy: str) -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    group.lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy
    result, client = await group.restart()
    assert result == (False, None) and client.writes() == []


async def test_a_running_pod_that_never_restarted_changes_nothing() -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    group.worker["status"]["containerStatuses"][0]["restartCount"] = 0
    result, client = await group.restart()
    assert result == (False, None) and client.writes() == []


async def test_a_deleted_worker_recreates_its_group() -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    group.worker["status"]["containerStatuses"][0]["restartCount"] = 0
    group.worker["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    (recreating, event), client = await group.restart()
    assert recreating and event is not None
    assert [call.name for call in leader_deletes(client)] == ["lws-0"]


async def test_a_leader_already_on_its_way_out_is_not_deleted_again() -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    group.leader["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    result, client = await group.restart()
    assert result == (True, None) and client.writes() == []


@pytest.mark.parametrize(
    "error",
    [
        ApiError(404, {"reason": "NotFound", "message": "gone"}),
        ApiError(409, {"reason": "Conflict", "message": "uid precondition failed"}),
    ],
    ids=["gone", "replaced"],
)
async def test_a_leader_gone_or_replaced_meanwhile_is_no_recreation_to_report(
    error: ApiError,
) -> None:
    """The DELETE names the leader's UID: a leader deleted (404) or replaced by a new pod
    of the same name (409) in between is not counted or told as this restart's."""
    client, now = fake_client(error), [0.0]
    r = restarter(client, now)
    assert await r.handle(restarted_leader("uid-gone-" + error.reason), VIEW) == (True, None)
    assert len(deletes(client)) == 1


async def test_a_cancelled_delete_is_tried_again() -> None:
    client, now = fake_client(asyncio.CancelledError()), [0.0]  # type: ignore[arg-type]
    r = restarter(client, now)
    with pytest.raises(asyncio.CancelledError):
        await r.handle(restarted_leader("uid-cancelled"), VIEW)
    assert "uid-cancelled" not in r.deleted_leaders
    client.fail.clear()
    assert (await r.handle(restarted_leader("uid-cancelled"), VIEW))[1] is not None


# --- RecreateGroupAfterStart waits for the group to have started -------------------------------
def after_start(group: Group, how: str) -> None:
    """Ask for RecreateGroupAfterStart by the policy, or by the experimental annotation
    beside RecreateGroupOnPodRestart."""
    if how == "policy":
        template = group.lws["spec"]["leaderWorkerTemplate"]
        template["restartPolicy"] = c.RESTART_POLICY_RECREATE_GROUP_AFTER_START
    else:
        group.lws["metadata"]["annotations"] = {c.ANNOTATION_RECREATE_GROUP_AFTER_START: ""}


@pytest.mark.parametrize("how", ["policy", "annotation"])
async def test_after_start_leaves_a_group_with_a_pending_pod_alone(how: str) -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    after_start(group, how)
    group.leader["status"]["phase"] = "Pending"
    result, client = await group.restart()
    assert result == (False, None) and client.writes() == []
    # Once every pod of the group runs, the restart recreates it.
    group.leader["status"]["phase"] = "Running"
    (recreating, event), client = await group.restart()
    assert recreating and event is not None and len(leader_deletes(client)) == 1


async def test_on_pod_restart_does_not_wait_for_a_pending_pod() -> None:
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    group.leader["status"]["phase"] = "Pending"
    (recreating, event), client = await group.restart()
    assert recreating and event is not None and len(leader_deletes(client)) == 1


async def test_after_start_counts_only_the_groups_own_pods() -> None:
    """A pod of another group (or of another LWS with the same group index) neither
    completes nor holds back this group."""
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    after_start(group, "policy")
    stranger = copy.deepcopy(group.worker)
    stranger["metadata"].update(name="lws-1-1", uid="uid-stranger")
    stranger["metadata"]["labels"][c.LABEL_GROUP_INDEX] = "1"
    stranger["status"]["phase"] = "Pending"
    other_lws = copy.deepcopy(stranger)
    other_lws["metadata"].update(name="other-0-1", uid="uid-other")
    other_lws["metadata"]["labels"].update({c.LABEL_SET_NAME: "other", c.LABEL_GROUP_INDEX: "0"})
    (recreating, _), _ = await group.restart(*group.objects(), stranger, other_lws)
    assert recreating
    # Without its leader in the cache, the group is one pod short: still starting.
    result, client = await group.restart(group.lws, group.sts, group.worker, stranger)
    assert result == (False, None) and client.writes() == []


async def test_after_start_measures_pods_without_a_size_against_the_lws() -> None:
    """Pods made before the size annotation existed: the group's size is the LWS's."""
    group = Group(c.GROUP_IDENTITY_ORDINAL)
    after_start(group, "policy")
    del group.worker["metadata"]["annotations"][c.ANNOTATION_SIZE]
    (recreating, _), _ = await group.restart()
    assert recreating
    group.lws["spec"]["leaderWorkerTemplate"]["size"] = 3
    result, client = await group.restart()
    assert result == (False, None) and client.writes() == []


async def test_a_restarted_leader_is_told_as_the_leader() -> None:
    client, now = fake_client(), [0.0]
    _, event = await restarter(client, now).handle(restarted_leader("uid-told"), VIEW)
    assert event is not None and event.note == (
        "Leader pod test-sample-0 failed, deleted leader pod test-sample-0 to recreate group 0"
    )


async def test_a_deleted_leader_is_remembered_for_exactly_its_memory() -> None:
    """On a monotonic clock far from zero, as in production."""
    client, now = fake_client(), [5000.0]
    r = restarter(client, now)
    assert (await r.handle(restarted_leader("uid-m"), VIEW))[1] is not None
    now[0] += 1
    assert await r.handle(restarted_leader("uid-m"), VIEW) == (True, None)
    now[0] = 5000.0 + DELETED_LEADER_MEMORY
    assert await r.handle(restarted_leader("uid-m"), VIEW) == (True, None)
    assert len(deletes(client)) == 1
    now[0] += 0.5
    assert (await r.handle(restarted_leader("uid-m"), VIEW))[1] is not None
    assert len(deletes(client)) == 2
