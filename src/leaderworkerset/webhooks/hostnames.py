"""The Hash-mode hostnames a LeaderWorkerSet's live groups hold, so that the pod
webhook never gives a new leader one of them.

A hostname is the first characters of a group key: two live groups sharing one
would make `<hostname>.<lws>.<ns>` resolve to both leaders (workers could join
the wrong group) and, under UniquePerReplica, would give both the same Service
name. A group holds its hostname while any of its pods can still run, a
terminating one included: its name is still published until the pod is gone.

Each check is a lookup: a Hash leader is admitted once per group, and scanning
the LeaderWorkerSet's pods each time made a scale-up quadratic in its groups.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, labels_of, meta_of
from leaderworkerset.caches import LwsCaches
from leaderworkerset.group import names as naming
from leaderworkerset.group.readiness import pod_finished
from leaderworkerset.group.roles import group_key
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.controller import add_replica_handler

# Long enough for any pod cache to show a leader admitted now, short enough that the
# memory of a burst of admissions stays small.
ISSUED_MEMORY = 60.0

Owner = tuple[str, str]  # (namespace, LeaderWorkerSet name)


def hostnames_in_use(pods: Iterable[JSON]) -> set[str]:
    """The hostnames of the groups `pods` (one LWS's pods) belong to, finished pods
    (whose containers never run again) aside."""
    in_use: set[str] = set()
    for pod in pods:
        hostname = _hostname_held(pod)
        if hostname is not None:
            in_use.add(hostname)
    return in_use


def _hostname_held(pod: JSON) -> str | None:
    key = group_key(pod)
    if key and not pod_finished(pod):
        return naming.hash_hostname(key)
    return None


@dataclass
class _Held:
    """One LeaderWorkerSet's live hostnames, with how many pods hold each."""

    by_pod: dict[str, str] = field(default_factory=dict)  # pod name -> hostname
    pods: dict[str, int] = field(default_factory=dict)  # hostname -> pods holding it

    def set(self, name: str, hostname: str | None) -> None:
        old = self.by_pod.get(name)
        if old == hostname:
            return
        if old is not None:
            left = self.pods[old] - 1
            if left:
                self.pods[old] = left
            else:
                del self.pods[old]
        if hostname is None:
            del self.by_pod[name]
        else:
            # One string per group, not per pod: a group's pods all hold its hostname.
            hostname = sys.intern(hostname)
            self.by_pod[name] = hostname
            self.pods[hostname] = self.pods.get(hostname, 0) + 1


class LiveHostnames:
    """The hostnames held by the pods in the pod cache, kept per LeaderWorkerSet
    from the cache's events.

    A LeaderWorkerSet is followed from the first question about it (one pass over
    its cached pods), so Ordinal ones, never asked about, cost a dictionary lookup
    per pod event.

    Questions come from the webhook thread, events from the manager's loop, so the
    two take a lock. The cache stores an object (and indexes it) before its handlers
    run: a pass that starts after an event's handler found the LeaderWorkerSet not
    followed sees the object as stored, and an event whose handler waits for a pass
    to end is applied after it; either way the last event wins.
    """

    def __init__(self, pods: Informer) -> None:
        self._pods = pods
        self._followed: dict[Owner, _Held] = {}
        self._lock = threading.Lock()
        # On every replica, not only the leader's controllers: the pod webhook asks
        # wherever the API server sends a review.
        add_replica_handler(
            pods, on_add=self._changed, on_update=self._updated, on_delete=self._deleted
        )

    def holds(self, namespace: str, lws_name: str, hostname: str) -> bool:
        with self._lock:
            held = self._followed.get((namespace, lws_name))
            if held is None:
                # Followed before the pass, so that events from now on wait for it.
                held = self._followed[(namespace, lws_name)] = _Held()
                try:
                    for pod in LwsCaches.of_lws(self._pods, namespace, lws_name):
                        held.set(str(meta_of(pod).get("name", "")), _hostname_held(pod))
                except BaseException:
                    # A half-made count would be trusted from now on; the next
                    # question makes it afresh.
                    del self._followed[(namespace, lws_name)]
                    raise
            return hostname in held.pods

    def followed(self) -> int:
        """How many LeaderWorkerSets are followed (for tests)."""
        return len(self._followed)

    def _set(self, pod: JSON, hostname: str | None) -> None:
        # Without the lock: nothing followed yet means a later pass sees this pod.
        if not self._followed:
            return
        meta = meta_of(pod)
        lws_name = (meta.get("labels") or {}).get(c.LABEL_SET_NAME)
        if lws_name is None:
            return
        owner = (meta.get("namespace") or "", lws_name)
        with self._lock:
            held = self._followed.get(owner)
            if held is None:
                return
            held.set(str(meta.get("name", "")), hostname)
            if not held.by_pod:
                # All its pods are gone; a later question lists the cache again, cheaply.
                del self._followed[owner]

    def _changed(self, pod: JSON) -> None:
        self._set(pod, _hostname_held(pod))

    def _updated(self, old: JSON, new: JSON) -> None:
        if labels_of(old).get(c.LABEL_SET_NAME) != labels_of(new).get(c.LABEL_SET_NAME):
            self._set(old, None)
        self._set(new, _hostname_held(new))

    def _deleted(self, pod: JSON) -> None:
        self._set(pod, None)


@dataclass
class IssuedHostnames:
    """Hostnames this webhook handed out lately. A ReplicaSet creates leaders in
    parallel bursts, and a leader admitted a moment ago is not in the pod cache yet
    when the next one is admitted.

    Not locked: only the pod webhook's handler uses it, on the webhook thread."""

    memory: float = ISSUED_MEMORY
    clock: Callable[[], float] = time.monotonic
    _issued: dict[Owner, dict[str, float]] = field(default_factory=dict)
    # In the order handed out, so that forgetting looks only at what is due.
    _order: deque[tuple[float, Owner, str]] = field(default_factory=deque)

    def recent(self, namespace: str, lws_name: str) -> set[str]:
        self._expire()
        return set(self._issued.get((namespace, lws_name), {}))

    def holds(self, namespace: str, lws_name: str, hostname: str) -> bool:
        self._expire()
        return hostname in self._issued.get((namespace, lws_name), {})

    def add(self, namespace: str, lws_name: str, hostname: str) -> None:
        now, owner = self.clock(), (namespace, lws_name)
        self._issued.setdefault(owner, {})[hostname] = now
        self._order.append((now, owner, hostname))

    def _expire(self) -> None:
        now = self.clock()
        order = self._order
        while order and now - order[0][0] > self.memory:
            at, owner, hostname = order.popleft()
            issued = self._issued.get(owner)
            if issued is None or issued.get(hostname) != at:
                continue  # handed out again since; a later entry stands for it
            del issued[hostname]
            if not issued:
                del self._issued[owner]
