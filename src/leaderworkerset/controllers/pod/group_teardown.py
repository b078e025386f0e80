"""Tearing a group down beside the garbage collector instead of behind it.

The leader is deleted in the foreground, as before: it stays (with the
foregroundDeletion finalizer) until its worker StatefulSet and per-group Service are
gone, and so an Ordinal leader StatefulSet cannot recreate it, nor a PostTermination
replacement be admitted, while a pod of the old group exists. Left to itself the
garbage collector then deletes the worker StatefulSet, waits to see it marked, and
only then deletes the worker pods: each hop is a watch event and a trip through the
collector's queue, and they all queue behind whatever else it is collecting (an LWS
deletion of many groups, a node drain).

Here the controller takes those hops itself, right after the leader's DELETE: the
worker StatefulSet in the foreground (its pods, owners with blockOwnerDeletion, then
keep it, and it keeps the leader, until they are gone), then its pods, then the
group's Services (for a leader in the foreground only: see `resume`). Each DELETE
carries the UID it was read with, so an object of the same name made since (a new
leader's StatefulSet) is never hit; an object the
collector got to first answers 404 and is skipped. The collector remains the
fallback for anything this misses: a DELETE that fails is logged, not retried here.

A leader already being deleted in the foreground, by this controller before a
restart or by anyone else (`kubectl delete pod --cascade=foreground`, the collector
cascading a foreground LWS deletion), is `resume`d: its dependents are deleted the
same way. So is one deleted in the background by anyone else (`kubectl delete pod`,
an eviction, its StatefulSet rolling it to a new revision): the collector would
delete its worker StatefulSet only once the leader is gone, one grace period after
the other. Its Services stay until it is gone, as the collector has them: during a
surge rollout the replaced groups' Services stand beside the new ones', and an Ordinal
leader recreated under the name replaces its predecessor's at once (the pod
reconciler). Not when its dependents are to be orphaned, nor when the group goes with
its LeaderWorkerSet (the leader workload deleted): that order is the collector's
unless `teardown.leaderWorkerSetDeletion` says otherwise (lws_teardown.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import (
    JSON,
    controller_uid,
    labels_of,
    marked_for_deletion,
    meta_of,
    name_of,
    orphaning,
    uid_of,
)
from leaderworkerset.api.resources import DEPLOYMENTS, PODS, SERVICES, STATEFULSETS, Resource
from leaderworkerset.caches import LwsCaches
from leaderworkerset.runtime.client import ApiClient, delete_exact

log = logging.getLogger(__name__)

FOREGROUND = "Foreground"
FOREGROUND_FINALIZER = "foregroundDeletion"
# How long a leader whose dependents were deleted is remembered, so that its later
# events (status writes while it terminates) do not delete them again: far longer
# than the cache takes to show the deletions.
TEARDOWN_MEMORY = 300.0


def deleting_in_foreground(pod: JSON) -> bool:
    meta = meta_of(pod)
    return bool(meta.get("deletionTimestamp")) and FOREGROUND_FINALIZER in (
        meta.get("finalizers") or ()
    )


@dataclass
class GroupTeardown:
    client: ApiClient
    caches: LwsCaches
    # False: the leader alone is deleted and the garbage collector does the rest.
    parallel: bool = True
    # UIDs of leaders whose dependents were deleted here, with when.
    torn_down: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic

    async def tear_down(self, leader: JSON) -> None:
        """Delete the leader in the foreground, then at once its dependents. Raises the
        leader DELETE's error (a 404 or 409 says it is gone or replaced already)."""
        meta = meta_of(leader)
        # The leader first: were its DELETE refused, the group must stay whole (its
        # worker StatefulSet, once gone, would be made again beside the old workers).
        await self.client.delete(
            PODS,
            str(meta["name"]),
            str(meta["namespace"]),
            propagation_policy=FOREGROUND,
            preconditions={"uid": meta.get("uid")},
        )
        if self.parallel:
            await self._delete_dependents(leader, pinned=False)

    async def resume(self, leader: JSON, view: LwsView) -> None:
        """A leader being deleted whose dependents this controller has not deleted
        (since it started): delete them."""
        if not self.parallel or not marked_for_deletion(leader) or uid_of(leader) in self.torn_down:
            return
        if deleting_in_foreground(leader):
            await self._delete_dependents(leader, pinned=False)
        elif not orphaning(leader) and await self._leader_workload_stays(leader, view):
            # The collector drops the orphan finalizer once it has orphaned the
            # dependents, and the cache may show that before their own change: so
            # each is deleted at the version cached, which orphaning moves.
            await self._delete_dependents(leader, pinned=True)

    async def _leader_workload_stays(self, leader: JSON, view: LwsView) -> bool:
        """The workload that made `leader` is not being deleted (the collector deletes
        it before the leaders of a deleted LeaderWorkerSet): the leader alone is. Read
        from the API server, as caches lag the collector."""
        if marked_for_deletion(view.obj):
            return False
        resource, informer = (
            (DEPLOYMENTS, self.caches.deployments)
            if view.hash_mode
            else (STATEFULSETS, self.caches.statefulsets)
        )
        cached = informer.get(view.namespace, view.name)
        if cached is None or marked_for_deletion(cached):
            return False
        live = await self.client.get_or_none(resource, view.name, view.namespace)
        if live is None or marked_for_deletion(live) or controller_uid(live) != view.uid:
            return False
        # A Hash leader's controller is a ReplicaSet, which this controller does not read.
        return view.hash_mode or uid_of(live) == controller_uid(leader)

    async def _delete_dependents(self, leader: JSON, *, pinned: bool) -> None:
        uid = uid_of(leader)
        if not self._claim(uid):
            return
        namespace = str(meta_of(leader).get("namespace", ""))
        sts = self.caches.statefulsets.get(namespace, name_of(leader))
        if sts is not None and controller_uid(sts) != uid:
            sts = None  # a newer leader's, or nothing of this group
        lws = str(labels_of(leader).get(c.LABEL_SET_NAME, ""))
        # A leader deleted in the background keeps its group's Service until it is gone,
        # as with the collector alone (see the module's docstring; upstream's e2e suite
        # counts the Services during a surge rollout).
        services = (
            []
            if pinned
            else [
                s
                for s in LwsCaches.of_lws(self.caches.services, namespace, lws)
                if controller_uid(s) == uid and not marked_for_deletion(s)
            ]
        )
        results = await asyncio.gather(
            self._delete_worker_set(sts, pinned),
            *(self._delete(SERVICES, s) for s in services),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed or False in results:
            # Whatever the collector does not get to first, the next resume retries
            # (a refusal at the cached version: once the cache has caught up).
            self.torn_down.pop(uid, None)
        if failed:
            log.warning("tearing down the group of %s/%s: %s", namespace, name_of(leader), failed)

    async def _delete_worker_set(self, sts: JSON | None, pinned: bool) -> bool:
        """False when the StatefulSet's DELETE was refused at the cached version."""
        if sts is None:
            return True
        if not marked_for_deletion(sts):
            # Before its pods: a StatefulSet being deleted is not synced again, so it
            # cannot recreate the pods deleted next.
            deleted = await self._delete(
                STATEFULSETS, sts, propagation_policy=FOREGROUND, pinned=pinned
            )
            if not deleted and pinned:
                return False
        pods = [p for p in self.caches.controlled_pods(sts) if not marked_for_deletion(p)]
        results = await asyncio.gather(
            *(self._delete(PODS, p) for p in pods), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return True

    async def _delete(
        self,
        resource: Resource,
        obj: JSON,
        *,
        propagation_policy: str | None = None,
        pinned: bool = False,
    ) -> bool:
        """By UID (and, `pinned`, at the cached resourceVersion)."""
        version = meta_of(obj).get("resourceVersion") if pinned else None
        return await delete_exact(
            self.client,
            resource,
            obj,
            resource_version=version,
            propagation_policy=propagation_policy,
        )

    def _claim(self, uid: str) -> bool:
        now = self.clock()
        expired = [u for u, at in self.torn_down.items() if now - at > TEARDOWN_MEMORY]
        for old in expired:
            del self.torn_down[old]
        if not uid or uid in self.torn_down:
            return False
        self.torn_down[uid] = now
        return True
