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
group's Services. Each DELETE carries the UID it was read with, so an object of the
same name made since (a new leader's StatefulSet) is never hit; an object the
collector got to first answers 404 and is skipped. The collector remains the
fallback for anything this misses: a DELETE that fails is logged, not retried here.

A leader already being deleted in the foreground, by this controller before a
restart or by anyone else (`kubectl delete pod --cascade=foreground`, the collector
cascading a foreground LWS deletion), is `resume`d: its dependents are deleted the
same way. So is one deleted in the background by anyone else (`kubectl delete pod`,
an eviction, its StatefulSet rolling it to a new revision): the collector would
delete its worker StatefulSet only once the leader is gone, one grace period after
the other. Not when its dependents are to be orphaned, nor when the group goes with
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
    uid_of,
)
from leaderworkerset.api.resources import PODS, SERVICES, STATEFULSETS, Resource
from leaderworkerset.caches import LwsCaches
from leaderworkerset.runtime.client import ApiClient, ApiError

log = logging.getLogger(__name__)

FOREGROUND = "Foreground"
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
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
            await self._delete_dependents(leader)

    async def resume(self, leader: JSON, view: LwsView) -> None:
        """A leader being deleted whose dependents this controller has not deleted
        (since it started): delete them."""
        if not self.parallel or not marked_for_deletion(leader):
            return
        if deleting_in_foreground(leader) or (
            ORPHAN_FINALIZER not in (meta_of(leader).get("finalizers") or ())
            and self._leader_workload_stays(leader, view)
        ):
            await self._delete_dependents(leader)

    def _leader_workload_stays(self, leader: JSON, view: LwsView) -> bool:
        """The LeaderWorkerSet and the workload that made `leader` are not being
        deleted: the leader alone is."""
        if marked_for_deletion(view.obj):
            return False
        if view.hash_mode:
            # Its ReplicaSet is not cached; the Deployment above it goes first.
            workload = self.caches.deployments.get(view.namespace, view.name)
            return workload is not None and not marked_for_deletion(workload)
        workload = self.caches.statefulsets.get(view.namespace, view.name)
        return (
            workload is not None
            and uid_of(workload) == controller_uid(leader)
            and not marked_for_deletion(workload)
        )

    async def _delete_dependents(self, leader: JSON) -> None:
        uid = uid_of(leader)
        if not self._claim(uid):
            return
        namespace = str(meta_of(leader).get("namespace", ""))
        sts = self.caches.statefulsets.get(namespace, name_of(leader))
        if sts is not None and controller_uid(sts) != uid:
            sts = None  # a newer leader's, or nothing of this group
        lws = str(labels_of(leader).get(c.LABEL_SET_NAME, ""))
        services = [
            s
            for s in LwsCaches.of_lws(self.caches.services, namespace, lws)
            if controller_uid(s) == uid and not marked_for_deletion(s)
        ]
        results = await asyncio.gather(
            self._delete_worker_set(sts),
            *(self._delete(SERVICES, s) for s in services),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            # Whatever the collector does not get to first, the next resume retries.
            self.torn_down.pop(uid, None)
            log.warning("tearing down the group of %s/%s: %s", namespace, name_of(leader), failed)

    async def _delete_worker_set(self, sts: JSON | None) -> None:
        if sts is None:
            return
        if not marked_for_deletion(sts):
            # Before its pods: a StatefulSet being deleted is not synced again, so it
            # cannot recreate the pods deleted next.
            await self._delete(STATEFULSETS, sts, propagation_policy=FOREGROUND)
        pods = [p for p in self.caches.controlled_pods(sts) if not marked_for_deletion(p)]
        results = await asyncio.gather(
            *(self._delete(PODS, p) for p in pods), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _delete(
        self, resource: Resource, obj: JSON, *, propagation_policy: str | None = None
    ) -> None:
        meta = meta_of(obj)
        try:
            await self.client.delete(
                resource,
                str(meta["name"]),
                str(meta["namespace"]),
                propagation_policy=propagation_policy,
                preconditions={"uid": meta.get("uid")},
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise

    def _claim(self, uid: str) -> bool:
        now = self.clock()
        expired = [u for u, at in self.torn_down.items() if now - at > TEARDOWN_MEMORY]
        for old in expired:
            del self.torn_down[old]
        if not uid or uid in self.torn_down:
            return False
        self.torn_down[uid] = now
        return True
