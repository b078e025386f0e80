"""The pod reconciler and the pod webhook where a group can go wrong: the group-ready
condition written ahead of steps that keep failing, a per-group Service that is not
the leader's, a missing revision, hostname collisions of Hash keys, and the group
restart policy during a size-changing rollout."""

from __future__ import annotations

import copy
import uuid
from typing import Any, cast

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.api.objects import revision_key_of
from leaderworkerset.api.resources import SERVICES
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers import revisions as rev
from leaderworkerset.controllers.group_metrics import Cause
from leaderworkerset.controllers.pod.backoff import MAX_DELAY, RetryBackoff
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.controllers.pod.restart_policy import GroupRestarter
from leaderworkerset.group import names as naming
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.group.roles import group_size
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.controller import Result
from leaderworkerset.runtime.indexes import object_key
from leaderworkerset.webhooks.admission import pod_mutator
from leaderworkerset.webhooks.hostnames import IssuedHostnames, hostnames_in_use
from leaderworkerset.webhooks.pods import (
    MAX_KEY_DRAWS,
    Denied,
    PodAdmissionContext,
    mutate_pod,
)
from tests.toolkit.caches import seeded_caches
from tests.toolkit.decodes import count_lws_decodes
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import container, leader_pod, lws_labels, pod
from tests.toolkit.recorded_events import RecordedEvents
from tests.toolkit.statefulsets import controller_ref, statefulset, worker_sts

JSON = dict[str, Any]
NS = "default"
KEY = "0123456789abcdef0123456789abcdef01234567"
# Another key with KEY's hostname, and one with a hostname of its own.
SAME_HOST = "01234567ffffffffffffffffffffffffffffffff"
OTHER_HOST = "89abcdef00000000000000000000000000000000"
QUOTA = ApiError(403, {"reason": "Forbidden", "message": 'services "x" is forbidden: quota'})


def calls(client: FakeApiClient) -> list[tuple[str, str, str]]:
    """What the fake client was asked: (verb, plural, name)."""
    return [(call.verb, call.plural, call.name) for call in client.calls]


def patches(client: FakeApiClient) -> list[JSON]:
    return [call.body for call in client.calls_of("patch")]


def hash_lws(**spec: Any) -> JSON:
    body = lws_object("lws", replicas=1, size=2, groupIdentity=c.GROUP_IDENTITY_HASH, **spec)
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = c.RESTART_POLICY_NONE
    return body


def unique_per_replica() -> JSON:
    return hash_lws(networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA})


def hash_leader(revision_key: str, group_ready: str | None = "True", **annotations: str) -> JSON:
    """A running Hash leader as the webhook and the kubelet leave it."""
    name = "lws-5d8f9c7b4-x7k2p"
    conditions = [{"type": "ContainersReady", "status": "True"}]
    if group_ready is not None:
        conditions.append({"type": c.CONDITION_GROUP_READY, "status": group_ready})
    return pod(
        name,
        NS,
        api_version="v1",
        kind="Pod",
        uid="uid-leader",
        labels=lws_labels("lws", worker="0", group_index=KEY, group_key=KEY, revision=revision_key),
        annotations={c.ANNOTATION_SIZE: "2", **annotations},
        containers=[container("c", "pause:1")],
        spec={"readinessGates": [{"conditionType": c.CONDITION_GROUP_READY}]},
        phase="Running",
        status={"conditions": conditions},
    )


def worker_set(leader: JSON, ready: bool) -> JSON:
    meta = leader["metadata"]
    labels = {k: meta["labels"][k] for k in (c.LABEL_SET_NAME, c.LABEL_GROUP_INDEX)}
    labels[c.LABEL_TEMPLATE_REVISION_HASH] = meta["labels"][c.LABEL_TEMPLATE_REVISION_HASH]
    return statefulset(
        meta["name"],
        NS,
        api_version="apps/v1",
        kind="StatefulSet",
        labels=labels,
        replicas=1,
        status={"replicas": 1, "availableReplicas": 1 if ready else 0},
    )


def service(name: str, owner_uid: str | None, owner_name: str = "someone-else") -> JSON:
    meta: JSON = {"name": name, "namespace": NS, "labels": {c.LABEL_SET_NAME: "lws"}}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner_name,
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta}


def reconciler(
    client: FakeApiClient,
    caches: Any,
    events: RecordedEvents,
    now: list[float] | None = None,
    **options: Any,
) -> PodReconciler:
    clock = now if now is not None else [0.0]
    return PodReconciler(
        client,
        caches,
        events,
        options=ControllerOptions(**options),
        waits=RetryBackoff(clock=lambda: clock[0]),
    )


