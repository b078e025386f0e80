"""Group teardown beside the garbage collector (controllers/pod/group_teardown.py), on
the real control plane. kube-controller-manager is paused (SIGSTOP) while a group
restarts, so whatever of the old group is marked for deletion meanwhile was marked by
this controller. The guarantees kept: an Ordinal replacement leader never exists beside
a pod of its predecessor group; a PostTermination replacement stays gated until every
old pod is gone; a controller that crashes between the leader's DELETE and the rest
finishes the teardown when it comes back; nothing is orphaned, and nothing is left
once the LeaderWorkerSet is deleted. And the opt-in parallel LeaderWorkerSet deletion
deletes only what the deleted UID owned."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.controlplane.components import CONTROLLER_MANAGER
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import TERMINATION_DELAY_ANNOTATION, NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import controller_uid
from leaderworkerset.api.resources import (
    DEPLOYMENTS,
    LEADERWORKERSETS,
    PODS,
    REPLICASETS,
    SERVICES,
    STATEFULSETS,
)
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.controlplane import ExternalCluster
from tests.toolkit.cluster import (
    gated_pod,
    is_leader,
    key_of,
    leaders,
    lws_pods,
    name_of,
    new_leader,
    replacement_of,
    scheduling_gated,
    wait_ready,
)
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.teardown_timeline import CREATED, GONE, MARKED, Timeline, recording
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
SIZE = 3


def restarting(body: JSON) -> JSON:
    template = body["spec"]["leaderWorkerTemplate"]
    template["restartPolicy"] = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    template["workerTemplate"]["metadata"] = {"annotations": {TERMINATION_DELAY_ANNOTATION: "1"}}
    return body


def slowly_ending(body: JSON) -> JSON:
    """Every pod takes 5 s to end once deleted: a window to look at while it does."""
    template = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["metadata"]["annotations"][TERMINATION_DELAY_ANNOTATION] = "5"
    return body


def uid(obj: JSON) -> str:
    return str(obj["metadata"]["uid"])


def marked(obj: JSON | None) -> bool:
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


@pytest.fixture
def gc_pause(control_plane: ControlPlane | ExternalCluster) -> Iterator[ControlPlane]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("pauses kube-controller-manager: needs the control plane this session runs")
    yield control_plane


async def objects_of(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    """Every object the LeaderWorkerSet's teardown could leave: its pods, StatefulSets,
    Services, and (Hash) its Deployment and ReplicaSets."""
    found: list[JSON] = []
    for resource in (PODS, STATEFULSETS, SERVICES, DEPLOYMENTS, REPLICASETS):
        answer = await api.list(resource, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
        found += [{**item, "kind": resource.kind} for item in answer.get("items", [])]
    return found


async def assert_nothing_orphaned(api: ApiClient, namespace: str, name: str) -> None:
    """Each object's controller exists with the UID its reference names."""
    lws = await api.get(LEADERWORKERSETS, name, namespace)
    found = await objects_of(api, namespace, name)
    alive = {uid(lws)} | {uid(obj) for obj in found}
    for obj in found:
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
        assert refs and refs[0]["uid"] in alive, f"{obj['kind']} {name_of(obj)} is orphaned"


async def delete_and_expect_nothing_left(api: ApiClient, namespace: str, name: str) -> None:
    await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")

    async def nothing_left() -> bool:
        return await objects_of(api, namespace, name) == []

    await eventually(nothing_left, within=120, what=f"nothing of {name} left")


async def old_group(api: ApiClient, namespace: str, name: str) -> tuple[JSON, list[JSON], JSON]:
    """(leader, workers, worker StatefulSet) of the group whose leader sorts first."""
    leader = min(await leaders(api, namespace, name), key=name_of)
    pods = [p for p in await lws_pods(api, namespace, name) if key_of(p) == key_of(leader)]
    workers = sorted((p for p in pods if not is_leader(p)), key=name_of)
    sts = await api.get(STATEFULSETS, name_of(leader), namespace)
    return leader, workers, sts


async def workers_going(api: ApiClient, namespace: str, workers: list[JSON], sts: JSON) -> bool:
    """The group's worker StatefulSet and workers each gone or marked for deletion."""
    objs = [await api.get_or_none(STATEFULSETS, name_of(sts), namespace)]
    objs += [await api.get_or_none(PODS, name_of(w), namespace) for w in workers]
    return all(o is None or uid(o) not in {uid(sts), *map(uid, workers)} or marked(o) for o in objs)


