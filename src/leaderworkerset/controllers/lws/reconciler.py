"""The LeaderWorkerSet reconciler: revisions, the leader workload, the shared
Service, status.

It reads only from the watch caches and writes only what differs. Which
workload runs the leaders is the one thing the two group identities do not
share: a StatefulSet steered by the rolling-update arithmetic (`leader_statefulset.py`,
`rolling_update.py`) or a Deployment (`leader_deployment.py`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, controller_ref, format_time, meta_of, revision_key_of
from leaderworkerset.api.reconcile_errors import ReconcileError
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers import revisions as rev
from leaderworkerset.controllers.events import record
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.held import HeldBoard
from leaderworkerset.controllers.lws.applied import AppliedObjects
from leaderworkerset.controllers.lws.leader_deployment import leader_deployment
from leaderworkerset.controllers.lws.leader_statefulset import leader_statefulset
from leaderworkerset.controllers.lws.lws_teardown import LwsTeardown
from leaderworkerset.controllers.lws.rolling_update import rolling_update_parameters
from leaderworkerset.controllers.lws.shared_service import shared_service, wants_shared_service
from leaderworkerset.controllers.lws.status import (
    ObservationMemo,
    StatusUpdate,
    hash_status,
    ordinal_status,
    status_changed,
    with_condition,
)
from leaderworkerset.controllers.lws.workload_scheduling import (
    SchedulingOutcome,
    WorkloadScheduler,
    support_refusal,
)
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.group.ownership import left_by_predecessor
from leaderworkerset.group.workload_objects import GroupRevision, scheduling_of
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.client import ApiClient, ApiError, delete_exact
from leaderworkerset.runtime.controller import Result
from leaderworkerset.runtime.events import EventRecorder, object_reference

log = logging.getLogger(__name__)

# A leader workload being deleted is waited out, as upstream does.
DELETING_REQUEUE = 5.0


@dataclass(frozen=True)
class ScheduledUpdate:
    """A status pass's update, with the WorkloadSchedulingReady condition merged in."""

    status: StatusUpdate
    # When the scheduling step wants another pass (a PodGroup to delete later).
    requeue_after: float | None = None


def _with_scheduling(
    view: LwsView, update: StatusUpdate, outcome: SchedulingOutcome | None, now: str
) -> ScheduledUpdate:
    if outcome is None:
        return ScheduledUpdate(update)
    status = dict(update.status)
    status["conditions"] = with_condition(
        status.get("conditions") or [], outcome.condition(view.generation, now)
    )
    changed = update.changed or status["conditions"] != (
        (view.obj.get("status") or {}).get("conditions") or []
    )
    merged = dataclasses.replace(update, status=status, changed=changed)
    return ScheduledUpdate(merged, outcome.requeue_after)


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace, name


@dataclass(frozen=True)
class _LeaderRevision:
    """The leader workload of one pass and the revision it is to run."""

    live: JSON | None  # the StatefulSet or Deployment as cached; None before it exists
    revision: JSON
    key: str  # the revision's hash
    updated: bool  # the spec changed since the revision `live` runs
    revisions: list[JSON]  # the LWS's revisions as this pass found or made them