async def delays_of(pods: PodReconciler, key: str, now: list[float], tries: int) -> list[float]:
    """The requeue delays of `tries` reconciles, each run when the previous one asked."""
    delays = []
    for _ in range(tries):
        result = await pods(key)
        assert isinstance(result, Result) and result.requeue_after is not None
        delays.append(result.requeue_after)
        now[0] += result.requeue_after
    return delays


GROUP_SERVICE = naming.hash_group_service_name("lws", KEY)


# --- the group-ready condition comes first --------------------------------------------------
async def test_group_ready_is_written_before_the_group_service_fails() -> None:
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision))
    client, events = FakeApiClient(), RecordedEvents()
    client.fail[("create", "services")] = QUOTA
    async with seeded_caches(lws, revision, leader, worker_set(leader, ready=False)) as caches:
        with pytest.raises(ApiError):
            await reconciler(client, caches, events)(object_key(leader))
    assert [call[:2] for call in calls(client)] == [("patch", "pods"), ("create", "services")]
    (condition,) = patches(client)[0]["status"]["conditions"]
    assert (condition["type"], condition["status"]) == (c.CONDITION_GROUP_READY, "False")


async def test_group_ready_is_written_before_the_pod_group_fails() -> None:
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(
        revision_key_of(revision), **{c.ANNOTATION_POD_GROUP_NAME: "lws-group-podgroup"}
    )
    client, events = FakeApiClient(), RecordedEvents()
    client.fail[("get", "podgroups")] = ApiError(503, {"message": "volcano is down"})
    async with seeded_caches(lws, revision, leader, worker_set(leader, ready=False)) as caches:
        with pytest.raises(ApiError):
            await reconciler(client, caches, events, gang_scheduling=True)(object_key(leader))
    assert [call[:2] for call in calls(client)] == [("patch", "pods"), ("get", "podgroups")]


# --- the per-group Service is the leader's or nobody's ---------------------------------------
async def test_a_service_owned_by_another_pod_is_not_adopted() -> None:
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    foreign = service(GROUP_SERVICE, "uid-of-another-leader")
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, foreign) as caches:
        now = [0.0]
        pods = reconciler(client, caches, events, now)
        delays = await delays_of(pods, object_key(leader), now, 9)
        # Reconciles in between (the leader's own status updates) do not stretch it.
        for _ in range(5):
            await pods(object_key(leader))
        assert await pods(object_key(leader)) == Result(requeue_after=MAX_DELAY)
    assert delays == [1, 1, 2, 4, 8, 16, 32, MAX_DELAY, MAX_DELAY]
    # No Service written, and no workers for a group without its own Service.
    assert calls(client) == []
    ((type_, reason, note),) = events.said
    assert (type_, reason) == (ev.WARNING, c.EVENT_REASON_FAILED_CREATE)
    assert f"{NS}/{GROUP_SERVICE}" in note and "Pod someone-else" in note


async def test_a_service_the_cache_does_not_hold_is_checked_before_use() -> None:
    """A Service without the LWS label never reaches the cache: the create answers
    AlreadyExists, and the Service read from the API server is not the leader's."""
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    client, events = FakeApiClient(), RecordedEvents()
    client.fail[("create", "services")] = ApiError(409, {"reason": "AlreadyExists"})
    client.put(SERVICES, service(GROUP_SERVICE, None))
    async with seeded_caches(lws, revision, leader) as caches:
        result = await reconciler(client, caches, events)(object_key(leader))
    assert result == Result(requeue_after=1.0)
    assert [call[:2] for call in calls(client)] == [("create", "services"), ("get", "services")]
    assert len(events.said) == 1 and "owned by no controller" in events.said[0][2]


async def test_the_leaders_own_service_late_in_the_cache_is_used() -> None:
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    client, events = FakeApiClient(), RecordedEvents()
    client.fail[("create", "services")] = ApiError(409, {"reason": "AlreadyExists"})
    client.put(SERVICES, service(GROUP_SERVICE, "uid-leader"))
    async with seeded_caches(lws, revision, leader) as caches:
        assert await reconciler(client, caches, events)(object_key(leader)) is None
    assert ("create", "statefulsets", leader["metadata"]["name"]) in calls(client)
    assert [e for e in events.said if e[0] == ev.WARNING] == []


def ordinal_leader_and_predecessors_service(**service_meta: Any) -> tuple[JSON, JSON, JSON, JSON]:
    """(lws, its revision, leader lws-0) and the Service the lws-0 before it left."""
    lws = lws_object(
        "lws", replicas=1, size=2, networkConfig={"subdomainPolicy": "UniquePerReplica"}
    )
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    leader["metadata"]["name"] = "lws-0"
    leader["metadata"]["labels"][c.LABEL_GROUP_INDEX] = "0"
    old = service("lws-0", "uid-of-the-old-lws-0", owner_name="lws-0")
    old["metadata"].update(uid="uid-old-service", **service_meta)
    return lws, revision, leader, old


