"""Deleting a deleted LeaderWorkerSet's groups beside the garbage collector (an option,
off by default: docs/group-recovery.md, "Faster teardown").

After `kubectl delete lws` (background propagation) the collector goes down the owner
chain one level per hop: the leader StatefulSet, then the leader pods, and only when a
leader pod is gone its worker StatefulSet, then the workers. Leaders and workers thus
terminate one after the other, two grace periods in a row. Here, on the
LeaderWorkerSet's DELETE event, the controller deletes every level at once.

Only what provably belongs to the UID of the LeaderWorkerSet that was deleted (a new
one of the same name may already exist): a leader StatefulSet read from the API server
(not the cache) with that UID as its controller, deleted with that read's
resourceVersion as a precondition, so that one orphaned meanwhile (`--cascade=orphan`
removes the owner references before the owner goes) answers 409 and is left alone.
When the collector has deleted the set already, each of its pods is read again and
deleted only if it still names the set, at the version read, for the same reason.
Then the pods that StatefulSet controls, the worker StatefulSets those pods control
and their pods, each by UID. Hash mode's leaders belong to ReplicaSets, which this
controller neither caches nor may read: they are left to the collector.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field

from leaderworkerset.api.objects import (
    JSON,
    controller_uid,
    marked_for_deletion,
    meta_of,
    name_of,
    orphaning,
    uid_of,
)
from leaderworkerset.api.resources import PODS, STATEFULSETS, Resource
from leaderworkerset.caches import LwsCaches
from leaderworkerset.runtime.client import ApiClient, delete_exact
from leaderworkerset.runtime.indexes import object_key

log = logging.getLogger(__name__)

# Reads and DELETEs of one object before it is left to the collector.
DELETE_TRIES = 3


class _Outcome(enum.Enum):
    GONE = "gone"
    NOT_OURS = "not ours"
    DELETED = "deleted"


@dataclass
class LwsTeardown:
    client: ApiClient
    caches: LwsCaches
    enabled: bool = False
    # LeaderWorkerSets seen deleted and not torn down yet: key -> UID.
    gone: dict[str, str] = field(default_factory=dict)

    def remember(self, lws: JSON) -> None:
        """The LeaderWorkerSet cache's delete handler; runs before the key's reconcile."""
        if self.enabled and uid_of(lws):
            self.gone[object_key(lws)] = uid_of(lws)

    async def tear_down(self, key: str) -> None:
        """Delete the groups of the LeaderWorkerSet last seen deleted under `key`, if
        any. Failures are logged: the garbage collector still does it all."""
        uid = self.gone.pop(key, None)
        if uid is None:
            return
        namespace, _, name = key.rpartition("/")
        leader_sets = [
            s
            for s in LwsCaches.of_lws(self.caches.statefulsets, namespace, name)
            if controller_uid(s) == uid
        ]
        results = await asyncio.gather(
            *(self._leader_set(s, uid) for s in leader_sets), return_exceptions=True
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            log.warning("deleting the groups of deleted LeaderWorkerSet %s: %s", key, failed)

    async def _leader_set(self, cached: JSON, lws_uid: str) -> None:
        outcome = await self._delete_if_controlled(STATEFULSETS, cached, lws_uid)
        if outcome is _Outcome.NOT_OURS:
            return
        # GONE: the collector deleted the set first (its first hop often beats this
        # reconcile). Its pods are garbage too unless it went with --cascade=orphan,
        # which rewrote them: so each is then read again and must still name the set.
        pinned = outcome is _Outcome.GONE
        leaders = self.caches.controlled_pods(cached)
        await asyncio.gather(*(self._leader(p, uid_of(cached), pinned) for p in leaders))

    async def _leader(self, leader: JSON, set_uid: str, pinned: bool) -> None:
        if not pinned:
            if orphaning(leader):
                return
            deleting = (
                [] if marked_for_deletion(leader) else [delete_exact(self.client, PODS, leader)]
            )
            await asyncio.gather(*deleting, self._group(leader))
        elif await self._delete_if_controlled(PODS, leader, set_uid) is _Outcome.DELETED:
            await self._group(leader)

    async def _delete_if_controlled(
        self, resource: Resource, cached: JSON, owner_uid: str
    ) -> _Outcome:
        """Delete the object `cached` shows if the server's copy is still controlled by
        `owner_uid`, at the version read (DELETED also when already being deleted). A
        refused DELETE (deleted meanwhile, or written by its own controller since the
        read) is decided by reading again."""
        meta = meta_of(cached)
        for _ in range(DELETE_TRIES):
            live = await self.client.get_or_none(resource, name_of(cached), str(meta["namespace"]))
            if live is None or uid_of(live) != uid_of(cached):
                return _Outcome.GONE
            if controller_uid(live) != owner_uid:
                return _Outcome.NOT_OURS
            if orphaning(live):
                return _Outcome.NOT_OURS  # `--cascade=orphan` keeps what it owns
            version = meta_of(live).get("resourceVersion")
            if marked_for_deletion(live) or await delete_exact(
                self.client, resource, live, resource_version=version
            ):
                return _Outcome.DELETED
        return _Outcome.NOT_OURS

    async def _group(self, leader: JSON) -> None:
        sts = self.caches.statefulsets.get(str(meta_of(leader).get("namespace")), name_of(leader))
        if sts is None or controller_uid(sts) != uid_of(leader):
            return
        # The set before its pods, which it would otherwise make again.
        if not marked_for_deletion(sts):
            await delete_exact(self.client, STATEFULSETS, sts)
        workers = [p for p in self.caches.controlled_pods(sts) if not marked_for_deletion(p)]
        await asyncio.gather(*(delete_exact(self.client, PODS, p) for p in workers))
