"""The DisaggregatedSet reconciler: acts on `disaggregatedset.rollout`'s decisions.

Per pass, in upstream v0.10.0's order: the RoleScalers of External roles (so the
roles' targets are settled), the LeaderWorkerSets of removed slices and of a legacy
slice 0 to make anew, then each slice on its own (drained revisions deleted, a
rollout step or the steady state, then its Services), then the RoleScalers' and the
set's status. It reads the watch caches only, and writes only what differs: a
repeated pass over the same cache state makes the same writes, which are no-ops.

LeaderWorkerSets are created whole and then only patched (replicas, the
initial-replicas annotation), as upstream does, so either controller can take over
the other's objects.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import (
    compute_revision,
    legacy_lws_name,
    scaler_name,
    slice_label_matches,
)
from leaderworkerset.api.disaggregatedset.objects import leaderworkerset, role_scaler
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.objects import JSON, format_time, meta_of, name_of, uid_of
from leaderworkerset.api.resources import (
    DISAGGREGATEDSETS,
    LEADERWORKERSETS,
    ROLE_SCALERS,
    SERVICES,
    Resource,
)
from leaderworkerset.controllers.disaggregatedset import events as ev
from leaderworkerset.controllers.disaggregatedset.caches import DsCaches
from leaderworkerset.controllers.disaggregatedset.metrics import DisaggregatedSetMetrics
from leaderworkerset.controllers.disaggregatedset.observed import observed_lws
from leaderworkerset.controllers.disaggregatedset.rollout import (
    ObservedLWS,
    SlicePlan,
    plan_set,
    target_replicas,
)
from leaderworkerset.controllers.disaggregatedset.scalers import (
    controlled_by,
    observed_groups,
    plan_scalers,
    scaler_status,
    spec_replicas,
)
from leaderworkerset.controllers.disaggregatedset.services import (
    plan_slice_services,
    removed_slice_services,
)
from leaderworkerset.controllers.disaggregatedset.status import role_counts, set_status
from leaderworkerset.controllers.events import Event, record
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.controller import Result
from leaderworkerset.runtime.events import EventRecorder

log = logging.getLogger(__name__)


@dataclass
class _Pass:
    """One reconcile of one set: what it read and what it decided so far."""

    obj: JSON
    ds: DisaggregatedSet
    revision: str
    lwss: list[JSON]
    services: list[JSON]
    scalers: dict[str, JSON] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    # What the decisions read of each of `lwss`, read once per pass, by name.
    observed: dict[str, ObservedLWS] = field(init=False)
    rolling_out: bool = False
    requeue_after: float | None = None
    errors: list[Exception] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.observed = {name_of(x): observed_lws(x) for x in self.lwss}

    @property
    def namespace(self) -> str:
        return self.ds.namespace

    def live(self, slice_index: int) -> list[JSON]:
        return [
            x
            for x in self.lwss
            if name_of(x) not in self.deleted
            and slice_label_matches(meta_of(x).get("labels") or {}, slice_index)
        ]


@dataclass
class DisaggregatedSetReconciler:
    client: ApiClient
    caches: DsCaches
    recorder: EventRecorder | None = None
    metrics: DisaggregatedSetMetrics = field(default_factory=DisaggregatedSetMetrics)

    async def __call__(self, key: str) -> Result | None:
        obj = self.caches.sets.get_by_key(key)
        if obj is None or meta_of(obj).get("deletionTimestamp"):
            namespace, _, name = key.partition("/")
            self.metrics.forget(namespace, name)
            # Garbage collection removes what the set owned.
            return None
        ds, errors = DisaggregatedSet.from_json(obj)
        if errors:
            log.error("DisaggregatedSet %s cannot be read: %s", key, "; ".join(map(str, errors)))
            return None
        try:
            return await self._reconcile(obj, ds)
        except ApiError as exc:
            if exc.namespace_terminating:
                return None
            raise

    async def _reconcile(self, obj: JSON, ds: DisaggregatedSet) -> Result | None:
        namespace = ds.namespace
        run = _Pass(
            obj,
            ds,
            compute_revision(ds.roles),
            DsCaches.of_set(self.caches.leaderworkersets, namespace, ds.name),
            DsCaches.of_set(self.caches.services, namespace, ds.name),
        )
        await self._reconcile_scalers(run)
        replicas = {role: spec_replicas(s) for role, s in run.scalers.items()}
        plan = plan_set(ds, run.revision, [run.observed[name_of(x)] for x in run.lwss], replicas)
        for name in plan.delete_services:
            await self._delete(SERVICES, namespace, name)
        await self._delete_set_level(run, plan.delete)
        slices = len(plan.slices)
        for name in removed_slice_services(run.services, slices):
            await self._delete(SERVICES, namespace, name)
        for index, slice_plan in enumerate(plan.slices):
            try:
                await self._reconcile_slice(run, index, slice_plan)
            except ApiError as exc:
                # Slices are independent: one failing does not hold up the others.
                run.errors.append(exc)
        await self._write_scaler_status(run)
        await self._write_status(run, replicas)
        if run.errors:
            raise run.errors[0]
        return Result(requeue_after=run.requeue_after) if run.requeue_after else None

    # -- RoleScalers -------------------------------------------------------------------

    async def _reconcile_scalers(self, run: _Pass) -> None:
        ds, uid = run.ds, uid_of(run.obj)
        cached = DsCaches.of_set(self.caches.scalers, run.namespace, ds.name)
        # Someone else's RoleScaler under a name the set wants, without the set's label,
        # is not in the index; it is in the cache, so the conflict is seen without a
        # create and a GET. (One of the set's own that lost its label is left to the
        # create, whose conflict finds it and keeps it bound.)
        indexed = {name_of(s) for s in cached}
        for spec in ds.roles:
            name = scaler_name(ds.name, spec.name or "")
            found = self.caches.scalers.get(run.namespace, name) if spec.external else None
            if found is not None and name not in indexed and not controlled_by(found, uid):
                cached.append(found)
        plan = plan_scalers(ds, uid, cached, run.lwss)
        run.scalers = dict(plan.bound)
        by_name = {name_of(s): s for s in cached}
        for name in plan.delete:
            role = str((meta_of(by_name[name]).get("labels") or {}).get(c.LABEL_ROLE, ""))
            await self._delete(ROLE_SCALERS, run.namespace, name)
            self._record(run, ev.scaler_deleted(name, role))
        for role in plan.conflicts:
            self._record(run, ev.scaler_conflict(f"{ds.name}-{role}"))
        for role, seed in plan.create.items():
            body = role_scaler(ds, role, seed)
            try:
                run.scalers[role] = await self.client.create(ROLE_SCALERS, body)
                self._record(run, ev.scaler_created(name_of(body), role))
            except ApiError as exc:
                if not exc.already_exists:
                    raise
                found = await self.client.get(ROLE_SCALERS, name_of(body), run.namespace)
                if controlled_by(found, uid):
                    run.scalers[role] = found
                else:
                    self._record(run, ev.scaler_conflict(name_of(body)))

    async def _write_scaler_status(self, run: _Pass) -> None:
        now = format_time()
        for role, scaler in run.scalers.items():
            groups = observed_groups(role, run.lwss)
            status = scaler_status(scaler, run.ds.name, role, groups, now)
            if status is not None:
                await self.client.patch(
                    ROLE_SCALERS,
                    name_of(scaler),
                    {"status": status},
                    namespace=run.namespace,
                    subresource="status",
                )

    # -- LeaderWorkerSets ---------------------------------------------------------------

    async def _delete_set_level(self, run: _Pass, names: Sequence[str]) -> None:
        """Removed slices' LeaderWorkerSets and legacy slice-0 ones to make anew."""
        legacy = {legacy_lws_name(run.ds.name, run.revision, r.name or "") for r in run.ds.roles}
        by_name = {name_of(x): x for x in run.lwss}
        for name in names:
            await self._delete(LEADERWORKERSETS, run.namespace, name)
            run.deleted.add(name)
            if name in legacy and name in by_name:
                self._record(run, ev.legacy_lws_deleted(name))
            else:
                label = (meta_of(by_name.get(name)).get("labels") or {}).get(c.LABEL_SLICE)
                self._record(run, ev.removed_slice_lws_deleted(name, int(label or 0)))

    async def _reconcile_slice(self, run: _Pass, index: int, plan: SlicePlan) -> None:
        members = {name: run.observed[name] for name in map(name_of, run.live(index))}
        for name in plan.delete:
            await self._delete(LEADERWORKERSETS, run.namespace, name)
            run.deleted.add(name)
            self._record(run, ev.drained_lws_deleted(name))
        for name, value in plan.annotate.items():
            await self._annotate(run, members.get(name), name, value)
        if plan.rolling_out and plan.create:
            self._record(run, ev.rolling_update_started(run.revision))
        await self._create(run, index, plan.create)
        for name, replicas in plan.scale.items():
            await self._scale(run, members.get(name), name, replicas)
        if plan.complete:
            self._record(run, ev.rolling_update_completed(run.revision))
        if plan.step is not None:
            self.metrics.rollout_steps.labels(run.namespace, run.ds.name).inc()
        run.rolling_out = run.rolling_out or (plan.rolling_out and not plan.complete)
        if plan.requeue_after and (
            run.requeue_after is None or plan.requeue_after < run.requeue_after
        ):
            run.requeue_after = plan.requeue_after
        await self._reconcile_services(run, index)

    async def _annotate(self, run: _Pass, lws: ObservedLWS | None, name: str, value: int) -> None:
        if lws is not None and lws.initial_replicas == value:
            return
        patch = {"metadata": {"annotations": {c.ANNOTATION_INITIAL_REPLICAS: str(value)}}}
        try:
            await self.client.patch(LEADERWORKERSETS, name, patch, namespace=run.namespace)
        except ApiError as exc:
            # Upstream carries on without the annotation; the drain then starts from
            # the LeaderWorkerSet's current replicas.
            log.error("initial-replicas annotation on %s/%s: %s", run.namespace, name, exc)

    async def _create(self, run: _Pass, index: int, create: dict[str, int]) -> None:
        specs = {role.name: role for role in run.ds.roles}
        for role, replicas in create.items():
            body = leaderworkerset(run.ds, specs[role], index, run.revision, replicas)
            try:
                await self.client.create(LEADERWORKERSETS, body)
            except ApiError as exc:
                if not exc.already_exists:
                    raise

    async def _scale(self, run: _Pass, lws: ObservedLWS | None, name: str, replicas: int) -> None:
        before = lws.desired if lws is not None else 0
        patch = {"spec": {"replicas": replicas}}
        await self.client.patch(LEADERWORKERSETS, name, patch, namespace=run.namespace)
        role = lws.role if lws is not None else ""
        self._record(run, ev.scaling(role, name, before, replicas))

    # -- Services -------------------------------------------------------------------------

    async def _reconcile_services(self, run: _Pass, index: int) -> None:
        plan = plan_slice_services(run.ds, index, run.revision, run.live(index), run.services)
        for body in plan.create:
            try:
                await self.client.create(SERVICES, body)
            except ApiError as exc:
                if not exc.already_exists:
                    raise
        for name in plan.delete:
            await self._delete(SERVICES, run.namespace, name)

    # -- the set's status and metrics ---------------------------------------------------------

    async def _write_status(self, run: _Pass, scaler_replicas: dict[str, int]) -> None:
        ds = run.ds
        roles = [role.name or "" for role in ds.roles]
        live = [x for x in run.lwss if name_of(x) not in run.deleted]
        counts = role_counts(roles, run.revision, live)
        slices = (ds.spec.slices if ds.spec is not None else None) or c.DEFAULT_SLICES
        targets = {
            role: slices * target_replicas(ds, role, scaler_replicas, counts[role].updated)
            for role in roles
        }
        self.metrics.observe(
            ds.namespace,
            ds.name,
            {r: (targets[r], counts[r].ready, counts[r].updated) for r in roles},
        )
        current = run.obj.get("status") or {}
        wanted = set_status(ds, counts, targets, run.rolling_out, current, format_time())
        if _same_status(current, wanted):
            return
        try:
            await self.client.patch(
                DISAGGREGATEDSETS,
                ds.name,
                {"status": wanted},
                namespace=ds.namespace,
                subresource="status",
            )
        except ApiError as exc:
            # Deleted since the pass began: its deletion's event ends the matter.
            if not exc.not_found:
                raise

    # -- helpers --------------------------------------------------------------------------------

    async def _delete(self, resource: Resource, namespace: str, name: str) -> None:
        try:
            await self.client.delete(resource, name, namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise

    def _record(self, run: _Pass, event: Event) -> None:
        record(self.recorder, run.obj, event)


def _same_status(current: JSON, wanted: JSON) -> bool:
    return all(current.get(k) == v for k, v in wanted.items())