async def test_a_predecessors_service_is_replaced_at_once() -> None:
    """Ordinal mode: a leader recreated under its old name finds the Service of the pod
    it replaces (kept while that pod terminated). That pod is gone, so the Service is
    deleted by its UID and the leader's own made, and the workers follow, without
    waiting for the garbage collector; no conflict is reported."""
    lws, revision, leader, old = ordinal_leader_and_predecessors_service()
    client, events = FakeApiClient(), RecordedEvents()
    client.put(SERVICES, old)
    async with seeded_caches(lws, revision, leader, old) as caches:
        assert await reconciler(client, caches, events)(object_key(leader)) is None
    assert calls(client)[:3] == [
        ("delete", "services", "lws-0"),
        ("create", "services", "lws-0"),
        ("create", "statefulsets", "lws-0"),
    ]
    assert client.calls[0].options["preconditions"] == {"uid": "uid-old-service"}
    created = client.stored(SERVICES, "lws-0", NS)
    assert created is not None
    assert created["metadata"]["ownerReferences"][0]["uid"] == leader["metadata"]["uid"]
    assert [e for e in events.said if e[0] == ev.WARNING] == []


async def test_a_predecessors_service_still_going_is_waited_out_quietly() -> None:
    """Already being deleted (a finalizer holds it): nothing to do but wait."""
    lws, revision, leader, old = ordinal_leader_and_predecessors_service(
        deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/hold"]
    )
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, old) as caches:
        result = await reconciler(client, caches, events)(object_key(leader))
    assert result == Result(requeue_after=1.0)
    assert events.said == [] and calls(client) == []


# --- a missing revision -----------------------------------------------------------------------
async def test_missing_revision_is_reported_once_and_retried_with_backoff() -> None:
    lws = hash_lws()
    leader = hash_leader("no-such-revision", group_ready=None)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, leader) as caches:
        now = [0.0]
        pods = reconciler(client, caches, events, now)
        delays = await delays_of(pods, object_key(leader), now, 9)
        assert delays == [1, 1, 2, 4, 8, 16, 32, MAX_DELAY, MAX_DELAY]
        ((type_, reason, note),) = events.said
        assert (type_, reason) == (ev.WARNING, c.EVENT_REASON_FAILED_CREATE)
        assert "no-such-revision" in note and leader["metadata"]["name"] in note
        # The leader's deletion forgets its delays.
        pods.remember_deleted(leader)
        assert len(pods.waits) == 0
    assert [call for call in calls(client) if call[1] == "statefulsets"] == []


def test_retry_backoff_waits_as_long_as_the_condition_lasted() -> None:
    now = [0.0]
    waits = RetryBackoff(first=0.5, cap=3.0, clock=lambda: now[0])
    seen = []
    for _ in range(6):
        delay, tries = waits.next("a")
        seen.append((delay, tries))
        now[0] += delay
    assert seen == [(0.5, 0), (0.5, 1), (1.0, 2), (2.0, 3), (3.0, 4), (3.0, 5)]
    assert waits.next("b") == (0.5, 0)
    waits.forget("a")
    assert "a" not in waits and waits.next("a") == (0.5, 0)


# --- RecreateGroupAfterStart counts a group against its own size ------------------------------
def group_pod(name: str, index: str, size: int, worker: str, restarts: int = 0) -> JSON:
    return pod(
        name,
        NS,
        api_version="v1",
        kind="Pod",
        uid=f"uid-{name}",
        labels=lws_labels("lws", group_index=index, worker=worker),
        annotations={c.ANNOTATION_SIZE: str(size)},
        phase="Running",
        container_statuses=[{"name": "c", "restartCount": restarts}],
    )


async def test_after_start_uses_the_groups_own_size_during_a_resize() -> None:
    """The LWS now asks for groups of 3; group 0 is still of the old size 2 and complete.
    Its restarted leader recreates it (against the live size it would look incomplete
    for ever and never be recreated)."""
    lws = lws_object("lws", replicas=1, size=3)
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
        c.RESTART_POLICY_RECREATE_GROUP_AFTER_START
    )
    view = view_of(lws)
    leader = group_pod("lws-0", "0", size=2, worker="0", restarts=1)
    worker = group_pod("lws-0-1", "0", size=2, worker="1")
    client = FakeApiClient()
    async with seeded_caches(lws, leader, worker) as caches:
        restarter = GroupRestarter(client, caches)
        assert group_size(leader, view) == 2
        assert not restarter.pending_in_group(leader, view)
        recreating, event = await restarter.handle(leader, view)
    assert recreating and event is not None
    assert calls(client) == [("patch", "leaderworkersets", "lws"), ("delete", "pods", "lws-0")]