async def wait_torn_down_by_us(
    api: ApiClient, namespace: str, leader: JSON, workers: list[JSON], sts: JSON
) -> None:
    """With the garbage collector paused, only the controller can have marked these."""

    async def all_marked() -> bool:
        objs = [await api.get_or_none(PODS, name_of(leader), namespace)]
        objs.append(await api.get_or_none(STATEFULSETS, name_of(sts), namespace))
        objs += [await api.get_or_none(PODS, name_of(w), namespace) for w in workers[:-1]]
        stalled = await api.get(PODS, name_of(workers[-1]), namespace)
        return all(o is None or marked(o) for o in objs) and marked(stalled)

    await eventually(all_marked, within=30, what="leader, worker set and workers marked")
    # The leader is held by its foreground finalizer until its set is gone.
    pod = await api.get_or_none(PODS, name_of(leader), namespace)
    assert pod is not None and uid(pod) == uid(leader)
    assert "foregroundDeletion" in pod["metadata"]["finalizers"]


async def test_ordinal_replacement_never_beside_its_predecessor(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    gc_pause: ControlPlane,
) -> None:
    api, sim, name = nodesim_api, node_simulator, "ord"
    await api.create(LEADERWORKERSETS, restarting(lws_manifest(name, namespace, size=SIZE)))
    await wait_ready(api, namespace, name, 2)
    leader, workers, sts = await old_group(api, namespace, name)
    old_uids = {uid(leader), *(uid(w) for w in workers)}
    await sim.stall_termination(namespace, name_of(workers[-1]))

    async with recording(api, namespace) as line:
        existing = set(line.objects)
        with gc_pause.paused(CONTROLLER_MANAGER):
            await sim.restart_container(namespace, name_of(workers[0]))
            await wait_torn_down_by_us(api, namespace, leader, workers, sts)

        async def predecessor_only() -> bool:
            pod = await api.get_or_none(PODS, name_of(leader), namespace)
            return pod is None or uid(pod) == uid(leader)

        await stays(predecessor_only, seconds=3, what="no new leader while a worker stays")
        await sim.release_termination(namespace, name_of(workers[-1]))

        await replacement_of(api, namespace, leader, ready=True)
        await wait_ready(api, namespace, name, 2)
    last_old_gone = max(line.objects[u].steps[GONE] for u in old_uids)
    created = [s for u, s in line.objects.items() if u not in existing and s.kind == "Pod"]
    # Exactly the new group: the old worker StatefulSet made none of its pods again.
    assert sorted(s.name for s in created) == sorted(name_of(p) for p in [leader, *workers])
    assert all(s.steps[CREATED] >= last_old_gone for s in created)
    await assert_nothing_orphaned(api, namespace, name)
    await delete_and_expect_nothing_left(api, namespace, name)


@pytest.mark.parametrize("identity", [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH])
async def test_a_leader_deleted_by_someone_else_takes_its_workers_at_once(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    gc_pause: ControlPlane,
    identity: str,
) -> None:
    """`kubectl delete pod` of a leader (background): with the collector paused, its
    worker StatefulSet and workers are marked while the leader still terminates, then
    the group comes back whole."""
    api, name = nodesim_api, "bg"
    body = slowly_ending(
        restarting(lws_manifest(name, namespace, size=SIZE, groupIdentity=identity))
    )
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 2)
    leader, workers, sts = await old_group(api, namespace, name)
    old_keys = {key_of(p) for p in await leaders(api, namespace, name)}

    async def workers_going_leader_not_gone() -> bool:
        pod = await api.get_or_none(PODS, name_of(leader), namespace)
        assert pod is not None and uid(pod) == uid(leader), "the leader went first"
        return await workers_going(api, namespace, workers, sts)

    with gc_pause.paused(CONTROLLER_MANAGER):
        await api.delete(PODS, name_of(leader), namespace)
        await eventually(workers_going_leader_not_gone, within=4, what="the workers marked")
    if identity == c.GROUP_IDENTITY_ORDINAL:
        await replacement_of(api, namespace, leader, ready=True)
    else:
        await new_leader(api, namespace, name, old_keys)

    async def whole_again() -> bool:
        pods = await lws_pods(api, namespace, name)
        return len(pods) == 2 * SIZE and not (
            {uid(leader), *map(uid, workers)} & {uid(p) for p in pods}
        )

    await eventually(whole_again, within=60, what="two whole groups, none of the old pods")
    await wait_ready(api, namespace, name, 2)
    await assert_nothing_orphaned(api, namespace, name)
    await delete_and_expect_nothing_left(api, namespace, name)


