"""What the pod reconciler builds for a leader, in both modes: the worker StatefulSet
(none for a size-1 group, none twice, pinned under exclusive placement), nothing for
a leader that is gated or on its way out, the startup policy's wait, and a failed
Hash leader taking its group down."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import revision_key_of
from leaderworkerset.api.resources import NODES, STATEFULSETS
from leaderworkerset.controllers import revisions as rev
from leaderworkerset.controllers.pod.reconciler import PodReconciler, TopologyError
from leaderworkerset.controllers.pod.worker_statefulset import CREATE_UNSEEN_FOR, WorkerSetCreates
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.controller import Result
from leaderworkerset.runtime.indexes import object_key
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import container, lws_labels, pod
from tests.toolkit.recorded_events import RecordedEvents
from tests.toolkit.statefulsets import statefulset

JSON = dict[str, Any]
NS = "default"
GROUP_KEY = "0123456789abcdef0123456789abcdef01234567"
TOPOLOGY = "topology.kubernetes.io/zone"
MODES = [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH]


def calls(client: FakeApiClient) -> list[tuple[str, str, str]]:
    """Every call the reconciler made, as (verb, plural, name)."""
    return [(call.verb, call.plural, call.name) for call in client.calls]


def writes(client: FakeApiClient) -> list[tuple[str, str, str]]:
    return [(call.verb, call.plural, call.name) for call in client.writes()]


def created(client: FakeApiClient) -> list[JSON]:
    """The bodies of the objects created, in order."""
    return [call.body for call in client.calls_of("create")]


def an_lws(mode: str, size: int = 3, **spec: Any) -> JSON:
    body = lws_object("lws", replicas=1, size=size, groupIdentity=mode, **spec)
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = c.RESTART_POLICY_NONE
    return body


def a_leader(
    lws: JSON,
    *,
    conditions: dict[str, str] | None = None,
    phase: str = "Running",
    gated: bool = False,
    deleting: bool = False,
    node: str | None = None,
    **annotations: str,
) -> JSON:
    """A leader as the webhook and the kubelet leave it, of `lws`'s first revision."""
    hash_mode = lws["spec"].get("groupIdentity") == c.GROUP_IDENTITY_HASH
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    name = "lws-5d8f9c7b4-x7k2p" if hash_mode else "lws-0"
    state = conditions or {"Ready": "True", "ContainersReady": "True"}
    gates = [{"conditionType": c.CONDITION_GROUP_READY}] if hash_mode and size > 1 else None
    return pod(
        name,
        NS,
        api_version="v1",
        kind="Pod",
        uid=f"uid-{name}",
        deleted="2026-01-01T00:00:00Z" if deleting else None,
        labels=lws_labels(
            "lws",
            worker="0",
            group_index=GROUP_KEY if hash_mode else "0",
            group_key=GROUP_KEY,
            revision=revision_key_of(rev.new_revision(lws, 1)),
        ),
        annotations={c.ANNOTATION_SIZE: str(size), **annotations},
        containers=[container("c", "pause:1")],
        spec={"readinessGates": gates} if gates else None,
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        node=node,
        phase=phase,
        status={"conditions": [{"type": k, "status": v} for k, v in state.items()]},
    )


def worker_statefulset_of(leader: JSON) -> JSON:
    meta = leader["metadata"]
    labels = {
        k: meta["labels"][k]
        for k in (c.LABEL_SET_NAME, c.LABEL_GROUP_INDEX, c.LABEL_TEMPLATE_REVISION_HASH)
    }
    return statefulset(
        meta["name"],
        NS,
        api_version="apps/v1",
        kind="StatefulSet",
        labels=labels,
        replicas=2,
        status={"replicas": 2, "availableReplicas": 2},
    )


async def reconcile(
    lws: JSON,
    leader: JSON,
    *objects: JSON,
    client: FakeApiClient | None = None,
    events: RecordedEvents | None = None,
    **options: Any,
) -> tuple[FakeApiClient, RecordedEvents, Result | None]:
    """One reconcile of `leader` with `lws`, its first revision and `objects` cached."""
    client = client or FakeApiClient()
    events = events or RecordedEvents()
    async with seeded_caches(lws, rev.new_revision(lws, 1), leader, *objects) as caches:
        pods = PodReconciler(
            client,
            caches,
            events,
            options=ControllerOptions(**options),
        )
        result = await pods(object_key(leader))
    return client, events, result