async def test_after_start_still_waits_for_a_group_missing_a_pod() -> None:
    lws = lws_object("lws", replicas=1, size=2)
    view = view_of(lws)
    leader = group_pod("lws-0", "0", size=3, worker="0", restarts=1)
    worker = group_pod("lws-0-1", "0", size=3, worker="1")
    async with seeded_caches(lws, leader, worker) as caches:
        restarter = GroupRestarter(FakeApiClient(), caches)
        assert restarter.pending_in_group(leader, view)


def test_group_size_falls_back_to_the_live_spec() -> None:
    view = view_of(lws_object("lws", size=4))
    pod = group_pod("lws-0", "0", size=2, worker="0")
    del pod["metadata"]["annotations"]
    assert group_size(pod, view) == 4


# --- Hash keys never repeat a live group's hostname -------------------------------------------
def key_source(*keys: str) -> tuple[Any, list[str]]:
    drawn: list[str] = []
    remaining = list(keys)

    def draw(namespace: str) -> str:
        drawn.append(remaining.pop(0))
        return drawn[-1]

    return draw, drawn


def new_hash_leader() -> JSON:
    return pod(
        generate_name="lws-5d8f9c7b4-",
        namespace=NS,
        labels=lws_labels("lws", worker="0"),
        annotations={c.ANNOTATION_SIZE: "2"},
        containers=[container("c", "pause:1")],
    )


def hash_context(draw: Any, in_use: set[str]) -> PodAdmissionContext:
    return PodAdmissionContext(
        group_identity=c.GROUP_IDENTITY_HASH,
        new_group_key=draw,
        hostnames_in_use=frozenset(in_use),
    )


def test_a_colliding_draw_is_redrawn() -> None:
    draw, drawn = key_source(SAME_HOST, OTHER_HOST)
    out = mutate_pod(new_hash_leader(), hash_context(draw, {KEY[:8]}))
    assert drawn == [SAME_HOST, OTHER_HOST]
    assert out["metadata"]["labels"][c.LABEL_GROUP_KEY] == OTHER_HOST
    assert out["spec"]["hostname"] == OTHER_HOST[:8]


def test_collisions_without_end_are_denied() -> None:
    draw, drawn = key_source(*[SAME_HOST] * MAX_KEY_DRAWS)
    with pytest.raises(Denied) as denied:
        mutate_pod(new_hash_leader(), hash_context(draw, {KEY[:8]}))
    assert len(drawn) == MAX_KEY_DRAWS
    message = denied.value.message
    assert f"{MAX_KEY_DRAWS} tries" in message and f"LeaderWorkerSet {NS}/lws" in message


def test_a_key_the_pod_brings_is_kept() -> None:
    draw, drawn = key_source()
    body = new_hash_leader()
    body["metadata"]["labels"][c.LABEL_GROUP_KEY] = SAME_HOST
    out = mutate_pod(body, hash_context(draw, {KEY[:8]}))
    assert drawn == [] and out["metadata"]["labels"][c.LABEL_GROUP_KEY] == SAME_HOST


def live_member(key: str, phase: str = "Running", worker: str = "1") -> JSON:
    return pod(
        f"member-{key[:8]}-{worker}",
        NS,
        api_version="v1",
        kind="Pod",
        uid=f"uid-{key}-{worker}",
        labels=lws_labels("lws", group_key=key, group_index=key, worker=worker),
        phase=phase,
    )


def test_finished_pods_hold_no_hostname() -> None:
    pods = [live_member(KEY), live_member(OTHER_HOST, phase="Failed")]
    assert hostnames_in_use(pods) == {KEY[:8]}


def hostname_of(response: Any) -> str:
    assert response.allowed, response.result
    (op,) = [op for op in response.patch if op["path"] == "/spec/hostname"]
    return str(op["value"])


async def test_webhook_redraws_against_the_pod_cache_and_its_own_recent_keys() -> None:
    """A worker of a live group holds KEY's hostname (its leader may be gone already):
    the first draw, colliding with it, is redrawn. The next leader's draw collides with
    the key just handed out, which the cache does not show yet."""
    lws = hash_lws()
    other_lws_member = live_member(OTHER_HOST.replace("0", "1"))
    other_lws_member["metadata"]["labels"][c.LABEL_SET_NAME] = "another"
    draw, drawn = key_source(SAME_HOST, OTHER_HOST, OTHER_HOST, "fedcba98" + "0" * 32)
    async with seeded_caches(lws, live_member(KEY), other_lws_member) as caches:
        mutate = pod_mutator(caches, ControllerOptions(), None, new_group_key=draw)
        first = await mutate({"object": new_hash_leader(), "namespace": NS})
        second = await mutate({"object": new_hash_leader(), "namespace": NS})
    assert hostname_of(first) == OTHER_HOST[:8]
    assert hostname_of(second) == "fedcba98"
    assert drawn == [SAME_HOST, OTHER_HOST, OTHER_HOST, "fedcba98" + "0" * 32]


