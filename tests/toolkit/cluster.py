"""Reading a LeaderWorkerSet's objects back from a cluster in integration tests: its pods
(leaders, groups, the replacement gate), its StatefulSets and revisions, its status."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    EVENTS,
    LEADERWORKERSETS,
    NODES,
    PODS,
    STATEFULSETS,
)
from leaderworkerset.group.options import ReleaseThresholds
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import condition as pod_condition
from tests.fixtures.pods import is_ready
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]


def labels(obj: JSON) -> dict[str, str]:
    result: dict[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return result


def name_of(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


async def lws_pods(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    answer = await api.list(PODS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return list(answer.get("items", []))


async def live_pods(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    return [
        p
        for p in await lws_pods(api, namespace, name)
        if not (p.get("metadata") or {}).get("deletionTimestamp")
    ]


async def statefulsets(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    answer = await api.list(STATEFULSETS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return list(answer.get("items", []))


async def get_lws(api: ApiClient, namespace: str, name: str) -> JSON:
    return await api.get(LEADERWORKERSETS, name, namespace)


def condition(lws: JSON, condition_type: str) -> str | None:
    for cond in (lws.get("status") or {}).get("conditions") or []:
        if cond.get("type") == condition_type:
            return str(cond.get("status"))
    return None


async def wait_ready(
    api: ApiClient, namespace: str, name: str, replicas: int, within: float = 120.0
) -> JSON:
    """Until status says `replicas` ready groups and Available is True."""

    async def probe() -> JSON | None:
        lws = await get_lws(api, namespace, name)
        status = lws.get("status") or {}
        if (
            status.get("readyReplicas") == replicas
            and status.get("replicas") == replicas
            and condition(lws, c.CONDITION_AVAILABLE) == "True"
        ):
            return lws
        return None

    return await eventually(probe, within=within, what=f"{name} {replicas} groups ready")


def env_of(pod: JSON, container: int = 0) -> dict[str, str]:
    env = pod["spec"]["containers"][container].get("env") or []
    return {e["name"]: e.get("value", "") for e in env}


def is_leader(pod: JSON) -> bool:
    return labels(pod).get(c.LABEL_WORKER_INDEX) == c.LEADER_WORKER_INDEX


def key_of(pod: JSON) -> str:
    return labels(pod)[c.LABEL_GROUP_KEY]


async def leaders(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    return [p for p in await live_pods(api, namespace, name) if is_leader(p)]


async def workers_of(api: ApiClient, namespace: str, name: str, key: str) -> list[JSON]:
    return [
        p for p in await live_pods(api, namespace, name) if not is_leader(p) and key_of(p) == key
    ]


def gated_pod(pod: JSON) -> bool:
    gates = pod["spec"].get("schedulingGates") or []
    return any(g.get("name") == c.SCHEDULING_GATE_GROUP_REPLACEMENT for g in gates)


def terminating(pod: JSON) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


async def group_members(api: ApiClient, namespace: str, name: str, leader: JSON) -> list[JSON]:
    """The leader followed by its live workers, in worker-index order."""
    workers = await workers_of(api, namespace, name, key_of(leader))
    workers.sort(key=lambda p: int(labels(p)[c.LABEL_WORKER_INDEX]))
    return [leader, *workers]


async def group_pods(api: ApiClient, namespace: str, name: str, key: str) -> list[JSON]:
    """Every pod of one group, terminating ones included."""
    return [p for p in await lws_pods(api, namespace, name) if key_of(p) == key]


async def replacement_of(
    api: ApiClient, namespace: str, pod: JSON, *, ready: bool = False, within: float = 60.0
) -> JSON:
    """The pod of `pod`'s name with another UID (an Ordinal leader recreated), once it is
    Ready when `ready` asks for that."""
    meta = pod["metadata"]

    async def probe() -> JSON | None:
        found = await api.get_or_none(PODS, meta["name"], namespace)
        if found is None or found["metadata"]["uid"] == meta["uid"]:
            return None
        return found if not ready or is_ready(found) else None

    found: JSON = await eventually(probe, within=within, what=f"{meta['name']} recreated")
    return found


async def new_leader(api: ApiClient, namespace: str, name: str, old: set[str]) -> JSON:
    """The one live leader whose key is not in `old`."""

    async def probe() -> JSON | None:
        fresh = [p for p in await leaders(api, namespace, name) if key_of(p) not in old]
        return fresh[0] if len(fresh) == 1 else None

    return await eventually(probe, within=60, what="a replacement leader")


def scheduling_gated(pod: JSON) -> bool:
    """Still behind our gate and reported by the scheduler as SchedulingGated."""
    scheduled = pod_condition(pod, "PodScheduled")
    return (
        gated_pod(pod)
        and not pod["spec"].get("nodeName")
        and scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "SchedulingGated"
    )


async def release_all(sim: NodeSimulator, pods: list[JSON]) -> None:
    for pod in pods:
        await sim.release_termination(pod["metadata"]["namespace"], name_of(pod))


def env_names(pod: JSON) -> set[str]:
    return {
        e["name"] for container in pod["spec"]["containers"] for e in container.get("env") or []
    }


async def assert_pods_mutated(api: ApiClient, namespace: str, name: str, count: int) -> None:
    pods = await eventually(
        lambda: _pods_if(api, namespace, name, count), within=60, what=f"{count} pods of {name}"
    )
    for pod in pods:
        missing = set(c.LWS_ENV_NAMES) - env_names(pod)
        assert not missing, f"pod {pod['metadata']['name']} lacks {missing}: webhook not run?"


async def _pods_if(api: ApiClient, namespace: str, name: str, count: int) -> list[JSON] | None:
    pods = await live_pods(api, namespace, name)
    return pods if len(pods) == count else None


async def revisions(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    """The LWS's own ControllerRevisions. The StatefulSet controller makes revisions of
    its own that copy the StatefulSet's labels (so match the selector): those are
    controlled by a StatefulSet and left out."""
    answer = await api.list(
        CONTROLLER_REVISIONS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}"
    )
    return [
        r
        for r in answer.get("items", [])
        if any(
            o.get("controller") and o.get("kind") == c.KIND
            for o in (r.get("metadata") or {}).get("ownerReferences") or []
        )
    ]


async def node_labels_of(api: ApiClient, pod: JSON) -> dict[str, str]:
    node = await api.get(NODES, pod["spec"]["nodeName"])
    return labels(node)


async def lws_event_notes(api: ApiClient, namespace: str, name: str, reason: str) -> list[str]:
    """The notes of the Events with `reason` about LeaderWorkerSet `name`."""
    answer = await api.list(EVENTS, namespace)
    return [
        str(e.get("note", ""))
        for e in answer.get("items", [])
        if (e.get("regarding") or {}).get("kind") == "LeaderWorkerSet"
        and (e.get("regarding") or {}).get("name") == name
        and e.get("reason") == reason
    ]


async def still_gated(api: ApiClient, namespace: str, pod: str) -> bool:
    return gated_pod(await api.get(PODS, pod, namespace))


@contextlib.contextmanager
def replacement_bounds(running: RunningController, bounds: ReleaseThresholds) -> Iterator[None]:
    """The session controller with these `groupReplacement` bounds for the block, as a
    manager Configuration would set them; the reconcilers read the options at each use."""
    assert running.controllers is not None
    options = running.controllers.options
    saved = options.replacement_release
    options.replacement_release = bounds
    try:
        yield
    finally:
        options.replacement_release = saved