# --- the worker StatefulSet ------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_a_leader_gets_its_worker_statefulset_once(mode: str) -> None:
    lws = an_lws(mode)
    leader = a_leader(lws)
    client, events, result = await reconcile(lws, leader)
    assert result is None
    assert writes(client)[-1] == ("create", "statefulsets", leader["metadata"]["name"])
    body = created(client)[-1]
    assert body["spec"]["replicas"] == 2
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Pod", leader["metadata"]["uid"])
    ((_, reason, note),) = events.said
    assert reason == c.REASON_GROUPS_PROGRESSING and leader["metadata"]["name"] in note
    assert events.abouts == [("LeaderWorkerSet/lws", leader["metadata"]["name"])]
    # Never updated in place: with its StatefulSet cached, nothing is written for it.
    client, events, _ = await reconcile(lws, leader, worker_statefulset_of(leader))
    assert ("create", "statefulsets", leader["metadata"]["name"]) not in calls(client)
    assert c.REASON_GROUPS_PROGRESSING not in events.reasons


@pytest.mark.parametrize("mode", MODES)
async def test_a_worker_statefulset_the_cache_has_not_shown_yet_is_not_created_again(
    mode: str,
) -> None:
    """The leader's own status changes can wake it before the watch brings the
    StatefulSet it created: that reconcile waits for the cache instead of a second
    create (answered 409)."""
    lws = an_lws(mode)
    leader = a_leader(lws)
    name = leader["metadata"]["name"]
    now = [0.0]
    client = FakeApiClient()
    async with seeded_caches(lws, rev.new_revision(lws, 1), leader) as caches:
        pods = PodReconciler(client, caches, RecordedEvents())
        pods.worker_creates = WorkerSetCreates(clock=lambda: now[0])
        assert await pods(object_key(leader)) is None
        now[0] = 1.0
        again = await pods(object_key(leader))
        assert again is not None and again.requeue_after == CREATE_UNSEEN_FOR - 1.0
        assert writes(client).count(("create", "statefulsets", name)) == 1
        # Not seen in time (deleted before the watch showed it, say): created again.
        now[0] = CREATE_UNSEEN_FOR + 0.5
        assert await pods(object_key(leader)) is None
        assert writes(client).count(("create", "statefulsets", name)) == 2
        caches.statefulsets._handle_event(
            {"type": "ADDED", "object": worker_statefulset_of(leader)}
        )
        assert await pods(object_key(leader)) is None
        assert writes(client).count(("create", "statefulsets", name)) == 2
        assert pods.worker_creates.unseen == {}


@pytest.mark.parametrize("mode", MODES)
async def test_a_create_answered_409_waits_only_for_this_leaders_statefulset(mode: str) -> None:
    """409 on create: the API server holds a StatefulSet of the leader's name. This
    leader's (an earlier create whose answer was lost) is waited for like any create;
    an old leader's, still being collected, is not (its deletion wakes the leader)."""
    lws = an_lws(mode)
    leader = a_leader(lws)
    name, uid = leader["metadata"]["name"], leader["metadata"]["uid"]
    for owner, waits in ((uid, True), ("uid-of-an-old-leader", False)):
        client = FakeApiClient()
        existing = worker_statefulset_of(leader)
        existing["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": owner, "controller": True}
        ]
        client.put(STATEFULSETS, existing)
        async with seeded_caches(lws, rev.new_revision(lws, 1), leader) as caches:
            pods = PodReconciler(client, caches, RecordedEvents())
            assert await pods(object_key(leader)) is None
            assert writes(client).count(("create", "statefulsets", name)) == 1
            assert (pods.worker_creates.wait_left(leader) > 0) is waits


@pytest.mark.parametrize("mode", MODES)
async def test_a_size_one_group_gets_no_worker_statefulset(mode: str) -> None:
    lws = an_lws(mode, size=1)
    client, events, result = await reconcile(lws, a_leader(lws))
    assert result is None
    assert [call for call in calls(client) if call[1] == "statefulsets"] == []
    assert events.said == []


async def test_a_hash_group_follows_its_leaders_revision_size() -> None:
    """The leader's size annotation (its revision's size) wins over the live spec."""
    lws = an_lws(c.GROUP_IDENTITY_HASH, size=3)
    leader = a_leader(lws)
    leader["metadata"]["annotations"][c.ANNOTATION_SIZE] = "1"
    client, _, _ = await reconcile(lws, leader)
    assert [call for call in calls(client) if call[1] == "statefulsets"] == []
    leader["metadata"]["annotations"][c.ANNOTATION_SIZE] = "not a number"
    client, _, _ = await reconcile(lws, leader)
    assert writes(client)[-1][:2] == ("create", "statefulsets")