async def test_webhook_denies_when_every_draw_collides() -> None:
    draw, _ = key_source(*[SAME_HOST] * MAX_KEY_DRAWS)
    async with seeded_caches(hash_lws(), live_member(KEY)) as caches:
        mutate = pod_mutator(caches, ControllerOptions(), None, new_group_key=draw)
        response = await mutate({"object": new_hash_leader(), "namespace": NS})
    assert not response.allowed
    assert "unused by the live groups" in response.result["message"]


def test_issued_hostnames_are_forgotten_after_a_while() -> None:
    now = [0.0]
    issued = IssuedHostnames(memory=10.0, clock=lambda: now[0])
    issued.add(NS, "lws", "aaaaaaaa")
    assert issued.recent(NS, "lws") == {"aaaaaaaa"} and issued.recent(NS, "other") == set()
    now[0] = 11.0
    assert issued.recent(NS, "lws") == set()


# --- a pod deleted before it was ever seen terminating (a grace-0 or forced delete) ----------
def ordinal_group(policy: str) -> tuple[JSON, JSON, JSON, JSON, JSON]:
    """LWS "lws" (one group of 2) under `policy`: the LWS, its revision, leader lws-0, the
    leader's worker StatefulSet and worker lws-0-1 (running, never restarted)."""
    lws = lws_object("lws", replicas=1, size=2)
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy
    revision = rev.new_revision(lws, 1)
    leader = leader_pod("lws", 0, revision_key_of(revision))
    sts = worker_sts("lws", 0, revision_key_of(revision))
    sts["metadata"]["uid"] = "uid-sts"
    sts["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "lws-0", "uid": "uid-lws-0", "controller": True}
    ]
    worker = group_pod("lws-0-1", "0", size=2, worker="1")
    worker["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = revision_key_of(revision)
    worker["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "lws-0",
            "uid": "uid-sts",
            "controller": True,
        }
    ]
    return lws, revision, leader, sts, worker


ON_RESTART = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
# The group back-off is on by default: a recreation is recorded on the LWS first.
RECORDED = ("patch", "leaderworkersets", "lws")


async def test_a_worker_deleted_unseen_still_recreates_its_group() -> None:
    lws, revision, leader, sts, worker = ordinal_group(ON_RESTART)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, sts) as caches:
        pods = reconciler(client, caches, events)
        pods.remember_deleted(worker)
        assert await pods(object_key(worker)) is None
        assert pods.tombstones == {}
        # Told once: the next event of that name finds no tombstone.
        assert await pods(object_key(worker)) is None
    # The leader, then its worker StatefulSet beside the garbage collector.
    assert calls(client) == [
        RECORDED,
        ("delete", "pods", "lws-0"),
        ("delete", "statefulsets", "lws-0"),
    ]
    ((_, reason, note),) = events.said
    assert reason == c.EVENT_REASON_RECREATE_GROUP
    assert note.startswith("Worker pod lws-0-1 failed, deleted leader pod lws-0")
    assert events.abouts == [("LeaderWorkerSet/lws", "lws-0")]


async def test_a_worker_deleted_unseen_under_no_recreating_policy_changes_nothing() -> None:
    lws, revision, leader, sts, worker = ordinal_group(c.RESTART_POLICY_NONE)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, sts) as caches:
        pods = reconciler(client, caches, events)
        pods.remember_deleted(worker)
        assert await pods(object_key(worker)) is None
        assert pods.tombstones == {}
    assert calls(client) == [] and events.said == []


def renamed(pod: JSON, uid: str) -> JSON:
    """The pod its StatefulSet made again under the same name."""
    again = copy.deepcopy(pod)
    again["metadata"]["uid"] = uid
    return again


@pytest.mark.parametrize(
    ("policy", "built"), [(ON_RESTART, False), (c.RESTART_POLICY_NONE, True)], ids=str
)
async def test_a_leader_lost_unseen_and_already_recreated(policy: str, built: bool) -> None:
    """Ordinal leader lws-0 was force-deleted and its StatefulSet made a new lws-0 before
    the reconcile. The loss is seen first: under a recreating policy the group is being
    recreated and the newcomer gets nothing in this reconcile; otherwise the newcomer
    is built on at once."""
    lws, revision, leader, _, _ = ordinal_group(policy)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, renamed(leader, "uid-new-lws-0")) as caches:
        pods = reconciler(client, caches, events)
        pods.remember_deleted(leader)
        assert await pods(object_key(leader)) is None
    assert calls(client) == ([("create", "statefulsets", "lws-0")] if built else [])