@dataclass
class LeaderWorkerSetReconciler:
    client: ApiClient
    caches: LwsCaches
    recorder: EventRecorder | None = None
    applied: AppliedObjects = field(default_factory=AppliedObjects)
    options: ControllerOptions = field(default_factory=ControllerOptions)
    # The replacement reconciler's last word on what it holds back (Hash mode).
    held: HeldBoard = field(default_factory=HeldBoard)
    group_metrics: GroupMetrics = field(default_factory=GroupMetrics)
    # Workload-Aware Scheduling (spec.scheduling); None when the cluster has no
    # Workload API or no provider asks for it (an LWS with scheduling is then refused).
    scheduler: WorkloadScheduler | None = None
    # Per LWS key, the group observations of its last status pass.
    _observations: dict[str, ObservationMemo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.teardown = LwsTeardown(
            self.client, self.caches, enabled=self.options.teardown.lws_deletion
        )

    async def __call__(self, key: str) -> Result | None:
        # First: a new LeaderWorkerSet of the same name may already be in the cache.
        await self.teardown.tear_down(key)
        view = self.caches.lws_view_by_key(key)
        if view is None or meta_of(view.obj).get("deletionTimestamp"):
            self.group_metrics.forget(key)
            self._observations.pop(key, None)
            if self.scheduler is not None:
                self.scheduler.forget(*_split(key))
            # Garbage collection removes what the LeaderWorkerSet owned.
            return None
        revisions = LwsCaches.of_lws(self.caches.revisions, view.namespace, view.name)
        try:
            if view.hash_mode:
                return await self._reconcile_hashed(view, revisions)
            return await self._reconcile_ordinal(view, revisions)
        except ApiError as exc:
            # The namespace is going, and the LeaderWorkerSet with it: nothing to retry.
            if exc.namespace_terminating:
                return None
            raise

    # -- Ordinal: a leader StatefulSet -------------------------------------------------

    async def _reconcile_ordinal(self, view: LwsView, revisions: list[JSON]) -> Result | None:
        leader = await self._leader_revision(view, self.caches.statefulsets, revisions)
        if leader is None:
            return Result(requeue_after=DELETING_REQUEUE)
        sts, key = leader.live, leader.key
        leader_pods, worker_sets = self._groups(view)
        plan = rolling_update_parameters(view, sts, key, leader.updated, leader_pods, worker_sets)
        planned = [GroupRevision(str(i), key) for i in range(plan.replicas)]
        scheduling = await self._schedule(view, planned)
        if scheduling is not None and scheduling.blocked:
            return await self._blocked(view, scheduling)
        body = leader_statefulset(view, key, plan.partition, plan.replicas)
        await self._apply_leader_workload(view, STATEFULSETS, body, leader)
        for event in plan.events:
            record(self.recorder, view.obj, event)
        await self._ensure_shared_service(view)
        memo = self._memo(view)
        now = format_time()
        update = ordinal_status(view, key, sts, leader_pods, worker_sets, now, memo)
        return await self._finish(view, _with_scheduling(view, update, scheduling, now), leader)

    # -- Hash: a leader Deployment ------------------------------------------------------

    async def _reconcile_hashed(self, view: LwsView, revisions: list[JSON]) -> Result | None:
        leader = await self._leader_revision(view, self.caches.deployments, revisions)
        if leader is None:
            return Result(requeue_after=DELETING_REQUEUE)
        # A Hash group's key is drawn when its leader is admitted: its PodGroup follows
        # the leader, so the pass plans none ahead.
        scheduling = await self._schedule(view, [])
        if scheduling is not None and scheduling.blocked:
            return await self._blocked(view, scheduling)
        body = leader_deployment(view, leader.key)
        await self._apply_leader_workload(view, DEPLOYMENTS, body, leader)
        await self._ensure_shared_service(view)
        leader_pods, _ = self._groups(view)
        held = self.held.get(f"{view.namespace}/{view.name}")
        memo = self._memo(view)
        now = format_time()
        update = hash_status(view, leader.key, leader_pods, now, held=held, memo=memo)
        return await self._finish(view, _with_scheduling(view, update, scheduling, now), leader)

    # -- Workload-Aware Scheduling ----------------------------------------------------

    async def _schedule(
        self, view: LwsView, planned: list[GroupRevision]
    ) -> SchedulingOutcome | None:
        if self.scheduler is not None:
            return await self.scheduler.reconcile(view, planned)
        if scheduling_of(view) is None:
            return None
        return support_refusal(self.options.scheduling)

    async def _blocked(self, view: LwsView, outcome: SchedulingOutcome) -> Result | None:
        """The leader workload waits; the condition and an event say why."""
        old = view.obj.get("status") or {}
        conditions = with_condition(
            old.get("conditions") or [], outcome.condition(view.generation, format_time())
        )
        # Holding the workload is this pass's answer to the spec, so the status says
        # which generation it answers, as a full pass's does (docs/upstream-deviations.md,
        # "A held LeaderWorkerSet reports the generation it answers").
        status = {**old, "conditions": conditions, "observedGeneration": view.generation}
        if status_changed(old, status):
            if not await self._write_status(view, status):
                return Result(requeue=True)
            if conditions != (old.get("conditions") or []):
                failed = ev.workload_scheduling_failed(outcome.reason, outcome.message)
                record(self.recorder, view.obj, failed)
        if outcome.requeue_after is not None:
            return Result(requeue_after=outcome.requeue_after)
        return None

    # -- shared steps ------------------------------------------------------------------

    async def _leader_revision(
        self, view: LwsView, informer: Informer, revisions: list[JSON]
    ) -> _LeaderRevision | None:
        """The leader workload as cached and the revision it is to run (made now if
        the spec changed); None while that workload is being deleted."""
        cached: JSON | None = informer.get(view.namespace, view.name)
        if cached is not None and meta_of(cached).get("deletionTimestamp"):
            # Deletion first, ownership after: a workload still being deleted may be a
            # predecessor's (an LWS deleted and made again under its name), and that
            # is a wait for the garbage collector, not an error.
            return None
        live = self._owned(cached, view)
        revision = await self._current_revision(view, live, revisions)
        updated = rev.detect_update(view.obj, live, revision, revisions)
        if updated is not None:
            revision = await self._revision_for_update(view, updated, revisions)
        key = revision_key_of(revision)
        return _LeaderRevision(live, revision, key, updated is not None, revisions)

    async def _apply_leader_workload(
        self, view: LwsView, resource: Resource, body: JSON, leader: _LeaderRevision
    ) -> None:
        """Apply the leader StatefulSet or Deployment; an event when this process
        creates it, or when the API server refuses it."""
        created = leader.live is None
        first_apply = created and not self._applied_before(resource, body)
        hash_mode = view.hash_mode
        try:
            await self._apply(resource, body, leader.live)
        except ApiError as exc:
            failure = ev.leader_create_failed if created else ev.leader_update_failed
            record(self.recorder, view.obj, failure(view.name, exc.message, hash_mode=hash_mode))
            raise
        if first_apply:
            related = object_reference(leader.revision)
            record(
                self.recorder, view.obj, ev.leader_created(view.name, related, hash_mode=hash_mode)
            )

    def _memo(self, view: LwsView) -> ObservationMemo:
        return self._observations.setdefault(f"{view.namespace}/{view.name}", {})

    def _owned(self, obj: JSON | None, view: LwsView) -> JSON | None:
        if obj is None:
            return None
        owner = controller_ref(obj)
        if owner is not None and owner.get("uid") != view.uid:
            raise ReconcileError(
                f"{obj.get('kind', 'object')} {view.namespace}/{view.name} exists and is "
                f"controlled by {owner.get('kind')} {owner.get('name')}, not by this "
                "LeaderWorkerSet"
            )
        return obj

    def _groups(self, view: LwsView) -> tuple[list[JSON], list[JSON]]:
        leaders = self.caches.leaders_of(view.namespace, view.name)
        statefulsets = LwsCaches.of_lws(self.caches.statefulsets, view.namespace, view.name)
        # labels_of inline: this runs over every group's StatefulSet on each pass.
        group = c.LABEL_GROUP_INDEX
        workers = [s for s in statefulsets if group in (s["metadata"].get("labels") or ())]
        return leaders, workers

    async def _current_revision(
        self, view: LwsView, leader_workload: JSON | None, revisions: list[JSON]
    ) -> JSON:
        choice = rev.current_revision(view.obj, leader_workload, revisions)
        if not choice.create:
            return choice.revision
        if leader_workload is not None:
            # Adopting a workload whose revision we do not see writes the live
            # spec under its key. A revision cache that merely lags must not make us do
            # that, so ask the API server first; this path is rare.
            key = revision_key_of(choice.revision)
            stored = await self._stored_revision(view, key)
            if stored is not None:
                revisions.append(stored)
                return stored
        created, new = await self._create_revision(view, choice.revision, revisions)
        if new and choice.event is not None:
            record(self.recorder, view.obj, choice.event)
        return created

    async def _stored_revision(self, view: LwsView, key: str) -> JSON | None:
        selector = f"{c.LABEL_SET_NAME}={view.name},{c.LABEL_TEMPLATE_REVISION_HASH}={key}"
        answer = await self.client.list(
            CONTROLLER_REVISIONS, view.namespace, label_selector=selector
        )
        return rev.find_revision(view.obj, answer.get("items", []), key)

    async def _revision_for_update(
        self, view: LwsView, proposed: JSON, revisions: list[JSON]
    ) -> JSON:
        """The revision of a changed spec: one we already made for it (seen through a
        leader workload the cache has not caught up with), else a new one."""
        key = revision_key_of(proposed)
        existing = rev.find_revision(view.obj, revisions, key)
        if existing is not None and rev.same_content(view.obj, proposed, existing):
            return existing
        created, new = await self._create_revision(view, proposed, revisions)
        if new:
            record(self.recorder, view.obj, ev.revision_for_update(key, object_reference(created)))
        return created

    async def _create_revision(
        self, view: LwsView, revision: JSON, revisions: list[JSON]
    ) -> tuple[JSON, bool]:
        """(the revision, whether this call created it)."""
        try:
            created = await self.client.create(CONTROLLER_REVISIONS, revision)
        except ApiError as exc:
            if not exc.already_exists:
                raise
            # Names carry the revision number, so a stale cache re-creating the same
            # revision collides by name instead of making a duplicate.
            meta = revision["metadata"]
            existing = await self.client.get(CONTROLLER_REVISIONS, meta["name"], meta["namespace"])
            if not self._predecessors(existing, revision, view):
                revisions.append(existing)
                return existing, False
            # A LeaderWorkerSet deleted and made again under its name collides with the
            # old one's revision until the collector removes it, and the new groups'
            # pods would wait for a revision of their own: the garbage goes now.
            await self._delete_predecessors(CONTROLLER_REVISIONS, existing)
            created = await self.client.create(CONTROLLER_REVISIONS, revision)
        revisions.append(created)
        return created, True

    @staticmethod
    def _predecessors(existing: JSON, proposed: JSON, view: LwsView) -> bool:
        """`existing` belongs to an earlier LeaderWorkerSet of this name. Made after this
        one, it would be a later one's, and this view stale."""
        made = str(meta_of(existing).get("creationTimestamp") or "")
        return left_by_predecessor(existing, proposed) and made <= str(
            meta_of(view.obj).get("creationTimestamp") or made
        )

    async def _delete_predecessors(self, resource: Resource, existing: JSON) -> None:
        """By UID and at the version read: one orphaned since (`kubectl delete lws
        --cascade=orphan` keeps it on purpose) is not the predecessor's any more."""
        version = meta_of(existing).get("resourceVersion")
        await delete_exact(self.client, resource, existing, resource_version=version)

    @staticmethod
    def _applied_key(resource: Resource, body: JSON) -> str:
        meta = body["metadata"]
        return f"{resource.plural}/{meta['namespace']}/{meta['name']}"

    def _applied_before(self, resource: Resource, body: JSON) -> bool:
        """This process applied the object already (its cache may not show it yet)."""
        return self.applied.known(self._applied_key(resource, body))

    async def _apply(self, resource: Resource, body: JSON, live: JSON | None) -> JSON | None:
        cache_key = self._applied_key(resource, body)
        if not self.applied.needs_apply(cache_key, body, live):
            return None
        answer = await self.client.apply(resource, body, field_manager=c.FIELD_MANAGER)
        self.applied.record(cache_key, body, answer)
        return answer

    async def _ensure_shared_service(self, view: LwsView) -> None:
        if not wants_shared_service(view):
            return
        body = shared_service(view)
        cached = self.caches.services.get(view.namespace, view.name)
        if cached is not None:
            if not self._predecessors(cached, body, view):
                return
            # The old one's selector matches the new groups' pods, but it goes with
            # its owner: made again now rather than after the collector's pass.
            await self._delete_predecessors(SERVICES, cached)
        try:
            await self.client.create(SERVICES, body)
        except ApiError as exc:
            if exc.already_exists:
                return
            record(self.recorder, view.obj, ev.service_create_failed(exc.message))
            raise

    async def _write_status(self, view: LwsView, status: JSON) -> bool:
        """Replace the status; False on a conflict (the cache is behind, and the next
        event brings the fresh object) or when the LWS is gone (its deletion's event
        ends the matter; an error line would only report a race)."""
        body = dict(view.obj)
        body["status"] = status
        try:
            await self.client.replace(LEADERWORKERSETS, body, subresource="status")
        except ApiError as exc:
            if exc.conflict or exc.not_found:
                return False
            raise
        return True

    async def _finish(
        self, view: LwsView, update: ScheduledUpdate, leader: _LeaderRevision
    ) -> Result | None:
        result = await self._finish_status(view, update.status, leader)
        after = update.requeue_after
        if result is None and after is not None:
            return Result(requeue_after=after)
        return result

    async def _finish_status(
        self, view: LwsView, update: StatusUpdate, leader: _LeaderRevision
    ) -> Result | None:
        key, revisions = leader.key, [*leader.revisions, leader.revision]
        self.group_metrics.refresh(self.caches, view, key)
        for pod in update.skipped_leaders:
            log.warning(
                "leader pod has no usable group index; left out of status",
                extra={"lws": f"{view.namespace}/{view.name}", "pod": pod},
            )
        if update.changed:
            if not await self._write_status(view, update.status):
                return Result(requeue=True)
            if update.event is not None:
                record(self.recorder, view.obj, update.event)
        if update.done:
            for old in rev.revisions_to_delete(view.obj, revisions, key):
                meta = old["metadata"]
                try:
                    await self.client.delete(CONTROLLER_REVISIONS, meta["name"], meta["namespace"])
                except ApiError as exc:
                    if not exc.not_found:
                        raise
        return None
