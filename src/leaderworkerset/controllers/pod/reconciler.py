"""The pod reconciler: for each leader pod, its group — the worker
StatefulSet, the per-group Service — and the group restart policy for every pod.

Both group identities share it. Hash mode adds two things, both keyed off the
leader pod: nothing is built for a leader still held by the group-replacement
scheduling gate, and the leader's group-ready condition follows its workers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import (
    JSON,
    labels_of,
    marked_for_deletion,
    meta_of,
    name_of,
    namespace_of,
    revision_key_of,
    uid_of,
)
from leaderworkerset.api.reconcile_errors import ReconcileError
from leaderworkerset.api.resources import NODES, SERVICES, STATEFULSETS
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers import revisions as rev
from leaderworkerset.controllers.events import record
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.pod.backoff import RetryBackoff
from leaderworkerset.controllers.pod.gang_scheduling import ensure_pod_group
from leaderworkerset.controllers.pod.group_ready import GroupReadyWrites, sync_group_ready
from leaderworkerset.controllers.pod.group_recovery import GroupRecovery, RecoveryMetrics
from leaderworkerset.controllers.pod.group_service import (
    group_service,
    group_service_name,
    left_by_predecessor,
    on_its_way_out,
    owned_by_leader,
    owner_description,
)
from leaderworkerset.controllers.pod.restart_policy import GroupRestarter
from leaderworkerset.controllers.pod.worker_statefulset import (
    WorkerSetCreates,
    build_worker_statefulset,
)
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.group.readiness import (
    pod_condition_true,
    pod_finished,
    pod_terminating,
)
from leaderworkerset.group.roles import group_size, is_leader
from leaderworkerset.runtime.client import ApiClient, ApiError, delete_exact
from leaderworkerset.runtime.controller import Result
from leaderworkerset.runtime.events import EventRecorder, object_reference
from leaderworkerset.runtime.indexes import object_key

log = logging.getLogger(__name__)

# What the reconciler waits out by polling, each with its own delays per leader.
_WAIT_REVISION = "revision"
_WAIT_SERVICE = "service"
# Right after a rollout starts the leader's revision can be late in the cache; a
# revision still missing at the second look is really missing, and is reported.
_REVISION_MISSES_BEFORE_EVENT = 1


# What _reconcile_pod answers when the restart policy is recreating the group.
_GROUP_RECREATED = object()


def _group_size(leader: JSON, view: LwsView) -> int:
    """Hash mode: the size of the leader's own revision (mid-rollout it can differ from
    the live spec, and so does its gate). Ordinal mode follows the live spec, as
    upstream."""
    return group_size(leader, view) if view.hash_mode else view.size


def _uid(pod: JSON) -> str:
    return uid_of(pod)


class TopologyError(ReconcileError, RuntimeError):
    """Exclusive placement cannot pin the workers (retried with backoff)."""


@dataclass
class PodReconciler:
    client: ApiClient
    caches: LwsCaches
    recorder: EventRecorder | None = None
    options: ControllerOptions = field(default_factory=ControllerOptions)
    # Pods deleted without ever being seen terminating (a grace-0 or forced delete):
    # the restart policy still has to see them, so their last state is kept here.
    tombstones: dict[str, JSON] = field(default_factory=dict)
    waits: RetryBackoff = field(default_factory=RetryBackoff)
    group_ready_writes: GroupReadyWrites = field(default_factory=GroupReadyWrites)
    worker_creates: WorkerSetCreates = field(default_factory=WorkerSetCreates)
    group_metrics: GroupMetrics = field(default_factory=GroupMetrics)

    recovery_metrics: RecoveryMetrics = field(default_factory=RecoveryMetrics)

    def __post_init__(self) -> None:
        self.restarter = GroupRestarter(
            self.client,
            self.caches,
            metrics=self.group_metrics,
            parallel_teardown=self.options.teardown.group_restart,
        )
        self.restarter.recovery = GroupRecovery(
            self.client,
            self.caches,
            policy=self.options.group_backoff,
            metrics=self.recovery_metrics,
        )

    def remember_deleted(self, pod: JSON) -> None:
        """The pod cache's delete handler; runs before the key is reconciled."""
        meta = meta_of(pod)
        if not meta.get("name"):
            return
        final = dict(pod)
        final["metadata"] = {**meta, "deletionTimestamp": meta.get("deletionTimestamp") or "gone"}
        self.tombstones[object_key(pod)] = final
        self.group_ready_writes.forget(pod)
        if is_leader(pod):
            self.restarter.recovery.forget(pod)
        self.worker_creates.forget(pod)
        for wait in (_WAIT_REVISION, _WAIT_SERVICE):
            self.waits.forget(_wait_key(wait, pod))

    async def __call__(self, key: str) -> Result | None:
        live = self.caches.pods.get_by_key(key)
        tombstone = self.tombstones.pop(key, None)
        if tombstone is not None and live is not None and _uid(live) == _uid(tombstone):
            tombstone = None  # the deletion event of a pod we have seen terminate
        if tombstone is not None:
            # A vanished pod first: a StatefulSet may already have recreated one under
            # the same name, which must not hide the loss from the restart policy.
            try:
                result = await self._reconcile_pod(tombstone, vanished=True)
            except Exception:
                # The retry needs the vanished pod's last state as much as this try did.
                self.tombstones[key] = tombstone
                raise
            if result is _GROUP_RECREATED:
                return None
        if live is None:
            return None
        result = await self._reconcile_pod(live, vanished=False)
        return result if isinstance(result, Result) else None

    async def _reconcile_pod(self, pod: JSON, *, vanished: bool) -> Result | object | None:
        labels = labels_of(pod)
        lws_name = labels.get(c.LABEL_SET_NAME)
        if not lws_name:
            raise ValueError(f"{c.LABEL_SET_NAME} label is unexpected missing")
        if c.LABEL_WORKER_INDEX not in labels:
            raise ValueError(f"{c.LABEL_WORKER_INDEX} label is unexpected missing")
        namespace = namespace_of(pod)
        view = self.caches.lws_view(namespace, lws_name)
        if view is None:
            return None
        if not vanished and is_leader(pod):
            # A group deleted before a restart of this controller, or a leader deleted
            # by someone else: its dependents go now rather than hop by hop.
            await self.restarter.teardown.resume(pod, view)
        recreating, event = await self.restarter.handle(pod, view)
        if event is not None:
            record(self.recorder, view.obj, event)
        if recreating:
            return _GROUP_RECREATED
        if vanished or not is_leader(pod):
            return None
        return await self._reconcile_leader(pod, view)

    async def _reconcile_leader(self, pod: JSON, view: LwsView) -> Result | None:
        meta = meta_of(pod)
        annotations = meta.get("annotations") or {}
        if annotations.get(c.ANNOTATION_LEADER_NAME):
            record(
                self.recorder,
                view.obj,
                ev.misclassified_leader(
                    view.namespace, str(meta.get("name")), object_reference(pod)
                ),
            )
            return None
        if pod_terminating(pod):
            return None
        if view.hash_mode and pod_finished(pod):
            await self._take_down_lost_group(pod, view)
            return None
        # Before anything that can wait: a Hash replacement takes over the records of the
        # group it replaces as soon as it exists, gated or not.
        await self.restarter.recovery.inherit(view, pod)
        if view.hash_mode and is_scheduling_gated(pod):
            # PostTermination: nothing exists for a group until it is admitted.
            return None
        await self.restarter.recovery.sync_leader_count(view, pod)
        size = _group_size(pod, view)
        worker_sts = None
        if size > 1:
            worker_sts = self.caches.statefulsets.get(view.namespace, str(meta.get("name")))
            if view.hash_mode:
                # Before anything below that can keep failing (a quota on Services, the
                # Volcano API down): the leader's readiness is what Services route on
                # and what scale-down ranks by, so it must never freeze on them.
                workers = self.caches.controlled_pods(worker_sts) if worker_sts else []
                await sync_group_ready(
                    self.client, pod, worker_sts, workers, self.group_ready_writes
                )
        if view.unique_per_replica:
            waiting = await self._ensure_group_service(view, pod)
            if waiting is not None:
                return waiting
        if self.options.gang_scheduling:
            await ensure_pod_group(self.client, view, pod)
        if size == 1 or worker_sts is not None:
            # Never updated in place: a group moves to a new revision when its leader
            # is replaced and this StatefulSet is garbage collected with the old one.
            self.worker_creates.forget(pod)
            return None
        left = self.worker_creates.wait_left(pod)
        if left:
            # Its ADDED event wakes this leader (the StatefulSet is owned by it).
            return Result(requeue_after=left)
        if not self._started_enough(pod, view):
            return None
        return await self._create_worker_statefulset(pod, view)

    async def _create_worker_statefulset(self, pod: JSON, view: LwsView) -> Result | None:
        """From the revision the leader was created from; waits for that revision to
        reach the cache and, under exclusive placement, for the leader's node."""
        meta = meta_of(pod)
        revisions = LwsCaches.of_lws(self.caches.revisions, view.namespace, view.name)
        key = revision_key_of(pod)
        revision = rev.find_revision(view.obj, revisions, key) if key else None
        if revision is None:
            delay, misses = self.waits.next(_wait_key(_WAIT_REVISION, pod))
            if misses == _REVISION_MISSES_BEFORE_EVENT:
                event = ev.leader_revision_missing(
                    str(meta.get("name")), key, object_reference(pod)
                )
                record(self.recorder, view.obj, event)
            return Result(requeue_after=delay)
        self.waits.forget(_wait_key(_WAIT_REVISION, pod))
        node_selector = await self._exclusive_node_selector(pod, view)
        if node_selector is None:
            return None
        # The leader's revision over the live object is an object no cache holds.
        cur = view_of(rev.apply_revision(view.obj, revision))
        body = build_worker_statefulset(pod, view, cur, node_selector or None)
        try:
            await self.client.create(STATEFULSETS, body)
        except ApiError as exc:
            if exc.already_exists:
                # Ours (an earlier create whose answer was lost, say): waited for like
                # any other the cache has not shown. An old leader's of the same name
                # is on its way out, and its deletion wakes this leader.
                found = await self.client.get_or_none(STATEFULSETS, name_of(body), view.namespace)
                self.worker_creates.already_exists(pod, found)
                return None
            record(
                self.recorder,
                view.obj,
                ev.worker_statefulset_create_failed(
                    str(meta.get("name")), exc.message, object_reference(pod)
                ),
            )
            raise
        self.worker_creates.created(pod)
        record(
            self.recorder,
            view.obj,
            ev.worker_statefulset_created(str(meta.get("name")), object_reference(pod)),
        )
        return None

    async def _take_down_lost_group(self, leader: JSON, view: LwsView) -> None:
        """A Hash leader that failed (or was evicted) is lost whatever the restart policy:
        its ReplicaSet has already created another leader (a new group) beside it and
        never deletes it, so its workers would hold their capacity forever. Deleting it
        in the foreground removes the workers first; until then PostTermination counts
        the group as tearing down."""
        if not await self.restarter.delete_leader(leader):
            return
        self.group_metrics.group_restarted(leader, leader, c.GROUP_IDENTITY_HASH)
        meta = meta_of(leader)
        name = str(meta["name"])
        group = str((meta.get("labels") or {}).get(c.LABEL_GROUP_INDEX, ""))
        event = ev.group_recreated(name, name, group, True, object_reference(leader))
        record(self.recorder, view.obj, event)

    def _started_enough(self, pod: JSON, view: LwsView) -> bool:
        if view.startup_policy != c.STARTUP_POLICY_LEADER_READY:
            return True
        # In Hash mode Ready waits for the group-ready gate, which waits for the
        # workers: waiting on Ready would never end, so wait for the containers.
        condition = "ContainersReady" if view.hash_mode else "Ready"
        return pod_condition_true(pod, condition)

    async def _exclusive_node_selector(self, pod: JSON, view: LwsView) -> dict[str, str] | None:
        """{} without exclusive placement; None while the leader is unscheduled."""
        if c.ANNOTATION_EXCLUSIVE_TOPOLOGY not in view.annotations:
            return {}
        topology_key = view.annotations[c.ANNOTATION_EXCLUSIVE_TOPOLOGY]
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return None  # the scheduling update re-triggers this reconcile
        node = await self.client.get(NODES, node_name)
        value = labels_of(node).get(topology_key)
        if value is None:
            raise TopologyError(f"node {node_name} does not have topology label: {topology_key}")
        return {topology_key: value}

    async def _ensure_group_service(self, view: LwsView, pod: JSON) -> Result | None:
        """None once the leader's own Service exists; a Result while a Service of that
        name that is not the leader's stands in the way (never shared: the group's DNS
        would reach another group's pods, or whatever the stranger selects)."""
        namespace = namespace_of(pod)
        name = group_service_name(view, pod)
        wait_key = _wait_key(_WAIT_SERVICE, pod)
        service = self.caches.services.get(namespace, name)
        if service is None:
            try:
                await self.client.create(SERVICES, group_service(view, pod))
            except ApiError as exc:
                if not exc.already_exists:
                    raise
                # Our own earlier create the cache has not shown yet, or a Service
                # without this LeaderWorkerSet's label, which the cache never holds.
                service = await self.client.get_or_none(SERVICES, name, namespace)
                if service is None:
                    return Result(requeue=True)  # deleted in between: create it again
            else:
                self.waits.forget(wait_key)
                return None
        if owned_by_leader(service, pod):
            self.waits.forget(wait_key)
            return None
        if left_by_predecessor(service, pod) and not marked_for_deletion(service):
            # The old leader of this name kept its Service while it terminated (a
            # background teardown leaves it to the collector); it is gone now, and
            # this group's workers wait on the name. Done here, by UID, rather than a
            # watch event and a queue later by the collector.
            await delete_exact(self.client, SERVICES, service)
            try:
                await self.client.create(SERVICES, group_service(view, pod))
            except ApiError as exc:
                if not exc.already_exists:
                    raise
            else:
                self.waits.forget(wait_key)
                return None
        delay, tries = self.waits.next(wait_key)
        if tries == 0 and not on_its_way_out(service, pod):
            event = ev.group_service_not_owned(
                f"{namespace}/{name}",
                name_of(pod),
                owner_description(service),
                object_reference(pod),
            )
            record(self.recorder, view.obj, event)
        return Result(requeue_after=delay)


def _wait_key(wait: str, pod: JSON) -> str:
    # By UID: an Ordinal leader recreated under the same name starts afresh.
    return f"{wait}/{uid_of(pod)}"