async def test_an_existing_worker_statefulset_is_not_an_error() -> None:
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL)
    client = FakeApiClient()
    client.fail[("create", "statefulsets")] = ApiError(409, {"reason": "AlreadyExists"})
    _, events, result = await reconcile(lws, a_leader(lws), client=client)
    assert result is None and events.said == []


async def test_a_refused_worker_statefulset_is_told_and_retried() -> None:
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL)
    client = FakeApiClient()
    client.fail[("create", "statefulsets")] = ApiError(403, {"message": "quota exceeded"})
    events = RecordedEvents()
    with pytest.raises(ApiError):
        await reconcile(lws, a_leader(lws), client=client, events=events)
    ((type_, reason, note),) = events.said
    assert (type_, reason) == ("Warning", c.EVENT_REASON_FAILED_CREATE)
    assert "lws-0" in note and "quota exceeded" in note
    assert events.abouts == [("LeaderWorkerSet/lws", "lws-0")]


# --- nothing for a leader that is gated or going ---------------------------------------------
async def test_nothing_is_built_while_a_hash_leader_is_gated() -> None:
    lws = an_lws(
        c.GROUP_IDENTITY_HASH,
        networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA},
    )
    # A stale group-ready condition that an admitted leader would get corrected.
    state = {"Ready": "False", "ContainersReady": "True", c.CONDITION_GROUP_READY: "True"}
    pod_group = {c.ANNOTATION_POD_GROUP_NAME: "lws-pg"}
    leader = a_leader(lws, gated=True, conditions=state, **pod_group)
    client, events, result = await reconcile(lws, leader, gang_scheduling=True)
    assert (calls(client), events.said, result) == ([], [], None)
    # The same leader once admitted gets its group-ready condition, Service, PodGroup
    # and workers: the gate alone held them back.
    admitted = a_leader(lws, conditions=state, **pod_group)
    client, _, _ = await reconcile(lws, admitted, gang_scheduling=True)
    assert {call[1] for call in writes(client)} == {
        "pods",
        "services",
        "podgroups",
        "statefulsets",
    }


@pytest.mark.parametrize("mode", MODES)
async def test_a_deleting_leader_gets_no_group_service_pod_group_or_workers(mode: str) -> None:
    lws = an_lws(mode, networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA})
    leader = a_leader(lws, deleting=True, **{c.ANNOTATION_POD_GROUP_NAME: "lws-pg"})
    client, events, result = await reconcile(lws, leader, gang_scheduling=True)
    assert (calls(client), events.said, result) == ([], [], None)


async def test_a_leader_marked_as_a_worker_is_reported_and_left_alone() -> None:
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL)
    leader = a_leader(lws, **{c.ANNOTATION_LEADER_NAME: "lws-0"})
    client, events, result = await reconcile(lws, leader)
    assert (calls(client), result) == ([], None)
    ((type_, reason, note),) = events.said
    assert (type_, reason) == ("Warning", c.EVENT_REASON_FAILED_CREATE)
    assert f"{NS}/lws-0" in note
    assert events.abouts == [("LeaderWorkerSet/lws", "lws-0")]


# --- the startup policy ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "conditions", "built"),
    [
        # Ordinal waits for the leader to be Ready.
        (c.GROUP_IDENTITY_ORDINAL, {"Ready": "False", "ContainersReady": "True"}, False),
        (c.GROUP_IDENTITY_ORDINAL, {"Ready": "True", "ContainersReady": "True"}, True),
        # Hash: Ready waits for the group-ready gate, which waits for the workers; the
        # containers being ready is what counts.
        (c.GROUP_IDENTITY_HASH, {"Ready": "False", "ContainersReady": "True"}, True),
        (c.GROUP_IDENTITY_HASH, {"Ready": "True", "ContainersReady": "False"}, False),
    ],
)
async def test_leader_ready_startup_waits_for_the_right_condition(
    mode: str, conditions: dict[str, str], built: bool
) -> None:
    lws = an_lws(mode, startupPolicy=c.STARTUP_POLICY_LEADER_READY)
    client, _, result = await reconcile(lws, a_leader(lws, conditions=conditions))
    created = [call for call in calls(client) if call[:2] == ("create", "statefulsets")]
    assert bool(created) == built and result is None


async def test_leader_created_startup_does_not_wait() -> None:
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL)
    leader = a_leader(lws, conditions={"Ready": "False", "ContainersReady": "False"})
    client, _, _ = await reconcile(lws, leader)
    assert writes(client)[-1][:2] == ("create", "statefulsets")


