"""DisaggregatedSet manifests and waits for the integration tests: a set's roles, its
LeaderWorkerSets and Services as the controller names them, and "settled" (one
LeaderWorkerSet per role at the current revision, all groups ready, Services made)."""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.resources import DISAGGREGATEDSETS, LEADERWORKERSETS, SERVICES
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.waiting import eventually

WORKER = {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
SURGE_ONE = {"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}


def role(
    name: str, replicas: int, *, size: int = 1, spec: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """A role of `replicas` groups of `size` pause pods; `spec` adds LeaderWorkerSet spec
    members (groupIdentity, ...), `extra` role members (scaling, metadata)."""
    return {
        "name": name,
        **extra,
        "spec": {
            "replicas": replicas,
            "rolloutStrategy": copy.deepcopy(SURGE_ONE),
            "leaderWorkerTemplate": {"size": size, "workerTemplate": copy.deepcopy(WORKER)},
            **(spec or {}),
        },
    }


def manifest(name: str, namespace: str, *roles: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"roles": list(roles), **spec},
    }


async def set_lwss(api: ApiClient, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = await api.list(LEADERWORKERSETS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return {x["metadata"]["name"]: x for x in found["items"]}


async def set_services(api: ApiClient, namespace: str, name: str) -> set[str]:
    found = await api.list(SERVICES, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return {x["metadata"]["name"] for x in found["items"]}


async def revision_of(api: ApiClient, namespace: str, name: str) -> str:
    stored = await api.get(DISAGGREGATEDSETS, name, namespace)
    ds, errors = DisaggregatedSet.from_json(stored)
    assert not errors
    return compute_revision(ds.roles)


async def settled(
    api: ApiClient, namespace: str, name: str, replicas: dict[str, int], within: float = 120
) -> dict[str, dict[str, Any]]:
    """Wait until the set has exactly one LeaderWorkerSet per role, at the current
    revision, with these replicas all ready, and its Services; return them."""
    revision = await revision_of(api, namespace, name)
    wanted = {f"{name}-0-{revision}-{role}": n for role, n in replicas.items()}

    async def probe() -> dict[str, dict[str, Any]] | None:
        lwss = await set_lwss(api, namespace, name)
        if set(lwss) != set(wanted):
            return None
        for lws_name, n in wanted.items():
            status = lwss[lws_name].get("status") or {}
            if lwss[lws_name]["spec"]["replicas"] != n or status.get("readyReplicas", 0) != n:
                return None
        if await set_services(api, namespace, name) != {f"{x}-prv" for x in wanted}:
            return None
        return lwss

    return await eventually(probe, within=within, what=f"{name} settled at {replicas}")