async def test_a_background_deleted_leaders_service_outlives_it_and_its_successor_takes_it(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    gc_pause: ControlPlane,
) -> None:
    """`kubectl delete pod` of an Ordinal leader under UniquePerReplica, the collector
    paused: its workers are marked while it terminates, its Service is not (the
    collector would take it once the leader is gone). The leader recreated under the
    name replaces that Service with its own and gets its workers."""
    api, name = nodesim_api, "bgsvc"
    unique = {"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA}
    body = slowly_ending(restarting(lws_manifest(name, namespace, size=SIZE, networkConfig=unique)))
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 2)
    leader, workers, sts = await old_group(api, namespace, name)
    service = await api.get(SERVICES, name_of(leader), namespace)
    assert controller_uid(service) == uid(leader)

    with gc_pause.paused(CONTROLLER_MANAGER):
        await api.delete(PODS, name_of(leader), namespace)
        await eventually(
            lambda: workers_going(api, namespace, workers, sts),
            within=4,
            what="the workers marked",
        )
        # Past the controller's next passes over the terminating leader.
        await stays(
            lambda: service_kept(api, namespace, service),
            seconds=2,
            what="the old leader's Service kept while it terminates",
        )
    successor = await replacement_of(api, namespace, leader, ready=True)

    async def successors_service() -> bool:
        found = await api.get_or_none(SERVICES, name_of(leader), namespace)
        return found is not None and controller_uid(found) == uid(successor)

    await eventually(successors_service, within=30, what="the Service owned by the new leader")
    await wait_ready(api, namespace, name, 2)
    await assert_nothing_orphaned(api, namespace, name)


async def service_kept(api: ApiClient, namespace: str, service: JSON) -> bool:
    found = await api.get_or_none(SERVICES, name_of(service), namespace)
    return found is not None and uid(found) == uid(service) and not marked(found)


async def test_a_surge_rollout_keeps_each_replaced_groups_service_until_its_leader_goes(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """Upstream's e2e spec "headless services scale up during MaxSurge": four groups with
    a Service each, a surge of four (three used). The StatefulSet controller deletes a
    replaced leader in the background; its workers go at once, its Service only when it
    is gone, as under the collector alone, so the surge groups' Services stand beside
    all four old ones: seven at once. Then four again."""
    api, name = nodesim_api, "surge"
    body = lws_manifest(
        name,
        namespace,
        replicas=4,
        size=2,
        networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA},
        rolloutStrategy={
            "type": c.ROLLOUT_STRATEGY_ROLLING_UPDATE,
            "rollingUpdateConfiguration": {"maxSurge": 4},
        },
    )
    # Each old pod takes 3 s to end: the replaced group's Service must outlive that.
    template = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["metadata"] = {"annotations": {TERMINATION_DELAY_ANNOTATION: "3"}}
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 4)

    def group_services(count: int) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            answer = await api.list(
                SERVICES, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}"
            )
            return len([s for s in answer["items"] if name_of(s) != name]) == count

        return probe

    await eventually(group_services(4), what="a Service per group")
    patch = {
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"metadata": {"labels": {"v": "2"}}}}}
    }
    await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace)
    await eventually(group_services(7), within=60, interval=0.1, what="seven group Services")
    await wait_ready(api, namespace, name, 4)
    await eventually(group_services(4), within=60, what="four group Services after the rollout")
    await assert_nothing_orphaned(api, namespace, name)


async def test_a_deleted_lws_keeps_upstreams_order_by_default(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """Without teardown.leaderWorkerSetDeletion, the leaders the collector deletes are not
    taken for leaders deleted alone: each group's workers go once its leader is gone."""
    api, name = nodesim_api, "order"
    body = restarting(lws_manifest(name, namespace, size=SIZE))
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"][
        TERMINATION_DELAY_ANNOTATION
    ] = "3"
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 2)
    pods = await lws_pods(api, namespace, name)
    async with recording(api, namespace) as line:
        await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")

        def all_gone() -> bool:
            return all(GONE in line.objects[uid(p)].steps for p in pods)

        await eventually(all_gone, within=60, what="every pod gone")
    gone = {
        line.objects[uid(p)].group: line.objects[uid(p)].steps[GONE] for p in pods if is_leader(p)
    }
    for worker in (line.objects[uid(p)] for p in pods if not is_leader(p)):
        assert worker.steps[MARKED] >= gone[worker.group], worker.name


