"""Group lifecycle metrics: how long groups take to become Ready, how often and why
they are recreated and how long they take to recover, how long a rollout takes, how
long replacements wait behind their scheduling gate, and how many groups are in each
state.

Every family is labelled by namespace, LeaderWorkerSet name and group identity
mode only. Group keys, pods and nodes are left out on purpose: they change with
every recreation and would make the number of series grow without bound.

The reconcilers report what they do themselves (a group restarted by its restart
policy, a gate removed); what other actors do to groups (a StatefulSet or
ReplicaSet deleting a leader for a rollout or a scale-down, a user deleting one,
a node going away) is read from the pod cache's events by :meth:`count_losses`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.types import group_identity_of, is_hash_mode
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import (
    JSON,
    condition_of,
    meta_of,
    name_of,
    namespace_of,
    revision_key_of,
    timestamp_of,
    uid_of,
)
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.group_timing import (
    RECOVERED_CAUSES,
    Cause,
    Recovering,
    failure_time,
    match_recovery,
)
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.readiness import container_restarted, pod_finished, pod_terminating
from leaderworkerset.group.roles import group_index, is_leader, lws_name
from leaderworkerset.group.state import (
    POD_STATES,
    Group,
    GroupState,
    group_state,
    groups_of,
)
from leaderworkerset.runtime.controller import Controller

LABELS = ("namespace", "leaderworkerset", "group_identity")

# From seconds (a pause container on an idle node) to an hour (large images, many
# accelerators to attach).
READY_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
GATED_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# A recovery also waits out the old group's termination grace period (30 s by default).
RECOVERY_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# A rollout is a sequence of group recreations: up to hours for thousands of groups.
ROLLOUT_BUCKETS = (5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)

# How long a counted leader loss is remembered when its final deletion is never seen
# (a relist that skipped it): far longer than any termination grace period in use.
LOST_LEADER_MEMORY = 3600.0

# DisruptionTarget reasons of pods that went with their node.
_NODE_LOST_REASONS = ("DeletionByTaintManager", "DeletionByPodGC")


def _disruption_reason(pod: JSON) -> str | None:
    condition = condition_of(pod, "DisruptionTarget")
    if condition is None or condition.get("status") != "True":
        return None
    return str(condition.get("reason") or "")


def loss_cause(pod: JSON) -> Cause | None:
    """What the pod itself says about why it is going: its node was lost, or it
    failed, was evicted or preempted. None when it says nothing (deleted by a
    controller or a user)."""
    reason = _disruption_reason(pod)
    status_reason = (pod.get("status") or {}).get("reason")
    if reason in _NODE_LOST_REASONS or status_reason == "NodeLost":
        return Cause.NODE_LOST
    if reason is not None or status_reason == "Evicted" or pod_finished(pod):
        return Cause.POD_FAILED
    return None


def restart_cause(pod: JSON) -> Cause:
    """Why a restart policy recreates a group, from the pod that made it do so."""
    if pod_terminating(pod) or pod_finished(pod):
        cause = loss_cause(pod)
        if cause is not None:
            return cause
        # Deleted by someone: the leader is the group's identity; a worker is a pod
        # of the group that was lost.
        return Cause.LEADER_DELETED if is_leader(pod) else Cause.POD_FAILED
    if container_restarted(pod):
        return Cause.CONTAINER_RESTART
    return Cause.POD_FAILED


def seconds_since(obj: JSON, now: float) -> float | None:
    """Seconds from the object's creationTimestamp to `now` (epoch seconds)."""
    created = timestamp_of(meta_of(obj).get("creationTimestamp"))
    return None if created is None else max(0.0, now - created)


def ready_at(group: Group, now: float) -> float:
    """When the group became Ready: the last of its pods' Ready transitions, so that
    a refresh paced behind the events still times it right. Those times have whole
    seconds, so the end of that second is taken (or `now`, if sooner, or if a pod
    does not say)."""
    times = []
    for pod in group.pods:
        ready = condition_of(pod, "Ready")
        at = timestamp_of(ready.get("lastTransitionTime")) if ready is not None else None
        if at is None:
            return now
        times.append(at)
    return min(now, max(times) + 1.0) if times else now


