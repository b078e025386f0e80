"""Helpers for tests that drive pods through the node simulator."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from leaderworkerset.localcluster.nodesim.api import JsonObj
from leaderworkerset.runtime.client import PODS, ApiClient

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    within: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns something truthy and return that; fail with the
    last value seen once ``timeout`` has passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)


def pod_manifest(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    containers: int = 1,
    requests: Mapping[str, str] | None = None,
    **spec: Any,
) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "containers": [
                {
                    "name": f"c{i}",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": dict(requests)} if requests else {},
                }
                for i in range(containers)
            ],
            **spec,
        },
    }


def condition(obj: JsonObj | None, kind: str) -> JsonObj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def condition_is(obj: JsonObj | None, kind: str, status: str = "True") -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == status


def is_ready(pod: JsonObj | None) -> bool:
    """Running with condition Ready True."""
    phase = ((pod or {}).get("status") or {}).get("phase")
    return phase == "Running" and condition_is(pod, "Ready")


async def get_pod(api: ApiClient, namespace: str, name: str) -> JsonObj | None:
    return await api.get_or_none(PODS, name, namespace)


async def wait_pod(
    api: ApiClient,
    namespace: str,
    name: str,
    predicate: Callable[[JsonObj], bool],
    *,
    within: float = 30.0,
    what: str = "",
) -> JsonObj:
    async def probe() -> JsonObj | None:
        pod = await get_pod(api, namespace, name)
        return pod if pod is not None and predicate(pod) else None

    return await eventually(probe, within=within, what=what or f"pod {namespace}/{name}")


async def wait_pod_gone(api: ApiClient, namespace: str, name: str, *, within: float = 30.0) -> None:
    async def gone() -> bool:
        return await get_pod(api, namespace, name) is None

    await eventually(gone, within=within, what=f"pod {namespace}/{name} to be deleted")


class PodEventRecorder:
    """Records every watch event of one pod, to assert on states too brief to poll."""

    def __init__(self, api: ApiClient, namespace: str, name: str) -> None:
        self.events: list[tuple[str, JsonObj]] = []
        self._api = api
        self._namespace = namespace
        self._name = name
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PodEventRecorder:
        pod = await get_pod(self._api, self._namespace, self._name)
        version = pod["metadata"]["resourceVersion"] if pod else None
        self._task = asyncio.create_task(self._record(version))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _record(self, version: str | None) -> None:
        async for event in self._api.watch(
            PODS,
            self._namespace,
            resource_version=version,
            field_selector=f"metadata.name={self._name}",
            bookmarks=False,
        ):
            self.events.append((str(event.get("type")), event.get("object") or {}))

    def phases(self) -> list[str]:
        return [str((obj.get("status") or {}).get("phase")) for _, obj in self.events]
