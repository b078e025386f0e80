"""When each pod and StatefulSet of a namespace was created, marked for deletion, gone
and (pods) Ready, as a watch saw them: where a group restart's or an LWS deletion's
time goes. Times are seconds of `time.monotonic()`; `since(t0)` makes them relative."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import PODS, STATEFULSETS, Resource
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import is_ready

JSON = dict[str, Any]
CREATED, MARKED, GONE, READY = "created", "marked", "gone", "ready"


@dataclass
class Seen:
    kind: str
    name: str
    leader: bool
    group: str
    steps: dict[str, float] = field(default_factory=dict)

    def at(self, step: str) -> float | None:
        return self.steps.get(step)


@dataclass
class Timeline:
    objects: dict[str, Seen] = field(default_factory=dict)

    def observe(self, kind: str, event: str, obj: JSON, now: float) -> None:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        uid = str(meta.get("uid", ""))
        seen = self.objects.get(uid)
        if seen is None:
            seen = Seen(
                kind=kind,
                name=str(meta.get("name", "")),
                leader=labels.get(c.LABEL_WORKER_INDEX) == c.LEADER_WORKER_INDEX,
                group=str(labels.get(c.LABEL_GROUP_INDEX, "")),
            )
            self.objects[uid] = seen
        seen.steps.setdefault(CREATED, now)
        if meta.get("deletionTimestamp"):
            seen.steps.setdefault(MARKED, now)
        if kind == "Pod" and is_ready(obj):
            seen.steps.setdefault(READY, now)
        if event == "DELETED":
            seen.steps.setdefault(GONE, now)

    def of(self, kind: str, uids: set[str] | None = None) -> list[Seen]:
        return [
            s for uid, s in self.objects.items() if s.kind == kind and (uids is None or uid in uids)
        ]


async def _watch(
    api: ApiClient, resource: Resource, kind: str, ns: str, line: Timeline, listed_: asyncio.Event
) -> None:
    try:
        listed = await api.list(resource, ns)
    finally:
        listed_.set()  # a failed list is raised by `recording`, not waited for
    now = time.monotonic()
    for item in listed.get("items", []):
        line.observe(kind, "ADDED", item, now)
    version = listed["metadata"]["resourceVersion"]
    while True:
        async for event in api.watch(resource, ns, resource_version=version, timeout_seconds=600):
            obj = event.get("object") or {}
            if event.get("type") == "BOOKMARK":
                version = obj["metadata"]["resourceVersion"]
                continue
            if event.get("type") == "ERROR":
                raise RuntimeError(f"watch of {kind} failed: {obj}")
            line.observe(kind, str(event.get("type")), obj, time.monotonic())
            version = obj["metadata"]["resourceVersion"]


@contextlib.asynccontextmanager
async def recording(api: ApiClient, namespace: str) -> AsyncIterator[Timeline]:
    """Yields once both kinds are listed: what exists by then was created before."""
    line = Timeline()
    listed = [asyncio.Event(), asyncio.Event()]
    tasks = [
        asyncio.create_task(_watch(api, PODS, "Pod", namespace, line, listed[0])),
        asyncio.create_task(_watch(api, STATEFULSETS, "StatefulSet", namespace, line, listed[1])),
    ]
    try:
        await asyncio.gather(*(e.wait() for e in listed))
        await asyncio.sleep(0)  # a list that failed has ended its task by now
        for task in tasks:
            if task.done():
                task.result()
        yield line
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def spread(values: list[float]) -> str:
    """`first..last` of a list of offsets, or `-`."""
    if not values:
        return "-"
    return f"{min(values):5.2f}..{max(values):5.2f}"