async def test_a_tombstone_of_the_pod_the_cache_still_shows_adds_nothing() -> None:
    """The same UID alive in the cache: the pod is reconciled as the cache shows it,
    not as lost (under a recreating policy, a lost leader would be left alone)."""
    lws, revision, leader, _, _ = ordinal_group(ON_RESTART)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader) as caches:
        pods = reconciler(client, caches, events)
        pods.remember_deleted(leader)
        assert await pods(object_key(leader)) is None
        assert pods.tombstones == {}
    assert calls(client) == [("create", "statefulsets", "lws-0")]


async def test_a_failed_reconcile_of_a_lost_pod_keeps_it_for_the_retry() -> None:
    lws, revision, leader, sts, worker = ordinal_group(ON_RESTART)
    client, events = FakeApiClient(), RecordedEvents()
    client.fail[("delete", "pods")] = ApiError(500, {"message": "etcd timeout"})
    async with seeded_caches(lws, revision, leader, sts) as caches:
        pods = reconciler(client, caches, events)
        pods.remember_deleted(worker)
        with pytest.raises(ApiError):
            await pods(object_key(worker))
        assert object_key(worker) in pods.tombstones
        client.fail.clear()
        assert await pods(object_key(worker)) is None
    # Recorded once: the retry of the refused leader DELETE is the same recreation, and
    # the refused DELETE took nothing else with it; the retry tears the group down.
    assert calls(client) == [
        RECORDED,
        ("delete", "pods", "lws-0"),
        ("delete", "pods", "lws-0"),
        ("delete", "statefulsets", "lws-0"),
    ]
    assert [reason for _, reason, _ in events.said] == [c.EVENT_REASON_RECREATE_GROUP]


def test_only_named_pods_are_remembered_and_as_terminating() -> None:
    pods = PodReconciler(FakeApiClient(), cast(LwsCaches, None))
    pods.remember_deleted({"metadata": {"namespace": NS}})
    assert pods.tombstones == {}
    _, _, leader, _, worker = ordinal_group(ON_RESTART)
    worker["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:09Z"
    pods.remember_deleted(leader)
    pods.remember_deleted(worker)
    assert pods.tombstones[object_key(leader)]["metadata"]["deletionTimestamp"]
    assert pods.tombstones[object_key(worker)]["metadata"]["deletionTimestamp"] == (
        "2026-01-01T00:00:09Z"
    )
    assert leader["metadata"].get("deletionTimestamp") is None, "the cache's copy is untouched"


# --- what a reconcile of a worker does -------------------------------------------------------
async def test_a_live_workers_events_build_nothing() -> None:
    """Only a leader's reconcile builds; a worker's serves the restart policy alone."""
    lws, revision, _, _, worker = ordinal_group(c.RESTART_POLICY_NONE)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, worker) as caches:
        assert await reconciler(client, caches, events)(object_key(worker)) is None
    assert calls(client) == [] and events.said == []


@pytest.mark.parametrize("label", [c.LABEL_SET_NAME, c.LABEL_WORKER_INDEX])
async def test_a_pod_without_its_lws_labels_is_a_reconcile_error(label: str) -> None:
    lws, _, leader, _, _ = ordinal_group(c.RESTART_POLICY_NONE)
    del leader["metadata"]["labels"][label]
    async with seeded_caches(lws) as caches:
        pods = reconciler(FakeApiClient(), caches, RecordedEvents())
        pods.remember_deleted(leader)  # a cache holds only pods with the LWS's label
        with pytest.raises(ValueError, match=f"^{label} label is unexpected missing$"):
            await pods(object_key(leader))


# --- waits are per leader ----------------------------------------------------------------------
async def test_each_leader_waits_for_its_revision_on_its_own_and_forgets_once_found() -> None:
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    first = hash_leader(revision_key_of(revision), group_ready=None)
    second = copy.deepcopy(first)
    second["metadata"].update(name="lws-5d8f9c7b4-abcde", uid="uid-second")
    client, events, now = FakeApiClient(), RecordedEvents(), [0.0]
    waits = RetryBackoff(clock=lambda: now[0])
    async with seeded_caches(lws, first, second) as caches:
        pods = PodReconciler(client, caches, events, waits=waits)
        assert await delays_of(pods, object_key(first), now, 4) == [1, 1, 2, 4]
        assert await delays_of(pods, object_key(second), now, 1) == [1]
    assert events.abouts == [("LeaderWorkerSet/lws", first["metadata"]["name"])]
    assert events.said[0][2] == (
        f"Failed to create worker statefulset for leader pod {first['metadata']['name']}: its "
        f"revision (ControllerRevision with {c.LABEL_TEMPLATE_REVISION_HASH}="
        f"{revision_key_of(revision)}) is missing; retrying with backoff"
    )
    # The revision reaches the cache: the first leader's workers are built, its wait ends.
    async with seeded_caches(lws, revision, first, second) as caches:
        pods = PodReconciler(client, caches, events, waits=waits)
        assert await pods(object_key(first)) is None
    assert calls(client) == [("create", "statefulsets", first["metadata"]["name"])]
    assert len(waits) == 1, "the second leader still waits"


