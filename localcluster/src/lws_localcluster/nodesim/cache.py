"""The simulator's view of the pods bound to its nodes, and the runtime state it keeps for
each of them (keyed by UID: a recreated pod starts afresh).

The controller runtime's :class:`Informer` lists and watches every bound pod
(:func:`pod_informer`): it resumes a broken watch, relists after a 410 and hands over
what changed in the gap (deletes included), and indexes pods by node. :class:`PodCache`
takes its events and keeps what a kubelet needs that an informer has no place for:

- only the pods on this simulator's nodes, from when a node became its own until the pod
  or the node goes;
- the answer to each of the simulator's own status writes, ahead of the watch: a sync
  that runs before the write's event arrives must not see the old status and write
  again, and the event itself, when it comes, is an echo that queues no sync (nor does
  any event older than what is cached);
- a :class:`PodRuntime` per pod UID (its IP, containers, injected faults), made on first
  sight and dropped when the pod goes;
- waiters for a pod to appear: a fault may name a pod whose event has not arrived yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from leaderworkerset.api.objects import meta_of
from leaderworkerset.api.resources import PODS
from leaderworkerset.runtime.cache import Backoff, Informer, ListerWatcher
from leaderworkerset.runtime.indexes import object_key
from lws_localcluster.nodesim.api import JsonObj, resource_version_newer
from lws_localcluster.nodesim.pods import PodRuntime

# ``namespace/name``, the informer's and the work queue's key.
PodKey = str

# Unscheduled pods are of no interest to a kubelet; the API server filters them out.
BOUND_PODS = "spec.nodeName!="
NODE_INDEX = "nodeName"
# The watch is retried after 0.5 s, doubling up to 30 s; the informer resets that
# after any watch that brought events (see runtime.cache.watch_was_healthy).
WATCH_BACKOFF_INITIAL = 0.5
MAX_BACKOFF = 30.0
# Watches last 240..480 s, jittered so several simulators do not reconnect in lockstep.
MIN_WATCH_TIMEOUT = 240


def key_of(pod: JsonObj) -> PodKey:
    return object_key(pod)


def node_of(pod: JsonObj) -> str | None:
    node: str | None = (pod.get("spec") or {}).get("nodeName")
    return node


def _by_node(pod: JsonObj) -> list[str]:
    node = node_of(pod)
    return [node] if node else []


def pod_informer(api: ListerWatcher) -> Informer:
    """The simulator's LIST + WATCH of bound pods across all namespaces."""
    return Informer(
        api,
        PODS,
        field_selector=BOUND_PODS,
        indexers={NODE_INDEX: _by_node},
        min_watch_timeout=MIN_WATCH_TIMEOUT,
        backoff=Backoff(initial=WATCH_BACKOFF_INITIAL, cap=MAX_BACKOFF),
    )


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

    def attach(self, informer: Informer) -> None:
        """Follow ``informer``'s pods from now on (and those it already holds)."""
        informer.add_handler(self.on_add, self.on_update, self.on_delete)

    def runtime(self, key: PodKey) -> PodRuntime | None:
        pod = self.pods.get(key)
        return self.runtimes.get(meta_of(pod).get("uid", "")) if pod else None

    def keys_on_node(self, node: str) -> list[PodKey]:
        return [key for key, pod in self.pods.items() if node_of(pod) == node]

    # -- the informer's handlers -------------------------------------------------------

    def on_add(self, pod: JsonObj) -> None:
        if self._is_our_node(node_of(pod)):
            self.remember(pod)

    def on_update(self, old: JsonObj, pod: JsonObj) -> None:
        self.on_add(pod)

    def on_delete(self, pod: JsonObj) -> None:
        # Also a DeletedFinalStateUnknown: a pod a relist found gone, or replaced by a
        # newer one of the same name.
        if self._is_our_node(node_of(pod)):
            self.forget(key_of(pod), meta_of(pod).get("uid"))

    # -- the store ---------------------------------------------------------------------

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
