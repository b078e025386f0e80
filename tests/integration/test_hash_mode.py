"""Hash mode against the real control plane: a leader Deployment (real ReplicaSet,
real scheduler), random group keys, the group-ready readiness gate, scale down by
group health, size 1 (beside Ordinal's), rolling update by whole groups, and validation."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import DEPLOYMENTS, LEADERWORKERSETS, PODS, SERVICES
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.pods import condition_is, is_ready
from tests.toolkit.cluster import (
    env_of,
    gated_pod,
    get_lws,
    is_leader,
    key_of,
    labels,
    leaders,
    live_pods,
    name_of,
    statefulsets,
    terminating,
    wait_ready,
    workers_of,
)
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
KEY_RE = re.compile(r"^[0-9a-f]{40}$")


# --- creation -------------------------------------------------------------------------


async def test_create_groups_with_random_keys(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, hash_lws("web", namespace, replicas=3, size=3))
    lws = await wait_ready(api, namespace, "web", 3)
    assert lws["status"]["updatedReplicas"] == 3

    deployment = await api.get(DEPLOYMENTS, "web", namespace)
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner.get("controller")) == (c.KIND, "web", True)
    assert deployment["spec"]["replicas"] == 3

    group_leaders = await leaders(api, namespace, "web")
    assert len(group_leaders) == 3
    keys = [key_of(p) for p in group_leaders]
    assert len(set(keys)) == 3 and all(KEY_RE.match(k) for k in keys), keys

    sets = {name_of(s): s for s in await statefulsets(api, namespace, "web")}
    assert set(sets) == {name_of(p) for p in group_leaders}, "one worker set per leader"

    for leader in group_leaders:
        key, leader_name = key_of(leader), name_of(leader)
        assert labels(leader)[c.LABEL_GROUP_INDEX] == key
        assert leader_name.startswith("web-")
        assert leader["spec"]["hostname"] == key[:8]
        assert leader["spec"]["subdomain"] == "web"
        gates = [g["conditionType"] for g in leader["spec"].get("readinessGates") or []]
        assert gates == [c.CONDITION_GROUP_READY]
        assert condition_is(leader, c.CONDITION_GROUP_READY)
        address = f"{key[:8]}.web.{namespace}"
        assert env_of(leader)[c.ENV_LEADER_ADDRESS] == address

        sts = sets[leader_name]
        sts_owner = sts["metadata"]["ownerReferences"][0]
        assert (sts_owner["kind"], sts_owner["name"], sts_owner["uid"]) == (
            "Pod",
            leader_name,
            leader["metadata"]["uid"],
        )
        assert sts["spec"]["replicas"] == 2
        assert labels(sts)[c.LABEL_GROUP_KEY] == key

        workers = await workers_of(api, namespace, "web", key)
        assert sorted(name_of(w) for w in workers) == [f"{leader_name}-1", f"{leader_name}-2"]
        for w in workers:
            j = labels(w)[c.LABEL_WORKER_INDEX]
            assert w["spec"]["hostname"] == f"{key[:8]}-{j}"
            assert w["spec"]["subdomain"] == "web"
            assert env_of(w)[c.ENV_LEADER_ADDRESS] == address
            assert env_of(w)[c.ENV_WORKER_INDEX] == j
            assert labels(w)[c.LABEL_GROUP_INDEX] == key

    service = await api.get(SERVICES, "web", namespace)
    assert service["spec"]["publishNotReadyAddresses"] is True


async def test_leader_ready_only_with_its_workers(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, hash_lws("gate", namespace, replicas=1, size=3))
    await wait_ready(api, namespace, "gate", 1)
    (leader,) = await leaders(api, namespace, "gate")
    leader_name = name_of(leader)
    worker = sorted(name_of(w) for w in await workers_of(api, namespace, "gate", key_of(leader)))[0]

    await node_simulator.set_container_ready(namespace, worker, False)

    async def held() -> JSON | None:
        pod = await api.get(PODS, leader_name, namespace)
        gate_false = condition_is(pod, c.CONDITION_GROUP_READY, "False")
        return pod if gate_false and not is_ready(pod) else None

    pod = await eventually(held, within=60, what="leader not ready while a worker is not")
    # Its own containers are fine: only the group gate holds it back.
    assert condition_is(pod, "ContainersReady")
    assert condition_is(pod, "Ready", "False")

    async def lws_not_ready() -> JSON | None:
        lws = await get_lws(api, namespace, "gate")
        return lws if (lws.get("status") or {}).get("readyReplicas", 0) == 0 else None

    lws = await eventually(lws_not_ready, within=60, what="status counts the group not ready")
    assert lws["status"]["replicas"] == 1

    await node_simulator.set_container_ready(namespace, worker, True)

    async def ready_again() -> JSON | None:
        pod = await api.get(PODS, leader_name, namespace)
        return pod if condition_is(pod, c.CONDITION_GROUP_READY) and is_ready(pod) else None

    await eventually(ready_again, within=60, what="leader ready once its workers are")
    await wait_ready(api, namespace, "gate", 1)
    # The same group: readiness never replaced it.
    assert [name_of(p) for p in await leaders(api, namespace, "gate")] == [leader_name]


def assert_hash_solo_leaders(pods: list[JSON], namespace: str) -> None:
    for pod in pods:
        assert not pod["spec"].get("readinessGates")
        assert condition_is(pod, c.CONDITION_GROUP_READY) is False
        assert KEY_RE.match(key_of(pod))
        assert env_of(pod)[c.ENV_LEADER_ADDRESS] == f"{key_of(pod)[:8]}.solo.{namespace}"


@pytest.mark.parametrize("mode", [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH])
async def test_size_one_has_no_workers(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, mode: str
) -> None:
    """Groups of one are leaders alone: no worker StatefulSets (Ordinal keeps its leader
    StatefulSet), and in Hash mode no gate waits for workers."""
    api = nodesim_api
    hashed = mode == c.GROUP_IDENTITY_HASH
    body = (hash_lws if hashed else lws_manifest)("solo", namespace, replicas=2, size=1)
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "solo", 2)
    pods = await live_pods(api, namespace, "solo")
    sets = [name_of(s) for s in await statefulsets(api, namespace, "solo")]
    if hashed:
        assert len(pods) == 2 and all(is_leader(p) for p in pods)
        assert_hash_solo_leaders(pods, namespace)
        assert sets == []
    else:
        assert sets == ["solo"]
        assert sorted(name_of(p) for p in pods) == ["solo-0", "solo-1"]


# --- scale down by group health ----------------------------------------------------------


async def scale(api: ApiClient, namespace: str, name: str, replicas: int) -> None:
    await api.patch(LEADERWORKERSETS, name, {"spec": {"replicas": replicas}}, namespace=namespace)


async def break_one_group(
    api: ApiClient, sim: NodeSimulator, namespace: str, name: str, leader: JSON
) -> str:
    """Make a worker of `leader`'s group not ready; the worker's name."""
    worker = sorted(name_of(w) for w in await workers_of(api, namespace, name, key_of(leader)))[0]
    await sim.set_container_ready(namespace, worker, False)
    return worker


async def test_scale_down_removes_the_unhealthy_group(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, hash_lws("shed", namespace, replicas=3, size=2))
    await wait_ready(api, namespace, "shed", 3)
    before = {key_of(p): p for p in await leaders(api, namespace, "shed")}
    # The group made unhealthy is neither the newest nor the oldest.
    ordered = sorted(before.values(), key=lambda p: p["metadata"]["creationTimestamp"])
    sick = ordered[1]
    await break_one_group(api, node_simulator, namespace, "shed", sick)

    async def sick_not_ready() -> bool:
        pod = await api.get(PODS, name_of(sick), namespace)
        return not is_ready(pod)

    await eventually(sick_not_ready, within=60, what="the sick group's leader not ready")
    await scale(api, namespace, "shed", 2)

    healthy = set(before) - {key_of(sick)}

    async def shed() -> set[str] | None:
        keys = {key_of(p) for p in await leaders(api, namespace, "shed")}
        return keys if keys == healthy else None

    await eventually(shed, within=60, what="only the healthy groups left")
    await wait_ready(api, namespace, "shed", 2)

    async def workers_gone() -> bool:
        return await workers_of(api, namespace, "shed", key_of(sick)) == []

    await eventually(workers_gone, within=60, what="the sick group's workers removed")
    assert {key_of(p) for p in await leaders(api, namespace, "shed")} == healthy


async def test_ordinal_scale_down_removes_the_highest_ordinal(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """The contrast Hash mode exists for: Ordinal mode removes group 2 and keeps the sick 1."""
    api = nodesim_api
    await api.create(LEADERWORKERSETS, lws_manifest("ord", namespace, replicas=3, size=2))
    await wait_ready(api, namespace, "ord", 3)
    await node_simulator.set_container_ready(namespace, "ord-1-1", False)

    async def sick() -> bool:
        lws = await get_lws(api, namespace, "ord")
        return (lws.get("status") or {}).get("readyReplicas") == 2

    await eventually(sick, within=60, what="group 1 counted not ready")
    await scale(api, namespace, "ord", 2)

    async def scaled() -> set[str] | None:
        names = {name_of(p) for p in await live_pods(api, namespace, "ord")}
        return names if names == {"ord-0", "ord-0-1", "ord-1", "ord-1-1"} else None

    await eventually(scaled, within=60, what="ord-2 removed, the sick ord-1 kept")

    async def counted() -> bool:
        # The status follows a burst of pod events within a second (paced passes).
        lws = await get_lws(api, namespace, "ord")
        return (lws.get("status") or {}).get("readyReplicas") == 1

    await eventually(counted, within=30, what="one ready group counted")


# --- rolling update ------------------------------------------------------------------------


class PodLog:
    """Every pod of one LWS, kept current from a watch, with what a rollout must never do
    checked on every event: too many groups, a worker of another revision than its
    leader."""

    def __init__(self, api: ApiClient, namespace: str, name: str) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.pods: dict[str, JSON] = {}
        self.leader_revision: dict[str, str] = {}  # group key -> revision of its leader
        self.max_groups = 0  # admitted groups with any pod, terminating or not
        self.max_live_leaders = 0  # leaders not terminating
        self.mixed: list[str] = []
        self.events = 0
        self.trace: list[tuple[Any, ...]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PodLog:
        answer = await self.api.list(
            PODS, self.namespace, label_selector=f"{c.LABEL_SET_NAME}={self.name}"
        )
        for pod in answer.get("items") or []:
            self._seen("ADDED", pod)
        version = answer["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._watch(version))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self, version: str) -> None:
        async for event in self.api.watch(
            PODS,
            self.namespace,
            resource_version=version,
            label_selector=f"{c.LABEL_SET_NAME}={self.name}",
            bookmarks=False,
        ):
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self._seen(str(event["type"]), event["object"])

    def _seen(self, kind: str, pod: JSON) -> None:
        self.events += 1
        name = name_of(pod)
        self.trace.append(
            (
                kind,
                name,
                bool(pod["metadata"].get("deletionTimestamp")),
                bool(pod["spec"].get("schedulingGates")),
                (pod.get("spec") or {}).get("nodeName"),
            )
        )
        if kind == "DELETED":
            self.pods.pop(name, None)
        else:
            self.pods[name] = pod
        revision = labels(pod).get(c.LABEL_TEMPLATE_REVISION_HASH, "")
        if is_leader(pod):
            self.leader_revision.setdefault(key_of(pod), revision)
        elif kind != "DELETED":
            leader_rev = self.leader_revision.get(key_of(pod))
            if leader_rev is not None and leader_rev != revision:
                self.mixed.append(f"{name}: {revision} in a group of {leader_rev}")
        # Groups that hold (or are about to take) capacity: a gated leader holds none.
        gated = {key_of(p) for p in self.pods.values() if is_leader(p) and gated_pod(p)}
        keys = {key_of(p) for p in self.pods.values()} - gated
        live = [p for p in self.pods.values() if is_leader(p) and not terminating(p)]
        self.max_groups = max(self.max_groups, len(keys))
        self.max_live_leaders = max(self.max_live_leaders, len(live))


async def test_rolling_update_moves_whole_groups(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    rollout = {"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}
    body = hash_lws("roll", namespace, replicas=3, size=3, rolloutStrategy=rollout)
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "roll", 3)
    old_keys = {key_of(p) for p in await leaders(api, namespace, "roll")}
    old_revision = labels(await api.get(DEPLOYMENTS, "roll", namespace))[
        c.LABEL_TEMPLATE_REVISION_HASH
    ]

    async with PodLog(api, namespace, "roll") as log:
        env = [{"name": "ROLLOUT", "value": "2"}]
        patch = {
            "spec": {
                "leaderWorkerTemplate": {
                    "workerTemplate": {
                        "spec": {
                            "containers": [
                                {"name": "main", "image": "registry.k8s.io/pause:3.10", "env": env}
                            ]
                        }
                    }
                }
            }
        }
        await api.patch(LEADERWORKERSETS, "roll", patch, namespace=namespace)

        async def rolled() -> list[JSON] | None:
            deployment = await api.get(DEPLOYMENTS, "roll", namespace)
            revision = labels(deployment)[c.LABEL_TEMPLATE_REVISION_HASH]
            if revision == old_revision:
                return None
            lws = await get_lws(api, namespace, "roll")
            status = lws.get("status") or {}
            pods = await lws_pods_all(api, namespace, "roll")
            done = (
                status.get("updatedReplicas") == 3
                and status.get("readyReplicas") == 3
                and status.get("replicas") == 3
                and len(pods) == 9
                and all(labels(p)[c.LABEL_TEMPLATE_REVISION_HASH] == revision for p in pods)
            )
            return pods if done else None

        pods = await eventually(rolled, within=180, what="every group on the new revision")

    assert log.events > 0
    assert log.mixed == [], log.mixed
    assert log.max_live_leaders <= 4, log.max_live_leaders
    # PostTermination holds a new leader until the group it replaces is gone, so even
    # counting groups still tearing down, never more than replicas + maxSurge groups
    # hold capacity (a gated leader holds none).
    assert log.max_groups <= 4, "\n".join(map(str, log.trace))
    new_keys = {key_of(p) for p in pods if is_leader(p)}
    assert len(new_keys) == 3 and not new_keys & old_keys
    for p in pods:
        if not is_leader(p):
            assert env_of(p)["ROLLOUT"] == "2"


async def lws_pods_all(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    answer = await api.list(PODS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return list(answer.get("items") or [])


# --- validation through the API server --------------------------------------------------


def causes(exc: ApiError) -> list[str]:
    return [str(x.get("field")) for x in (exc.body.get("details") or {}).get("causes") or []]


async def rejected(api: ApiClient, call: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        await call
    assert info.value.status == 422, info.value
    return info.value


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {
                "groupIdentity": "Hash",
                "leaderWorkerTemplate": {
                    "size": 2,
                    "workerTemplate": {"spec": {"containers": [{"name": "m", "image": "pause"}]}},
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ],
                },
            },
            "spec.leaderWorkerTemplate.volumeClaimTemplates",
        ),
        (
            {
                "groupIdentity": "Hash",
                "rolloutStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdateConfiguration": {"partition": 1},
                },
            },
            "spec.rolloutStrategy.rollingUpdateConfiguration.partition",
        ),
        ({"groupReplacementPolicy": "Immediate"}, "spec.groupReplacementPolicy"),
        (
            {"groupIdentity": "Ordinal", "groupReplacementPolicy": "Immediate"},
            "spec.groupReplacementPolicy",
        ),
    ],
    ids=["hash-claims", "hash-partition", "default-immediate", "ordinal-immediate"],
)
async def test_rejected_on_create(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    spec: JSON,
    field: str,
) -> None:
    body = lws_manifest("bad", namespace, replicas=2, size=2)
    template = spec.pop("leaderWorkerTemplate", None)
    if template is not None:
        body["spec"]["leaderWorkerTemplate"] = template
    body["spec"].update(spec)
    error = await rejected(nodesim_api, nodesim_api.create(LEADERWORKERSETS, body))
    assert field in causes(error), (causes(error), error.message)
    assert field in error.message


async def test_group_identity_is_immutable(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, hash_lws("fixed", namespace, replicas=0))
    await api.create(LEADERWORKERSETS, lws_manifest("plain", namespace, replicas=0))
    for name, value in (("fixed", "Ordinal"), ("plain", "Hash")):
        change: JSON = {"spec": {"groupIdentity": value}}
        error = await rejected(api, api.patch(LEADERWORKERSETS, name, change, namespace=namespace))
        assert "spec.groupIdentity" in causes(error), (causes(error), error.message)
    # A partition is refused on update as well.
    patch: JSON = {
        "spec": {
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"partition": 1},
            }
        }
    }
    error = await rejected(api, api.patch(LEADERWORKERSETS, "fixed", patch, namespace=namespace))
    assert "spec.rolloutStrategy.rollingUpdateConfiguration.partition" in causes(error)
    # Immediate is allowed on a Hash LWS and may be switched either way.
    await api.patch(
        LEADERWORKERSETS,
        "fixed",
        {"spec": {"groupReplacementPolicy": "Immediate"}},
        namespace=namespace,
    )
    error = await rejected(
        api,
        api.patch(
            LEADERWORKERSETS,
            "plain",
            {"spec": {"groupReplacementPolicy": "Immediate"}},
            namespace=namespace,
        ),
    )
    assert "spec.groupReplacementPolicy" in causes(error)