# --- the per-group Service -------------------------------------------------------------------
async def test_the_group_service_is_the_leaders_and_selects_its_group() -> None:
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader) as caches:
        assert await reconciler(client, caches, events)(object_key(leader)) is None
    body = client.calls_of("create", "services")[0].body
    assert (body["metadata"]["name"], body["metadata"]["namespace"]) == (GROUP_SERVICE, NS)
    assert body["metadata"]["labels"][c.LABEL_SET_NAME] == "lws"
    assert body["spec"]["selector"] == {c.LABEL_SET_NAME: "lws", c.LABEL_GROUP_INDEX: KEY}
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Pod",
        leader["metadata"]["name"],
        "uid-leader",
    )


async def test_a_group_service_deleted_between_create_and_read_is_created_again() -> None:
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    client, events = FakeApiClient(), RecordedEvents()
    client.fail[("create", "services")] = ApiError(409, {"reason": "AlreadyExists"})
    async with seeded_caches(lws, revision, leader) as caches:
        result = await reconciler(client, caches, events)(object_key(leader))
    assert result == Result(requeue=True)
    assert events.said == []


async def test_each_leader_waits_for_a_foreign_service_on_its_own() -> None:
    """Two Hash leaders whose Service names are taken: each is told once and backs off
    from its own first delay; the leader's own Service (or its deletion) ends its wait."""
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    first = hash_leader(revision_key_of(revision), group_ready=None)
    second = hash_leader(revision_key_of(revision), group_ready=None)
    second["metadata"].update(name="lws-5d8f9c7b4-abcde", uid="uid-second")
    second["metadata"]["labels"].update({c.LABEL_GROUP_INDEX: OTHER_HOST})
    second["metadata"]["labels"].update({c.LABEL_GROUP_KEY: OTHER_HOST})
    second_service = naming.hash_group_service_name("lws", OTHER_HOST)
    taken = [service(GROUP_SERVICE, "uid-x"), service(second_service, "uid-y")]
    client, events, now = FakeApiClient(), RecordedEvents(), [0.0]
    waits = RetryBackoff(clock=lambda: now[0])
    async with seeded_caches(lws, revision, first, second, *taken) as caches:
        pods = PodReconciler(client, caches, events, waits=waits)
        assert await delays_of(pods, object_key(first), now, 3) == [1, 1, 2]
        assert await delays_of(pods, object_key(second), now, 2) == [1, 1]
    assert events.abouts == [
        ("LeaderWorkerSet/lws", first["metadata"]["name"]),
        ("LeaderWorkerSet/lws", "lws-5d8f9c7b4-abcde"),
    ]
    assert events.said[0][2] == (
        f"Service {NS}/{GROUP_SERVICE} for the group of leader pod {first['metadata']['name']}"
        " exists and is owned by Pod someone-else, not by that leader: not using it; retrying"
        " until it is removed"
    )
    # The first leader's own Service is there now: its wait ends, the other's goes on.
    async with seeded_caches(lws, revision, first, service(GROUP_SERVICE, "uid-leader")) as caches:
        pods = PodReconciler(client, caches, events, waits=waits)
        assert await pods(object_key(first)) is None
    assert len(waits) == 1
    # The second's wait ends with its deletion.
    pods.remember_deleted(second)
    assert len(waits) == 0


async def test_a_service_created_after_a_wait_ends_the_wait() -> None:
    lws = unique_per_replica()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready=None)
    client, events, now = FakeApiClient(), RecordedEvents(), [0.0]
    waits = RetryBackoff(clock=lambda: now[0])
    async with seeded_caches(lws, revision, leader, service(GROUP_SERVICE, "uid-x")) as caches:
        pods = PodReconciler(client, caches, events, waits=waits)
        await delays_of(pods, object_key(leader), now, 2)
    async with seeded_caches(lws, revision, leader) as caches:
        pods = PodReconciler(client, caches, events, waits=waits)
        assert await pods(object_key(leader)) is None
    assert len(waits) == 0
    assert [call[:2] for call in calls(client)][:1] == [("create", "services")]


# --- what the group-ready condition is read from ------------------------------------------------
def ready_worker(leader: JSON, sts: JSON) -> JSON:
    """Worker 1 of `leader`'s group, Ready, made by `sts`."""
    labels = leader["metadata"]["labels"]
    owner = controller_ref("StatefulSet", sts["metadata"]["name"], sts["metadata"]["uid"])
    return pod(
        f"{leader['metadata']['name']}-1",
        NS,
        api_version="v1",
        kind="Pod",
        uid="uid-worker-1",
        labels={**labels, c.LABEL_WORKER_INDEX: "1"},
        owners=[{"apiVersion": "apps/v1", **owner}],
        phase="Running",
        ready=True,
    )


