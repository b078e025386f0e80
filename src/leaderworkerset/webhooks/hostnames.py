"""The Hash-mode hostnames a LeaderWorkerSet's live groups hold, so that the pod
webhook never gives a new leader one of them.

A hostname is the first characters of a group key: two live groups sharing one
would make `<hostname>.<lws>.<ns>` resolve to both leaders (workers could join
the wrong group) and, under UniquePerReplica, would give both the same Service
name. A group holds its hostname while any of its pods can still run, a
terminating one included: its name is still published until the pod is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.objects import JSON
from leaderworkerset.group import names as naming
from leaderworkerset.group.readiness import pod_finished
from leaderworkerset.group.roles import group_key

# Long enough for any pod cache to show a leader admitted now, short enough that the
# memory of a burst of admissions stays small.
ISSUED_MEMORY = 60.0


def hostnames_in_use(pods: Iterable[JSON]) -> set[str]:
    """The hostnames of the groups `pods` (one LWS's pods) belong to, finished pods
    (whose containers never run again) aside."""
    in_use: set[str] = set()
    for pod in pods:
        key = group_key(pod)
        if key and not pod_finished(pod):
            in_use.add(naming.hash_hostname(key))
    return in_use


@dataclass
class IssuedHostnames:
    """Hostnames this webhook handed out lately. A ReplicaSet creates leaders in
    parallel bursts, and a leader admitted a moment ago is not in the pod cache yet
    when the next one is admitted."""

    memory: float = ISSUED_MEMORY
    clock: Callable[[], float] = time.monotonic
    _issued: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)

    def recent(self, namespace: str, lws_name: str) -> set[str]:
        self._expire()
        return set(self._issued.get((namespace, lws_name), {}))

    def add(self, namespace: str, lws_name: str, hostname: str) -> None:
        self._issued.setdefault((namespace, lws_name), {})[hostname] = self.clock()

    def _expire(self) -> None:
        now = self.clock()
        for owner, issued in list(self._issued.items()):
            for hostname, at in list(issued.items()):
                if now - at > self.memory:
                    del issued[hostname]
            if not issued:
                del self._issued[owner]
