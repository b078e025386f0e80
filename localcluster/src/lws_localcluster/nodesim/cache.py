"""The simulator's view of the pods bound to its nodes, fed by the pod watch, and the
runtime state it keeps for each of them (keyed by UID: a recreated pod starts afresh)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from leaderworkerset.api.objects import meta_of
from lws_localcluster.nodesim.api import JsonObj, resource_version_newer
from lws_localcluster.nodesim.pods import PodRuntime

PodKey = tuple[str, str]


def key_of(pod: JsonObj) -> PodKey:
    meta = meta_of(pod)
    return meta["namespace"], meta["name"]


def node_of(pod: JsonObj) -> str | None:
    node: str | None = (pod.get("spec") or {}).get("nodeName")
    return node


class PodCache:
    def __init__(
        self,
        *,
        is_our_node: Callable[[str | None], bool],
        new_runtime: Callable[[JsonObj], PodRuntime],
        changed: Callable[[PodKey], None],
        forgotten: Callable[[PodKey, PodRuntime | None], None],
    ) -> None:
        self._is_our_node = is_our_node
        self._new_runtime = new_runtime
        self._changed = changed
        self._forgotten = forgotten
        self.pods: dict[PodKey, JsonObj] = {}
        self.runtimes: dict[str, PodRuntime] = {}
        self._waiters: dict[PodKey, list[asyncio.Future[None]]] = {}

    def runtime(self, key: PodKey) -> PodRuntime | None:
        pod = self.pods.get(key)
        return self.runtimes.get(meta_of(pod).get("uid", "")) if pod else None

    def keys_on_node(self, node: str) -> list[PodKey]:
        return [key for key, pod in self.pods.items() if node_of(pod) == node]

    def on_event(self, kind: str, pod: JsonObj) -> None:
        if not self._is_our_node(node_of(pod)):
            return
        if kind == "DELETED":
            self.forget(key_of(pod), meta_of(pod).get("uid"))
        else:
            self.remember(pod)

    def on_relist(self, pods: list[JsonObj]) -> None:
        seen: set[PodKey] = set()
        for pod in pods:
            if self._is_our_node(node_of(pod)):
                seen.add(key_of(pod))
                self.remember(pod)
        # Deleted while the watch was down: no DELETED event will ever come for these.
        for key in [k for k in self.pods if k not in seen]:
            self.forget(key, meta_of(self.pods[key]).get("uid"))

    def remember(self, pod: JsonObj) -> None:
        key, meta = key_of(pod), meta_of(pod)
        cached = self.pods.get(key)
        if cached is not None:
            cached_meta = meta_of(cached)
            if cached_meta.get("uid") != meta.get("uid"):
                self.forget(key, cached_meta.get("uid"))
            elif not resource_version_newer(
                meta.get("resourceVersion"), cached_meta.get("resourceVersion")
            ):
                # The echo of a write whose answer is already cached: nothing new.
                return
        self.pods[key] = pod
        if meta["uid"] not in self.runtimes:
            self.runtimes[meta["uid"]] = self._new_runtime(pod)
        self._changed(key)
        for waiter in self._waiters.pop(key, []):
            if not waiter.done():
                waiter.set_result(None)

    def remember_written(self, pod: JsonObj) -> None:
        """Cache the answer to our own write, so a sync that runs before the write's
        watch event arrives does not see stale status and write again."""
        cached = self.pods.get(key_of(pod))
        if (
            cached is not None
            and meta_of(cached).get("uid") == meta_of(pod).get("uid")
            and resource_version_newer(
                meta_of(pod).get("resourceVersion"), meta_of(cached).get("resourceVersion")
            )
        ):
            self.pods[key_of(pod)] = pod

    def forget(self, key: PodKey, uid: str | None) -> None:
        cached = self.pods.get(key)
        if cached is not None and meta_of(cached).get("uid") == uid:
            del self.pods[key]
        self._forgotten(key, self.runtimes.pop(uid, None) if uid else None)

    async def wait_for(self, key: PodKey) -> None:
        """Until the pod is cached (callers bound the wait)."""
        if key in self.pods:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(waiter)
        try:
            await waiter
        finally:
            waiters = self._waiters.get(key)
            if waiters and waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(key, None)