async def test_post_termination_replacement_gated_until_the_last_old_pod(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    gc_pause: ControlPlane,
) -> None:
    api, sim, name = nodesim_api, node_simulator, "post"
    body = hash_lws(
        name,
        namespace,
        size=SIZE,
        groupReplacementPolicy=c.GROUP_REPLACEMENT_POST_TERMINATION,
    )
    await api.create(LEADERWORKERSETS, restarting(body))
    await wait_ready(api, namespace, name, 2)
    leader, workers, sts = await old_group(api, namespace, name)
    before = {key_of(p) for p in await leaders(api, namespace, name)}
    await sim.stall_termination(namespace, name_of(workers[-1]))
    with gc_pause.paused(CONTROLLER_MANAGER):
        await sim.restart_container(namespace, name_of(workers[0]))
        await wait_torn_down_by_us(api, namespace, leader, workers, sts)

    async def gated_replacement() -> JSON | None:
        fresh = [p for p in await leaders(api, namespace, name) if key_of(p) not in before]
        return fresh[0] if len(fresh) == 1 and scheduling_gated(fresh[0]) else None

    replacement = await eventually(gated_replacement, within=60, what="a gated replacement")
    await stays(gated_replacement, seconds=3, what="gated while an old worker terminates")
    await sim.release_termination(namespace, name_of(workers[-1]))
    await wait_ready(api, namespace, name, 2)
    assert not gated_pod(await api.get(PODS, name_of(replacement), namespace))
    assert [p for p in await lws_pods(api, namespace, name) if key_of(p) == key_of(leader)] == []
    await assert_nothing_orphaned(api, namespace, name)
    await delete_and_expect_nothing_left(api, namespace, name)


