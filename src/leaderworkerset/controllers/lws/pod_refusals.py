"""Pods the API server refuses to a LeaderWorkerSet's workloads, reported on the LWS.

The StatefulSet controller (kube-controller-manager) creates the pods of the leader
StatefulSet and of every worker StatefulSet. When the API server refuses one (Pod
Security Admission, a ResourceQuota, a webhook), the StatefulSet controller records a
Warning event `FailedCreate` on the StatefulSet and retries with its own back-off; the
StatefulSet's status carries no condition for it. A Hash leader Deployment's
ReplicaSet does the same, and the Deployment controller copies the ReplicaSet's
`ReplicaFailure` condition onto the Deployment. A user who looks at the
LeaderWorkerSet sees neither.

This controller reads them from caches: core Events field-selected to
`involvedObject.kind=StatefulSet,reason=FailedCreate` (the API server filters them,
so the cache holds only failing StatefulSets' events, of any owner), and the leader
Deployments already cached. A refusal counts while its StatefulSet still has fewer
pods than it wants, and only for the StatefulSet it names by uid. For each
LeaderWorkerSet the newest one is recorded as a Warning event `FailedCreatePods` on
the LWS, and again only when its message changes or REPEAT_AFTER has passed: the
StatefulSet controller's retries wake this controller, and each would otherwise
be an event write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, meta_of, name_of, namespace_of, timestamp_of
from leaderworkerset.api.resources import CORE_EVENTS
from leaderworkerset.caches import BY_LWS, LwsCaches
from leaderworkerset.controllers.events import ACTION_CREATE, WARNING, Event
from leaderworkerset.runtime.cache import Informer, ListerWatcher, strip_managed_fields
from leaderworkerset.runtime.controller import Controller, Predicate, Result
from leaderworkerset.runtime.events import EventRecorder
from leaderworkerset.runtime.indexes import label_index_value
from leaderworkerset.runtime.manager import Manager
from leaderworkerset.runtime.metrics import RuntimeMetrics

log = logging.getLogger("pod-refusals")

POD_REFUSALS_CONTROLLER = "leaderworkerset-pod-refusals"
FAILED_CREATE_SELECTOR = "involvedObject.kind=StatefulSet,reason=FailedCreate"
REASON = "FailedCreatePods"
# The same refusal is recorded on the LWS again after this long, so that it stays
# among the LWS's recent events while it lasts (the API server keeps events for an
# hour). Longer than the recorder's series window (6 min): each repeat is a new Event.
REPEAT_AFTER = 15 * 60.0
REPLICA_FAILURE = "ReplicaFailure"

_EVENT_FIELDS = ("involvedObject", "reason", "type", "message", "lastTimestamp", "eventTime")


def failed_create_fields(event: JSON) -> JSON:
    """What the refusal reader uses of an Event; the rest is never read."""
    strip_managed_fields(event)
    meta = meta_of(event)
    kept: JSON = {k: event[k] for k in _EVENT_FIELDS if k in event}
    kept["metadata"] = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    series = event.get("series") or {}
    if series.get("lastObservedTime"):
        kept["lastTimestamp"] = series["lastObservedTime"]
    return kept


def failed_create_events(
    client: ListerWatcher, namespace: str | None, metrics: RuntimeMetrics
) -> Informer:
    return Informer(
        client,
        CORE_EVENTS,
        namespace=namespace,
        field_selector=FAILED_CREATE_SELECTOR,
        transform=failed_create_fields,
        metrics=metrics,
    )


@dataclass(frozen=True)
class Refusal:
    workload: str  # "StatefulSet <name>" or "Deployment <name>"
    message: str
    at: float  # epoch seconds of the last occurrence, 0 when unknown

    def event(self) -> Event:
        note = f"{self.workload} cannot create pods: {self.message}"
        return Event(WARNING, REASON, ACTION_CREATE, note)


def _short_of_pods(sts: JSON) -> bool:
    wanted = (sts.get("spec") or {}).get("replicas", 1)
    return int((sts.get("status") or {}).get("replicas", 0) or 0) < int(wanted or 0)


def _event_time(event: JSON) -> float:
    for key in ("lastTimestamp", "eventTime"):
        at = timestamp_of(event.get(key))
        if at is not None:
            return at
    return timestamp_of(meta_of(event).get("creationTimestamp")) or 0.0


def refusals(caches: LwsCaches, events: Informer, namespace: str, lws: str) -> list[Refusal]:
    """The pod-creation refusals that still hold for the LWS's workloads."""
    found: list[Refusal] = []
    sets = {
        name_of(sts): sts
        for sts in caches.statefulsets.by_index(BY_LWS, label_index_value(namespace, lws))
        if _short_of_pods(sts)
    }
    if sets:
        for event in events.list(namespace):
            involved = event.get("involvedObject") or {}
            sts = sets.get(str(involved.get("name", "")))
            if sts is None or involved.get("uid") != meta_of(sts).get("uid"):
                continue
            found.append(
                Refusal(
                    f"StatefulSet {name_of(sts)}",
                    str(event.get("message", "")),
                    _event_time(event),
                )
            )
    deployment = caches.deployments.get(namespace, lws)
    for cond in ((deployment or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == REPLICA_FAILURE and cond.get("status") == "True":
            at = timestamp_of(cond.get("lastUpdateTime") or cond.get("lastTransitionTime"))
            found.append(Refusal(f"Deployment {lws}", str(cond.get("message", "")), at or 0.0))
    return found


@dataclass
class PodRefusalReporter:
    """The reconciler: records the newest refusal on the LWS, at most once per message
    per REPEAT_AFTER."""

    caches: LwsCaches
    events: Informer
    recorder: EventRecorder
    clock: Callable[[], float] = time.monotonic
    # LWS uid -> (the note last recorded, when).
    _recorded: dict[str, tuple[str, float]] = field(default_factory=dict)

    async def __call__(self, key: str) -> Result | None:
        namespace, _, name = key.partition("/")
        lws = self.caches.leaderworkersets.get(namespace, name)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            return None
        uid = str(meta_of(lws).get("uid", ""))
        found = refusals(self.caches, self.events, namespace, name)
        if not found:
            self._recorded.pop(uid, None)
            return None
        event = max(found, key=lambda r: r.at).event()
        now = self.clock()
        last = self._recorded.get(uid)
        if last is not None and last[0] == event.note and now - last[1] < REPEAT_AFTER:
            return Result(requeue_after=REPEAT_AFTER - (now - last[1]))
        self.recorder.event(lws, event.type, event.reason, event.action, event.note)
        self._recorded[uid] = (event.note, now)
        log.info("pods refused", extra={"lws": key, "note": event.note})
        return Result(requeue_after=REPEAT_AFTER)

    def forget(self, lws: JSON) -> None:
        self._recorded.pop(str(meta_of(lws).get("uid", "")), None)


def _lws_of_event(caches: LwsCaches) -> Callable[[JSON], Iterable[str]]:
    def keys(event: JSON) -> Iterable[str]:
        involved = event.get("involvedObject") or {}
        namespace = str(involved.get("namespace") or namespace_of(event))
        sts = caches.statefulsets.get(namespace, str(involved.get("name", "")))
        name = ((meta_of(sts).get("labels") or {}) if sts else {}).get(c.LABEL_SET_NAME)
        return [f"{namespace}/{name}"] if name else []

    return keys


def _replica_failure(deployment: JSON) -> object:
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return [cond for cond in conditions if cond.get("type") == REPLICA_FAILURE]


# A leader Deployment whose ReplicaFailure condition came, went or changed.
REPLICA_FAILURE_CHANGED = Predicate(
    create=lambda d: bool(_replica_failure(d)),
    update=lambda old, new: _replica_failure(old) != _replica_failure(new),
    delete=lambda d: False,
)
# Occurrences only: a deleted (expired) event says nothing new.
OCCURRED = Predicate(delete=lambda e: False)


def setup_pod_refusals_controller(
    manager: Manager, caches: LwsCaches, events: Informer, recorder: EventRecorder
) -> Controller:
    """The controller, watching its sources, added to `manager`; `events` is a
    :func:`failed_create_events` cache the caller has added to it."""
    reporter = PodRefusalReporter(caches, events, recorder)
    controller = Controller(POD_REFUSALS_CONTROLLER, reporter, metrics=manager.metrics)
    controller.watch(events, _lws_of_event(caches), OCCURRED)
    controller.watch_labelled(caches.deployments, c.LABEL_SET_NAME, REPLICA_FAILURE_CHANGED)
    controller.on_delete(caches.leaderworkersets, reporter.forget)
    manager.add(controller)
    return controller
