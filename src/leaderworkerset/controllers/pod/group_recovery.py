"""Before the restart policy recreates a group: the restart budget and the group back-off.

`GroupRecovery.admit` answers whether a group the restart policy wants to recreate may be
recreated now, must wait (the back-off; the reconciler is woken when the wait ends), or
must not be recreated at all (its `maxGroupRestarts` is used up). A recreation it lets
through is recorded on the LeaderWorkerSet before the leader is deleted, so a controller
that crashes in between counts it anyway (upstream counts first too).

While a group waits it stays as it is: its pods keep their places and the kubelet keeps
restarting the failed container in place (with its own CrashLoopBackOff). Holding the old
group rather than gating its replacement keeps one mechanism for both identities and both
replacement policies, and keeps the capacity the group will need again: torn down, its
nodes could be taken by other workloads while it waits (docs/group-recovery.md).

Writes: nothing at all while neither the budget nor the back-off is on (upstream's
behaviour); otherwise a merge patch of the LeaderWorkerSet's annotations per recreation, with its
resourceVersion as a precondition so that two groups recorded at once never lose each
other's record, the recreations of many groups at once coalesced into a few patches
(`record_writes.py`); and the leader pod's `group-restart-count`, as upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, meta_of, timestamp_of, uid_of
from leaderworkerset.api.resources import PODS
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.pod.record_writes import RecordWriter
from leaderworkerset.group.readiness import pod_finished, pod_terminating
from leaderworkerset.group.recreations import (
    BackoffPolicy,
    GroupRecords,
    claimable,
    exhausted,
    format_epoch,
    leader_count,
    read_records_leniently,
)
from leaderworkerset.group.roles import group_index
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.events import object_reference

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    proceed: bool
    event: ev.Event | None = None
    # Seconds until the group may be recreated (the back-off), for the wake-up.
    wait: float | None = None


class RecoveryMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.backing_off = Gauge(
            "lws_groups_backing_off",
            "Groups whose recreation waits out the group back-off",
            ["namespace", "name"],
            registry=registry,
        )
        self.delayed = Counter(
            "lws_group_recreations_delayed_total",
            "Group recreations the group back-off made wait",
            ["namespace", "name"],
            registry=registry,
        )
        self.exhausted = Counter(
            "lws_group_restart_budget_exhausted_total",
            "Groups not recreated because they used up maxGroupRestarts",
            ["namespace", "name"],
            registry=registry,
        )

    def forget(self, namespace: str, name: str) -> None:
        """The LeaderWorkerSet is gone: its series go with it."""
        for family in (self.backing_off, self.delayed, self.exhausted):
            with contextlib.suppress(KeyError):
                family.remove(namespace, name)


@dataclass
class _Hold:
    namespace: str
    name: str
    due: float


@dataclass
class GroupRecovery:
    client: ApiClient
    caches: LwsCaches
    policy: BackoffPolicy = field(default_factory=BackoffPolicy)
    metrics: RecoveryMetrics = field(default_factory=RecoveryMetrics)
    clock: Callable[[], float] = time.time
    # Leader UID -> its group's wait, while the back-off holds it.
    holds: dict[str, _Hold] = field(default_factory=dict)
    # Leaders whose used-up budget was already said (once each, not per pod event).
    _told_exhausted: set[str] = field(default_factory=set)
    # Leaders whose recreation was recorded (until they are gone).
    _admitted: set[str] = field(default_factory=set)
    # One decision at a time per leader: two pods of a group failing together must not
    # both record a recreation.
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    # Record changes of one LeaderWorkerSet go out together (many groups failing at once).
    writer: RecordWriter = field(init=False)

    def __post_init__(self) -> None:
        self.writer = RecordWriter(self.client, _stored_records)

    def active(self, view: LwsView) -> bool:
        return view.template.max_group_restarts is not None or self.policy.enabled

    def holding(self, pod: JSON, view: LwsView) -> bool:
        """A leader whose group's recreation waits out the back-off: its wake-up must
        reach the restart policy even though the pod that failed was another. Also
        after a controller restart, from the record's pending mark."""
        uid = uid_of(pod)
        if uid in self.holds:
            return True
        if not self.active(view):
            return False
        record = _records(view.annotations, view).recreations.get(group_index(pod) or "")
        return record is not None and record.pending == uid

    def release(self, pod: JSON) -> None:
        """The group no longer waits (its restart policy stopped recreating groups)."""
        self._release(pod)

    def lock(self, leader: JSON) -> asyncio.Lock:
        return self._locks.setdefault(uid_of(leader), asyncio.Lock())

    def forget(self, leader: JSON) -> None:
        """The leader is gone: nothing of its group waits any more."""
        uid = uid_of(leader)
        self._locks.pop(uid, None)
        self._told_exhausted.discard(uid)
        self._admitted.discard(uid)
        hold = self.holds.pop(uid, None)
        if hold is not None:
            self._publish(hold.namespace, hold.name)

    async def admit(self, view: LwsView, leader: JSON) -> Verdict:
        """Whether the group of `leader` may be recreated now (and, if so, recorded)."""
        if not self.active(view) or uid_of(leader) in self._admitted:
            # Admitted and recorded already: a DELETE that failed is retried without
            # counting (or waiting for) the same recreation twice.
            return Verdict(True)
        group = group_index(leader) or ""
        records = _records(view.annotations, view)
        budget = view.template.max_group_restarts
        count = max(records.count(group), leader_count(leader))
        if exhausted(count, budget):
            assert budget is not None
            return await self._refuse(view, leader, group, count, budget)
        now = self.clock()
        record = records.recreations.get(group)
        due = self.policy.due(record, now)
        if due > now:
            recent = self.policy.recent(record, now)
            return await self._hold(view, leader, group, recent=recent, due=due, now=now)
        pod_count = leader_count(leader)

        def recorded(fresh: GroupRecords) -> GroupRecords:
            # From the records as they are when written (a conflict re-reads them).
            nxt = self.policy.next_record(fresh.recreations.get(group), now)
            counted = max(fresh.count(group), pod_count) + 1 if budget is not None else None
            return fresh.with_recreation(group, nxt, counted)

        await self._write(view, recorded)
        self._release(leader)
        self._admitted.add(uid_of(leader))
        return Verdict(True)

    async def _refuse(
        self, view: LwsView, leader: JSON, group: str, count: int, budget: int
    ) -> Verdict:
        if count == budget:
            # Past the budget: what the LeaderWorkerSet's Failed condition reads, on the
            # LeaderWorkerSet and, as upstream, on the leader pod.
            await self._write(
                view, lambda r: GroupRecords({**r.counts, group: budget + 1}, r.recreations)
            )
            await self._annotate_leader(leader, budget + 1)
        uid = uid_of(leader)
        if uid in self._told_exhausted:
            return Verdict(False)
        self._told_exhausted.add(uid)
        self.metrics.exhausted.labels(view.namespace, view.name).inc()
        return Verdict(
            False, ev.max_group_restarts_exceeded(group, budget, object_reference(leader))
        )

    async def _hold(
        self, view: LwsView, leader: JSON, group: str, *, recent: int, due: float, now: float
    ) -> Verdict:
        uid = uid_of(leader)
        first = uid not in self.holds
        self.holds[uid] = _Hold(view.namespace, view.name, due)
        if not first:
            return Verdict(False, wait=due - now)

        def marked(fresh: GroupRecords) -> GroupRecords:
            record = fresh.recreations.get(group)
            if record is None or record.pending == uid:
                return fresh
            pending = dataclasses.replace(record, pending=uid)
            return GroupRecords(fresh.counts, {**fresh.recreations, group: pending})

        await self._write(view, marked)
        self.metrics.delayed.labels(view.namespace, view.name).inc()
        self._publish(view.namespace, view.name)
        event = ev.group_backoff(
            group,
            str(meta_of(leader).get("name")),
            recent,
            self.policy.delay(recent),
            format_epoch(due),
            object_reference(leader),
        )
        return Verdict(False, event, due - now)

    def _release(self, leader: JSON) -> None:
        hold = self.holds.pop(uid_of(leader), None)
        if hold is not None:
            self._publish(hold.namespace, hold.name)

    def _publish(self, namespace: str, name: str) -> None:
        waiting = sum(1 for h in self.holds.values() if (h.namespace, h.name) == (namespace, name))
        self.metrics.backing_off.labels(namespace, name).set(waiting)

    # --- Hash mode: a replacement takes over its predecessor's records ------------------
    async def inherit(self, view: LwsView, leader: JSON) -> None:
        """A Hash leader with no record of its own takes over the record of a recreated
        group that has no live leader any more, if it was made after that recreation."""
        if not view.hash_mode or not self.active(view):
            return
        records = _records(view.annotations, view)
        group = group_index(leader) or ""
        if not records.recreations or group in records.recreations or group in records.counts:
            return
        created = timestamp_of(meta_of(leader).get("creationTimestamp"))
        if created is None or all(r.last > created + 1 for r in records.recreations.values()):
            # Older than every recreation (most leaders, most of the time): it replaces
            # none of them, and the leaders need not be looked at.
            return
        live = _live_groups(self.caches.leaders_of(view.namespace, view.name))
        budget = view.template.max_group_restarts

        def inherited(fresh: GroupRecords) -> GroupRecords:
            # Chosen from the records as written: another new leader may have taken the
            # oldest one meanwhile.
            if group in fresh.recreations or group in fresh.counts:
                return fresh
            old = claimable(fresh, live, created, budget)
            return fresh if old is None else fresh.moved(old, group)

        await self._write(view, inherited)

    async def sync_leader_count(self, view: LwsView, leader: JSON) -> None:
        """Upstream keeps the group's count on its current leader pod too."""
        if view.template.max_group_restarts is None:
            return
        count = _records(view.annotations, view).count(group_index(leader) or "")
        if count > leader_count(leader):
            await self._annotate_leader(leader, count)

    # --- writes ---------------------------------------------------------------------------
    async def _write(self, view: LwsView, change: Callable[[GroupRecords], GroupRecords]) -> None:
        await self.writer.write(view, change)

    async def _annotate_leader(self, leader: JSON, count: int) -> None:
        meta = meta_of(leader)
        patch = {
            "metadata": {
                "uid": meta.get("uid"),
                "annotations": {c.ANNOTATION_GROUP_RESTART_COUNT: str(count)},
            }
        }
        try:
            await self.client.patch(
                PODS, str(meta["name"]), patch, namespace=str(meta["namespace"])
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise


def _stored_records(obj: JSON, view: LwsView) -> GroupRecords:
    return _records(meta_of(obj).get("annotations") or {}, view)


def _records(annotations: Mapping[str, str], view: LwsView) -> GroupRecords:
    records, problems = read_records_leniently(annotations)
    for problem in problems:
        # Hand-edited into something we cannot read: that record starts afresh rather
        # than stop recreating groups; the next one written replaces it.
        log.warning("ignoring a group record of %s/%s: %s", view.namespace, view.name, problem)
    return records


def _live_groups(leaders: list[JSON]) -> set[str]:
    return {
        g
        for p in leaders
        if not pod_terminating(p) and not pod_finished(p) and (g := group_index(p))
    }