async def test_a_controller_crashed_mid_teardown_finishes_it(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    gc_pause: ControlPlane,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The crash comes after the leader's DELETE and before its dependents': the
    restarted controller sees the leader deleting in the foreground and deletes them."""
    api, sim, name = nodesim_api, node_simulator, "crash"
    await api.create(LEADERWORKERSETS, restarting(lws_manifest(name, namespace, size=SIZE)))
    await wait_ready(api, namespace, name, 2)
    leader, workers, sts = await old_group(api, namespace, name)
    await sim.stall_termination(namespace, name_of(workers[-1]))
    assert lws_controller.controllers is not None
    pods = lws_controller.controllers.pods._reconcile
    assert isinstance(pods, PodReconciler)
    stuck = asyncio.Event()

    async def hang(leader: JSON, *, pinned: bool) -> None:
        stuck.set()
        await asyncio.Event().wait()  # until the crash cancels it

    monkeypatch.setattr(pods.restarter.teardown, "_delete_dependents", hang)
    with gc_pause.paused(CONTROLLER_MANAGER):
        await sim.restart_container(namespace, name_of(workers[0]))
        await eventually(stuck.is_set, within=30, what="the leader deleted, the rest not yet")

        async def leader_marked_alone() -> bool:
            pod = await api.get(PODS, name_of(leader), namespace)
            set_now = await api.get(STATEFULSETS, name_of(sts), namespace)
            return marked(pod) and not marked(set_now)

        await eventually(leader_marked_alone, within=30, what="the leader alone marked")
        await lws_controller.restart(crash=True)
        await wait_torn_down_by_us(api, namespace, leader, workers, sts)
    await sim.release_termination(namespace, name_of(workers[-1]))

    await replacement_of(api, namespace, leader, ready=True)
    await wait_ready(api, namespace, name, 2)
    await assert_nothing_orphaned(api, namespace, name)
    await delete_and_expect_nothing_left(api, namespace, name)


def assert_workers_marked_while_their_leaders_terminate(line: Timeline, uids: set[str]) -> None:
    """Not a leader's grace period apart, as the collector's teardown is: it deletes a
    worker StatefulSet only once the leader that owns it is gone."""
    seen = [line.objects[u] for u in uids]
    leader_gone = {s.group: s.steps.get(GONE, float("inf")) for s in seen if s.leader}
    for worker in (s for s in seen if s.kind == "Pod" and not s.leader):
        assert worker.steps[MARKED] < leader_gone[worker.group], worker.name


@pytest.fixture
def parallel_lws_deletion(lws_controller: RunningController) -> Iterator[None]:
    """teardown.leaderWorkerSetDeletion: Parallel in the session's controller."""
    assert lws_controller.controllers is not None
    reconciler = lws_controller.controllers.leaderworkersets._reconcile
    assert isinstance(reconciler, LeaderWorkerSetReconciler)
    reconciler.teardown.enabled = True
    try:
        yield
    finally:
        reconciler.teardown.enabled = False


async def test_parallel_lws_deletion_spares_a_new_one_of_the_same_name(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    parallel_lws_deletion: None,
) -> None:
    """The old LeaderWorkerSet's leaders and workers all go at once; a new one created
    under the same name right after keeps every pod it makes."""
    api, name = nodesim_api, "again"
    await api.create(LEADERWORKERSETS, restarting(lws_manifest(name, namespace, size=SIZE)))
    await wait_ready(api, namespace, name, 2)
    old = {uid(p) for p in await lws_pods(api, namespace, name)}
    async with recording(api, namespace) as line:
        await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")
        await api.create(LEADERWORKERSETS, restarting(lws_manifest(name, namespace, size=SIZE)))
        await wait_ready(api, namespace, name, 2)

        async def old_gone() -> bool:
            return not old & {uid(p) for p in await lws_pods(api, namespace, name)}

        await eventually(old_gone, within=60, what="the old LeaderWorkerSet's pods gone")

        def new_pods_gone() -> list[str]:
            return [
                s.name
                for u, s in line.objects.items()
                if s.kind == "Pod" and u not in old and GONE in s.steps
            ]

        async def new_ones_kept() -> bool:
            return not new_pods_gone()

        await stays(new_ones_kept, seconds=2, what="no pod of the new LeaderWorkerSet deleted")
    new = [s for u, s in line.objects.items() if s.kind == "Pod" and u not in old]
    assert len(new) == 2 * SIZE and new_pods_gone() == []
    assert_workers_marked_while_their_leaders_terminate(line, old)
    await assert_nothing_orphaned(api, namespace, name)
    await delete_and_expect_nothing_left(api, namespace, name)


async def test_parallel_lws_deletion_goes_on_after_the_collectors_first_hop(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    parallel_lws_deletion: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collector deleted the leader StatefulSet before the controller's reconcile
    read it (a race the collector often wins): the workers are still marked while
    their leaders terminate, which the collector alone would not do (it waits for a
    leader to be gone before it deletes the leader's worker StatefulSet)."""
    api, name = nodesim_api, "late"
    body = restarting(lws_manifest(name, namespace, size=SIZE))
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"][
        TERMINATION_DELAY_ANNOTATION
    ] = "5"
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 2)
    pods = await lws_pods(api, namespace, name)
    assert lws_controller.controllers is not None
    reconciler = lws_controller.controllers.leaderworkersets._reconcile
    assert isinstance(reconciler, LeaderWorkerSetReconciler)
    teardown = reconciler.teardown
    after_the_controller = teardown._leader_set

    async def after_the_collector(cached: JSON, lws_uid: str) -> None:
        async def set_gone() -> bool:
            return await api.get_or_none(STATEFULSETS, name_of(cached), namespace) is None

        await eventually(set_gone, within=30, what="the collector deleted the leader set")
        await after_the_controller(cached, lws_uid)

    monkeypatch.setattr(teardown, "_leader_set", after_the_collector)
    async with recording(api, namespace) as line:
        await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")

        def workers_marked() -> bool:
            seen = [line.objects.get(uid(p)) for p in pods if not is_leader(p)]
            return all(s is not None and MARKED in s.steps for s in seen)

        await eventually(workers_marked, within=30, what="every worker marked")
    assert_workers_marked_while_their_leaders_terminate(line, {uid(p) for p in pods})

    async def nothing_left() -> bool:
        return await objects_of(api, namespace, name) == []

    await eventually(nothing_left, within=120, what=f"nothing of {name} left")
