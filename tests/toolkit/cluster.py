"""Building, creating and watching LeaderWorkerSets in integration tests."""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.runtime.client import LEADERWORKERSETS, PODS, STATEFULSETS, ApiClient
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"


def lws_manifest(
    name: str,
    namespace: str,
    *,
    replicas: int = 2,
    size: int = 2,
    cpu: str = "10m",
    **spec: Any,
) -> JSON:
    template = {
        "spec": {
            "containers": [
                {"name": "main", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}
            ],
            "terminationGracePeriodSeconds": 5,
        }
    }
    body: JSON = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": size, "workerTemplate": copy.deepcopy(template)},
        },
    }
    body["spec"].update(spec)
    return body


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