@dataclass
class _LwsRecord:
    """What the metrics remember of one LeaderWorkerSet between reconciles."""

    mode: str
    revision: str | None = None
    # When this process started counting the LWS's groups: a leader created since is
    # ours to time even if no refresh saw its group before it was Ready.
    since: float = 0.0
    # Leader UIDs first seen before their group was Ready (the ready time is still
    # to be observed), and those whose ready time is observed or was never ours to
    # observe (Ready before this process first saw them).
    waiting: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    # Each group's last state and counted leader UID (None when it has none alive), the
    # counts by state, and the groups whose objects changed since the last refresh
    # (None: count every group again).
    states: dict[str, tuple[GroupState, str | None]] = field(default_factory=dict)
    counts: dict[GroupState, int] = field(default_factory=lambda: dict.fromkeys(POD_STATES, 0))
    changed: set[str] | None = None
    # Groups lost (by the index they had) and not yet Ready again.
    recovering: dict[str, Recovering] = field(default_factory=dict)
    # Groups (by index) not on `revision`; when the current rollout began (None: none
    # under way); the latest time a group became Ready.
    outdated: set[str] = field(default_factory=set)
    rollout_since: float | None = None
    last_ready: float | None = None


class GroupMetrics:
    """The group metric families and what they need to remember, in one registry: the
    process's (wiring builds one on the Manager's) or, without, one of their own."""

    # One piece: the metric families, declared one after another with their help text.
    def __init__(
        self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        registry = self.registry
        self.clock = clock
        self.ready_seconds = Histogram(
            "lws_group_ready_seconds",
            "Seconds from a group's leader creation to the group first being Ready",
            LABELS,
            buckets=READY_BUCKETS,
            registry=registry,
        )
        self.recreations = Counter(
            "lws_group_recreations_total",
            "Groups taken down, by cause; all but scale_down are created again",
            (*LABELS, "cause"),
            registry=registry,
        )
        self.gated_seconds = Histogram(
            "lws_replacement_gated_seconds",
            "Seconds a replacement leader waited behind the group-replacement scheduling "
            "gate, from its creation to the gate's removal",
            LABELS,
            buckets=GATED_BUCKETS,
            registry=registry,
        )
        self.recovery_seconds = Histogram(
            "lws_group_recovery_seconds",
            "Seconds from the failure that took a group down (a container restart, a failed "
            "pod, the loss of its leader) until the group is whole and Ready again, by cause",
            (*LABELS, "cause"),
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )
        self.rollout_seconds = Histogram(
            "lws_rollout_seconds",
            "Seconds from a change of the LeaderWorkerSet's revision until every group is "
            "on it and Ready",
            LABELS,
            buckets=ROLLOUT_BUCKETS,
            registry=registry,
        )
        self.groups = Gauge(
            "lws_groups",
            "Groups of a LeaderWorkerSet by state",
            (*LABELS, "state"),
            registry=registry,
        )
        self.admissions = Counter(
            "lws_scheduling_gate_admissions_total",
            "Replacement leaders released from the group-replacement scheduling gate",
            LABELS,
            registry=registry,
        )
        self.early_releases = Counter(
            "lws_scheduling_gate_early_releases_total",
            "Replacement leaders released before the group they replace was gone, by reason",
            (*LABELS, "reason"),
            registry=registry,
        )
        self._lws: dict[tuple[str, str], _LwsRecord] = {}
        # Whether track_changes() reports which groups change (else every refresh recounts).
        self._tracking = False
        # UIDs of leaders whose loss is counted, with when.
        self._lost: dict[str, float] = {}

    # -- groups by state and time to Ready (the LWS reconciler) -------------------------

    def refresh(self, caches: LwsCaches, view: LwsView, revision: str | None) -> None:
        """Recount the groups of a LeaderWorkerSet whose current revision is `revision`,
        and observe the ready time of each group Ready for the first time.

        Once :meth:`track_changes` tracks which groups the cache events touch, only those are
        looked at again: a reconcile during a scale-up of a thousand groups no longer
        walks every pod."""
        namespace, name = view.namespace, view.name
        record = self._record(namespace, name, view.group_identity)
        labels = (namespace, name, record.mode)
        if record.revision is not None and revision is not None and revision != record.revision:
            # A new revision: a rollout begins (a later one starts the clock again).
            record.rollout_since = self.clock()
        if not self._tracking or record.changed is None or record.revision != revision:
            pods = LwsCaches.of_lws(caches.pods, namespace, name)
            statefulsets = LwsCaches.of_lws(caches.statefulsets, namespace, name)
            self.count(namespace, name, view.group_identity, revision, pods, statefulsets)
            record.changed = set()
            self._rollout_done(record, labels, view.replicas)
            return
        changed, record.changed = record.changed, set()
        now = self.clock()
        for index in changed:
            pods = caches.group_pods(namespace, name, index)
            workers = [
                sts
                for pod in pods
                if is_leader(pod)
                and (sts := caches.statefulsets.get(namespace, name_of(pod))) is not None
            ]
            found = groups_of(pods, workers)
            self._observe(record, labels, index, found[0] if found else None, now)
        self._publish(record, labels)
        self._rollout_done(record, labels, view.replicas)

    def _rollout_done(
        self, record: _LwsRecord, labels: tuple[str, str, str], replicas: int
    ) -> None:
        """Observe the rollout under way once every group is on its revision and Ready:
        at the moment the last of them became Ready (refreshes are paced behind the
        events)."""
        if record.rollout_since is None:
            return
        ready = record.counts[GroupState.READY]
        if ready != replicas or len(record.states) != replicas or record.outdated:
            return
        end = record.last_ready
        if end is None or end < record.rollout_since:
            end = self.clock()
        self.rollout_seconds.labels(*labels).observe(max(0.0, end - record.rollout_since))
        record.rollout_since = None

    def count(
        self,
        namespace: str,
        name: str,
        mode: str,
        revision: str | None,
        pods: Iterable[JSON],
        statefulsets: Iterable[JSON],
    ) -> None:
        """Count every group from scratch."""
        record = self._record(namespace, name, mode)
        record.revision = revision
        record.states.clear()
        record.outdated.clear()
        record.counts = dict.fromkeys(POD_STATES, 0)
        labels = (namespace, name, mode)
        now = self.clock()
        for group in groups_of(pods, statefulsets):
            self._observe(record, labels, group.index, group, now)
        # Leaders that are gone are forgotten, so both sets stay as large as the groups.
        live = {uid for _, uid in record.states.values() if uid is not None}
        record.waiting &= live
        record.done &= live
        self._publish(record, labels)

    def _observe(
        self,
        record: _LwsRecord,
        labels: tuple[str, str, str],
        index: str,
        group: Group | None,
        now: float,
    ) -> None:
        """Move one group (None: gone) to its new state in the record."""
        old = record.states.pop(index, None)
        state = None if group is None else group_state(group, record.revision)
        uid = None
        if group is not None and group.leader is not None and state is not GroupState.TEARING_DOWN:
            uid = uid_of(group.leader)
        if old is not None:
            record.counts[old[0]] -= 1
            if old[1] is not None and old[1] != uid:
                record.waiting.discard(old[1])
                record.done.discard(old[1])
        record.outdated.discard(index)
        if state is None or group is None:
            return
        record.counts[state] += 1
        record.states[index] = (state, uid)
        if group.revision != record.revision:
            record.outdated.add(index)
        if uid is None or uid in record.done or group.leader is None:
            return
        if state is not GroupState.READY:
            record.waiting.add(uid)
            return
        created = timestamp_of(meta_of(group.leader).get("creationTimestamp"))
        ready = ready_at(group, now)
        record.last_ready = max(record.last_ready or ready, ready)
        self._recovered(record, labels, index, uid, created, ready)
        # creationTimestamp has whole seconds.
        ours = uid in record.waiting or (created is not None and created >= record.since - 1)
        if ours and created is not None:
            self.ready_seconds.labels(*labels).observe(max(0.0, ready - created))
        record.waiting.discard(uid)
        record.done.add(uid)

    def _recovered(
        self,
        record: _LwsRecord,
        labels: tuple[str, str, str],
        index: str,
        uid: str,
        created: float | None,
        ready: float,
    ) -> None:
        """A group is Ready under a new leader: the end of the recovery it answers for."""
        hash_mode = is_hash_mode(record.mode)
        key = match_recovery(record.recovering, index, uid, created, same_index=not hash_mode)
        if key is None:
            return
        lost = record.recovering.pop(key)
        seconds = max(0.0, ready - lost.started)
        self.recovery_seconds.labels(*labels, lost.cause.value).observe(seconds)

    def _publish(self, record: _LwsRecord, labels: tuple[str, str, str]) -> None:
        for state, count in record.counts.items():
            self.groups.labels(*labels, _state_label(state)).set(count)

    def _group_changed(self, obj: JSON) -> None:
        """A cache event touched a group's pod or worker StatefulSet."""
        index = group_index(obj)
        if index is None:
            return
        record = self._lws.get((namespace_of(obj), lws_name(obj) or ""))
        if record is not None and record.changed is not None:
            record.changed.add(index)

    def forget(self, key: str) -> None:
        """The LeaderWorkerSet `namespace/name` is gone: its group series go with it."""
        namespace, _, name = key.partition("/")
        record = self._lws.pop((namespace, name), None)
        if record is not None:
            self._remove_series(namespace, name, record.mode)

    def _record(self, namespace: str, name: str, mode: str) -> _LwsRecord:
        record = self._lws.get((namespace, name))
        if record is not None and record.mode != mode:
            self._remove_series(namespace, name, record.mode)
            record = None
        if record is None:
            record = self._lws[(namespace, name)] = _LwsRecord(mode, since=self.clock())
        return record

    def _remove_series(self, namespace: str, name: str, mode: str) -> None:
        for state in POD_STATES:
            with contextlib.suppress(KeyError):
                self.groups.remove(namespace, name, mode, _state_label(state))

    # -- recreations ----------------------------------------------------------------------

    def group_restarted(self, leader: JSON, trigger: JSON, mode: str) -> None:
        """The controller deleted `leader` to recreate its group because of `trigger`
        (one of the group's pods, the leader itself included)."""
        failed = failure_time(trigger, self.clock())
        self.recreated(leader, mode, restart_cause(trigger), failed_at=failed)

    def recreated(
        self, leader: JSON, mode: str, cause: Cause, failed_at: float | None = None
    ) -> None:
        """Count the loss of `leader`'s group once, whoever reports it first; unless the
        group goes for a rollout or a scale-down, time it from `failed_at` (default now)
        until a group is Ready in its place."""
        uid = uid_of(leader)
        if not self._claim(uid):
            return
        namespace, name = namespace_of(leader), lws_name(leader) or ""
        self.recreations.labels(namespace, name, mode, cause.value).inc()
        index = group_index(leader)
        if cause not in RECOVERED_CAUSES or index is None:
            return
        record = self._record(namespace, name, mode)
        now = self.clock()
        for old in [
            k for k, p in record.recovering.items() if now - p.started > LOST_LEADER_MEMORY
        ]:
            del record.recovering[old]
        started = now if failed_at is None else failed_at
        record.recovering[index] = Recovering(started, cause, uid)

    def _claim(self, uid: str) -> bool:
        now = self.clock()
        for old in [u for u, at in self._lost.items() if now - at > LOST_LEADER_MEMORY]:
            del self._lost[old]
        if not uid or uid in self._lost:
            return False
        self._lost[uid] = now
        return True

    def count_losses(
        self, controller: Controller, caches: LwsCaches, deleted_by_us: Callable[[str], bool]
    ) -> None:
        """Count the leaders other actors take down, from the pod cache's events, once
        `controller` (the one that deletes leaders itself) connects: a standby counts
        nothing and remembers no lost leader. `deleted_by_us(uid)` tells the leaders the
        controller deleted itself, which it counts where it deletes them."""

        def on_update(old: JSON, new: JSON) -> None:
            if is_leader(new) and pod_terminating(new) and not pod_terminating(old):
                self._leader_lost(caches, new, deleted_by_us)

        def on_delete(pod: JSON) -> None:
            if not is_leader(pod):
                return
            if not pod_terminating(pod):
                # Deleted at once (grace period 0): no terminating update came first.
                self._leader_lost(caches, pod, deleted_by_us)
            # Nothing more will be heard of this pod.
            self._lost.pop(uid_of(pod), None)

        controller.add_side_handler(caches.pods, on_update=on_update, on_delete=on_delete)

    def track_changes(self, controller: Controller, caches: LwsCaches) -> None:
        """Note which groups the pod and StatefulSet caches' events touch, once
        `controller` (the one that calls :meth:`refresh`) connects, so that a refresh
        looks only at those again."""
        changed = self._group_changed

        def changed_update(old: JSON, new: JSON) -> None:
            changed(old)
            changed(new)

        for informer in (caches.pods, caches.statefulsets):
            controller.add_side_handler(
                informer, on_add=changed, on_update=changed_update, on_delete=changed
            )
        self._tracking = True

    def _leader_lost(
        self, caches: LwsCaches, leader: JSON, deleted_by_us: Callable[[str], bool]
    ) -> None:
        uid = uid_of(leader)
        if uid in self._lost or deleted_by_us(uid) or is_scheduling_gated(leader):
            return  # counted already, or a gated leader: no group was built for it
        namespace, name = namespace_of(leader), lws_name(leader) or ""
        lws = caches.leaderworkersets.get(namespace, name)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            return  # the whole LeaderWorkerSet is going
        mode = group_identity_of(lws.get("spec"))
        cause = loss_cause(leader) or self._workload_cause(caches, lws, leader)
        self.recreated(leader, mode, cause, failed_at=failure_time(leader, self.clock()))

    def _workload_cause(self, caches: LwsCaches, lws: JSON, leader: JSON) -> Cause:
        """A leader deleted with nothing on the pod to say why: its workload removed it
        for a rollout or a scale-down, or someone else deleted it."""
        namespace, name = namespace_of(lws), str(meta_of(lws).get("name", ""))
        replicas = int((lws.get("spec") or {}).get("replicas", 1) or 0)
        record = self._lws.get((namespace, name))
        revision = revision_key_of(leader)
        if not is_hash_mode(group_identity_of(lws.get("spec"))):
            index = group_index(leader) or ""
            if index.isdigit() and int(index) >= replicas:
                return Cause.SCALE_DOWN
            if record is not None and record.revision and revision != record.revision:
                return Cause.ROLLOUT
            return Cause.LEADER_DELETED
        if record is not None and record.revision and revision != record.revision:
            return Cause.ROLLOUT
        # A ReplicaSet scaling down leaves as many leaders as wanted; a leader deleted
        # by someone else leaves one fewer until the ReplicaSet creates another.
        uid = uid_of(leader)
        others = [
            p
            for p in caches.leaders_of(namespace, name)
            if uid_of(p) != uid and not pod_terminating(p) and not pod_finished(p)
        ]
        return Cause.SCALE_DOWN if len(others) >= replicas else Cause.LEADER_DELETED

    # -- the group-replacement scheduling gate ---------------------------------------------

    def gate_released(self, leader: JSON) -> None:
        """The replacement reconciler removed `leader`'s gate."""
        labels = (namespace_of(leader), lws_name(leader) or "", c.GROUP_IDENTITY_HASH)
        self.admissions.labels(*labels).inc()
        seconds = seconds_since(leader, self.clock())
        if seconds is not None:
            self.gated_seconds.labels(*labels).observe(seconds)

    def early_release(self, leader: JSON, reason: str) -> None:
        """A leader released before the group it replaces was gone (a bounded wait ran
        out, say). It is also counted by :meth:`gate_released` when ungated."""
        labels = (namespace_of(leader), lws_name(leader) or "", c.GROUP_IDENTITY_HASH)
        self.early_releases.labels(*labels, reason).inc()


def _state_label(state: GroupState) -> str:
    """Prometheus label values are snake_case: NotReady -> not_ready."""
    return {
        GroupState.READY: "ready",
        GroupState.NOT_READY: "not_ready",
        GroupState.GATED: "gated",
        GroupState.TEARING_DOWN: "tearing_down",
        GroupState.UPDATING: "updating",
    }[state]