def group_ready_written(client: FakeApiClient) -> list[str]:
    return [
        call.body["status"]["conditions"][0]["status"] for call in client.calls_of("patch", "pods")
    ]


@pytest.mark.parametrize("told_by", ["its pods", "its status"])
async def test_the_group_is_ready_when_its_pods_or_its_statefulset_say_so(told_by: str) -> None:
    """The worker pods turn Ready one sync of the StatefulSet controller before its
    status says so; either is enough."""
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready="False")
    sts = worker_set(leader, ready=told_by == "its status")
    sts["metadata"]["uid"] = "uid-ws"
    workers = [ready_worker(leader, sts)] if told_by == "its pods" else []
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, sts, *workers) as caches:
        assert await reconciler(client, caches, events)(object_key(leader)) is None
    assert group_ready_written(client) == ["True"]


async def test_a_group_ready_write_the_cache_has_not_shown_is_not_repeated() -> None:
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready="False")
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, worker_set(leader, ready=True)) as caches:
        pods = reconciler(client, caches, events)
        for _ in range(3):  # e.g. each worker's event, before the leader's own update
            await pods(object_key(leader))
    assert group_ready_written(client) == ["True"]


async def test_a_lost_hash_leader_is_counted_as_a_recreation() -> None:
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision))
    leader["status"]["phase"] = "Failed"
    # A UID never counted before in this process: the metric counts a leader UID once.
    leader["metadata"]["uid"] = f"uid-lost-{uuid.uuid4()}"
    labels = {"namespace": NS, "leaderworkerset": "lws", "group_identity": c.GROUP_IDENTITY_HASH}

    def recreations(pods: PodReconciler) -> float:
        registry = pods.group_metrics.registry
        return sum(
            registry.get_sample_value("lws_group_recreations_total", {**labels, "cause": cause})
            or 0.0
            for cause in Cause
        )

    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader) as caches:
        pods = reconciler(client, caches, events)
        before = recreations(pods)
        await pods(object_key(leader))
    assert recreations(pods) == before + 1
    assert calls(client) == [("delete", "pods", leader["metadata"]["name"])]


async def test_a_lost_pod_is_seen_by_the_restart_policy_only() -> None:
    """Even a lost pod that looks like a misplaced leader (a leader with a leader's name
    annotation, which a live one would be reported for) gets nothing else."""
    lws, revision, leader, _, _ = ordinal_group(c.RESTART_POLICY_NONE)
    leader["metadata"]["annotations"] = {c.ANNOTATION_LEADER_NAME: "lws-0"}
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision) as caches:
        pods = reconciler(client, caches, events)
        pods.remember_deleted(leader)
        assert await pods(object_key(leader)) is None
    assert calls(client) == [] and events.said == []


async def test_a_live_workers_restart_recreates_its_group_and_asks_no_requeue() -> None:
    lws, revision, leader, sts, worker = ordinal_group(ON_RESTART)
    worker["status"]["containerStatuses"][0]["restartCount"] = 2
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, sts, worker) as caches:
        assert await reconciler(client, caches, events)(object_key(worker)) is None
    assert calls(client) == [
        RECORDED,
        ("delete", "pods", "lws-0"),
        ("delete", "statefulsets", "lws-0"),
        ("delete", "pods", "lws-0-1"),
    ]
    assert events.abouts == [("LeaderWorkerSet/lws", "lws-0")]


async def test_a_deleted_leaders_group_ready_write_is_forgotten() -> None:
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision), group_ready="False")
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, worker_set(leader, ready=True)) as caches:
        pods = reconciler(client, caches, events)
        await pods(object_key(leader))
        assert pods.group_ready_writes.unseen != {}
        pods.remember_deleted(leader)
        assert pods.group_ready_writes.unseen == {}, "nothing kept for a pod that is gone"


# --- the LeaderWorkerSet is read from the cache, not decoded per event ----------------------
async def test_pod_events_read_the_cached_view_of_their_leaderworkerset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lws = hash_lws()
    revision = rev.new_revision(lws, 1)
    leader = hash_leader(revision_key_of(revision))
    client, events = FakeApiClient(), RecordedEvents()
    async with seeded_caches(lws, revision, leader, worker_set(leader, ready=True)) as caches:
        decoded = count_lws_decodes(monkeypatch)
        pods = reconciler(client, caches, events)
        for _ in range(3):
            assert await pods(object_key(leader)) is None
    # Decoded once, as it entered the cache; never by the reconciles.
    assert decoded == []