# --- exclusive placement ---------------------------------------------------------------------
def exclusive_lws() -> JSON:
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL)
    lws["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: TOPOLOGY}
    return lws


def a_node(name: str, **labels: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


async def test_exclusive_workers_are_pinned_to_the_leaders_topology_domain() -> None:
    lws = exclusive_lws()
    client = FakeApiClient()
    client.put(NODES, a_node("n1", **{TOPOLOGY: "zone-a"}))
    await reconcile(lws, a_leader(lws, node="n1"), client=client)
    assert calls(client)[-1][:2] == ("create", "statefulsets")
    template = created(client)[-1]["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {TOPOLOGY: "zone-a"}


async def test_exclusive_workers_wait_for_the_leader_to_be_scheduled() -> None:
    lws = exclusive_lws()
    client, _, result = await reconcile(lws, a_leader(lws))
    assert (writes(client), result) == ([], None)


async def test_a_missing_node_is_a_reconcile_error() -> None:
    lws = exclusive_lws()
    with pytest.raises(ApiError) as raised:
        await reconcile(lws, a_leader(lws, node="gone"))
    assert raised.value.not_found


async def test_a_node_without_the_topology_label_is_a_reconcile_error() -> None:
    lws = exclusive_lws()
    client = FakeApiClient()
    client.put(NODES, a_node("n1", other="x"))
    with pytest.raises(TopologyError, match=TOPOLOGY):
        await reconcile(lws, a_leader(lws, node="n1"), client=client)
    assert writes(client) == []


# --- a lost Hash leader ----------------------------------------------------------------------
@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
async def test_a_finished_hash_leader_takes_its_group_down(phase: str) -> None:
    lws = an_lws(c.GROUP_IDENTITY_HASH)
    leader = a_leader(lws, phase=phase)
    client, events, result = await reconcile(lws, leader, worker_statefulset_of(leader))
    assert result is None
    name = leader["metadata"]["name"]
    assert writes(client) == [("delete", "pods", name)]
    delete = client.calls_of("delete")[-1]
    assert delete.options["propagation_policy"] == "Foreground"
    assert delete.options["preconditions"] == {"uid": leader["metadata"]["uid"]}
    ((_, reason, note),) = events.said
    assert reason == c.EVENT_REASON_RECREATE_GROUP
    assert (
        note == f"Leader pod {name} failed, deleted leader pod {name} to recreate group {GROUP_KEY}"
    )
    assert events.abouts == [("LeaderWorkerSet/lws", name)]


async def test_a_finished_ordinal_leader_is_left_to_its_statefulset() -> None:
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL)
    leader = a_leader(lws, phase="Failed")
    client, events, _ = await reconcile(lws, leader, worker_statefulset_of(leader))
    assert writes(client) == [] and events.said == []


async def test_a_lost_hash_leader_already_gone_is_not_reported() -> None:
    lws = an_lws(c.GROUP_IDENTITY_HASH)
    client = FakeApiClient()
    client.fail[("delete", "pods")] = ApiError(404, {"reason": "NotFound"})
    _, events, _ = await reconcile(lws, a_leader(lws, phase="Failed"), client=client)
    assert events.said == []


async def test_an_ordinal_group_follows_the_live_size() -> None:
    """Ordinal follows the live spec, as upstream: the leader's size annotation (of the
    revision it was made from) does not decide whether it gets workers."""
    lws = an_lws(c.GROUP_IDENTITY_ORDINAL, size=3)
    leader = a_leader(lws)
    leader["metadata"]["annotations"][c.ANNOTATION_SIZE] = "1"
    client, _, _ = await reconcile(lws, leader)
    assert writes(client)[-1] == ("create", "statefulsets", "lws-0")
    single = an_lws(c.GROUP_IDENTITY_ORDINAL, size=1)
    leader = a_leader(single)
    leader["metadata"]["annotations"][c.ANNOTATION_SIZE] = "3"
    client, _, _ = await reconcile(single, leader)
    assert writes(client) == []


@pytest.mark.parametrize("mode", MODES)
async def test_the_worker_statefulset_carries_the_lws_identity(mode: str) -> None:
    lws = an_lws(mode)
    lws["metadata"]["labels"] = {"team": "a"}
    client, _, _ = await reconcile(lws, a_leader(lws))
    body = created(client)[-1]
    assert body["metadata"]["labels"]["team"] == "a"
    assert body["metadata"]["labels"][c.LABEL_SET_NAME] == "lws"
    assert body["spec"]["serviceName"] == "lws"
