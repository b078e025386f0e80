"""The events the reconcilers emit, as data.

The decision functions return `Event`s instead of recording them, so they stay
pure and testable; the reconcilers hand them to the event recorder. `related`
is the related object (or its reference) when the catalogue names one (a
ControllerRevision or a leader pod); the decision functions that do not know
that object leave it None and the reconciler fills it in with
`dataclasses.replace`. The fields map one to one onto
`runtime.events.EventRecorder.event(regarding=lws, ...)`.

Deviations from upstream wording (each explained in docs/upstream-deviations.md):
- The partition event never prints a reversed range: a partition that rises says
  which replicas are held back instead of "Updating replicas 4 to 1"
  (#rising-partition-event).
- The replicas-deleted events say "surge" only when every removed replica is a
  surge replica; an ordinary scale-down says "deleting replica(s)"
  (#scale-down-events-say-surge-only-for-surge-replicas).
- The group-restart event says "Leader pod" when the restarted pod is the leader
  itself (#leader-restart-event).
- The leader create/update failures name the leader Deployment in Hash mode,
  where there is no leader StatefulSet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.group.options import NODE_NOT_READY, ORPHANED

NORMAL: Final = "Normal"
WARNING: Final = "Warning"

ACTION_CREATE: Final = "Create"
ACTION_UPDATE: Final = "Update"
ACTION_DELETE: Final = "Delete"


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    action: str
    note: str
    related: JSON | None = None


def _range(first: int, last: int) -> str:
    return f"{first} to {last} (inclusive)"


# --- ControllerRevisions -------------------------------------------------
def revision_for_new_lws(key: str, related: JSON | None = None) -> Event:
    note = f"Creating revision with key {key} for a newly created LeaderWorkerSet"
    return Event(NORMAL, c.EVENT_REASON_CREATING_REVISION, ACTION_CREATE, note, related)


def revision_for_update(key: str, related: JSON | None = None) -> Event:
    note = f"Creating revision with key {key} for updated LWS"
    return Event(NORMAL, c.EVENT_REASON_CREATING_REVISION, ACTION_CREATE, note, related)


def revision_missing(key: str, related: JSON | None = None) -> Event:
    note = f"Creating missing revision with key {key} for existing LeaderWorkerSet"
    return Event(NORMAL, c.EVENT_REASON_CREATING_REVISION, ACTION_CREATE, note, related)


# --- The leader workload and the shared Service ----------------------------
def _leader_workload(hash_mode: bool) -> str:
    # Upstream knows only the StatefulSet; in Hash mode the leaders are a Deployment's.
    return "deployment" if hash_mode else "statefulset"


def leader_create_failed(lws_name: str, error: str, *, hash_mode: bool = False) -> Event:
    note = f"Failed to create leader {_leader_workload(hash_mode)} {lws_name}: {error}"
    return Event(WARNING, c.EVENT_REASON_FAILED_CREATE, ACTION_CREATE, note)


def leader_update_failed(lws_name: str, error: str, *, hash_mode: bool = False) -> Event:
    note = f"Failed to update leader {_leader_workload(hash_mode)} {lws_name}: {error}"
    return Event(WARNING, c.EVENT_REASON_FAILED_UPDATE, ACTION_UPDATE, note)


def leader_created(lws_name: str, related: JSON | None = None, *, hash_mode: bool = False) -> Event:
    note = f"Created leader {_leader_workload(hash_mode)} {lws_name}"
    return Event(NORMAL, c.REASON_GROUPS_PROGRESSING, ACTION_CREATE, note, related)


def partition_moved(old: int, new: int, related: JSON | None = None) -> Event:
    """Replicas at or above the partition are updated, so a lower partition
    releases [new, old) for update and a higher one holds [old, new) back."""
    if new < old:
        what = f"replica {new}" if old - 1 == new else f"replicas {_range(new, old - 1)}"
        note = f"Updating {what}"
    else:
        what = f"replica {old}" if new - 1 == old else f"replicas {_range(old, new - 1)}"
        note = f"Pausing update of {what}"
    return Event(NORMAL, c.REASON_GROUPS_UPDATING, ACTION_UPDATE, note, related)


def service_create_failed(error: str) -> Event:
    note = f"Failed to create headless service for error: {error}"
    return Event(WARNING, c.EVENT_REASON_FAILED_CREATE, ACTION_CREATE, note)


# --- Lowering the leader replicas -------------------------------------------
def replicas_deleted(lws_name: str, first: int, last: int, surge_only: bool) -> Event:
    """One replica or a range; `surge_only` picks the upstream wording."""
    kind = "surge replica" if surge_only else "replica"
    if first == last:
        note = f"deleting {kind} {lws_name}-{first}"
    else:
        note = f"deleting {kind}s from {lws_name}-{first} to {lws_name}-{last}"
    return Event(NORMAL, c.REASON_GROUPS_PROGRESSING, ACTION_DELETE, note)


# --- Status conditions -----------------------------------------------------------
def conditions_changed(reason: str, message: str, ready: int, replicas: int) -> Event:
    note = f"{message}, with {ready} groups ready of total {replicas} groups"
    return Event(NORMAL, reason, ACTION_UPDATE, note)


# --- The pod reconciler -----------------------------------------------------
def worker_statefulset_created(pod_name: str, related: JSON | None = None) -> Event:
    note = f"Created worker statefulset for leader pod {pod_name}"
    return Event(NORMAL, c.REASON_GROUPS_PROGRESSING, ACTION_CREATE, note, related)


def worker_statefulset_create_failed(
    pod_name: str, error: str, related: JSON | None = None
) -> Event:
    note = f"Failed to create worker statefulset for leader pod {pod_name}: {error}"
    return Event(WARNING, c.EVENT_REASON_FAILED_CREATE, ACTION_CREATE, note, related)


def misclassified_leader(namespace: str, pod_name: str, related: JSON | None = None) -> Event:
    note = (
        f"leader pod {namespace}/{pod_name} contains mistake annotation "
        f"'{c.ANNOTATION_LEADER_NAME}': requires Kubernetes ≥v1.27 or v1.26 with "
        "StatefulSetStartOrdinal feature"
    )
    return Event(WARNING, c.EVENT_REASON_FAILED_CREATE, ACTION_CREATE, note, related)


def group_recreated(
    pod_name: str, leader_name: str, group: str, pod_is_leader: bool, related: JSON | None = None
) -> Event:
    who = "Leader pod" if pod_is_leader else "Worker pod"
    note = f"{who} {pod_name} failed, deleted leader pod {leader_name} to recreate group {group}"
    return Event(NORMAL, c.EVENT_REASON_RECREATE_GROUP, ACTION_DELETE, note, related)


# --- Group recovery: the restart budget (upstream #877) and our group back-off ----------
EVENT_REASON_MAX_GROUP_RESTARTS_EXCEEDED: Final = c.REASON_MAX_GROUP_RESTARTS_EXCEEDED
EVENT_REASON_GROUP_BACKOFF: Final = "GroupBackOff"


def max_group_restarts_exceeded(group: str, budget: int, related: JSON | None = None) -> Event:
    note = f"Skip recreating group {group}: reached maxGroupRestarts={budget}"
    return Event(WARNING, EVENT_REASON_MAX_GROUP_RESTARTS_EXCEEDED, ACTION_DELETE, note, related)


def group_backoff(
    group: str,
    leader_name: str,
    recent: int,
    backoff: float,
    until: str,
    related: JSON | None = None,
) -> Event:
    """Said once per wait, like the kubelet's BackOff for a container."""
    note = (
        f"Back-off recreating group {group} (leader pod {leader_name}): recreated {recent} "
        f"time(s) recently, the next recreation waits {backoff:.0f}s after the last, "
        f"until {until}"
    )
    return Event(WARNING, EVENT_REASON_GROUP_BACKOFF, ACTION_DELETE, note, related)


# --- Group hardening: what the pod reconciler cannot do for a group, said once -----------
def group_service_not_owned(
    service: str, pod_name: str, owner: str, related: JSON | None = None
) -> Event:
    """A Service with the group's name exists but is not its leader's: sharing it would
    point the group's DNS at somebody else's pods (a hostname collision, or a user's
    Service), so it is left alone and its removal awaited."""
    note = (
        f"Service {service} for the group of leader pod {pod_name} exists and is owned by "
        f"{owner}, not by that leader: not using it; retrying until it is removed"
    )
    return Event(WARNING, c.EVENT_REASON_FAILED_CREATE, ACTION_CREATE, note, related)


def leader_revision_missing(pod_name: str, revision_key: str, related: JSON | None = None) -> Event:
    note = (
        f"Failed to create worker statefulset for leader pod {pod_name}: its revision "
        f"(ControllerRevision with {c.LABEL_TEMPLATE_REVISION_HASH}={revision_key}) is "
        "missing; retrying with backoff"
    )
    return Event(WARNING, c.EVENT_REASON_FAILED_CREATE, ACTION_CREATE, note, related)


# --- Hash mode: PostTermination holds (our addition; upstream has no such wait) -------------
REASON_REPLACEMENT_HELD: Final = "ReplacementHeld"
REASON_REPLACEMENT_RELEASED: Final = "ReplacementReleasedEarly"

_KEY_PREFIX = 8  # as in the leader hostname: what users see of a group's key


def replacement_held(leader_name: str, group: str, related: JSON | None = None) -> Event:
    """A gated leader waits for the tearing-down group (named by key prefix) whose end
    will let it in."""
    note = (
        f"Replacement leader pod {leader_name} waits for group {group[:_KEY_PREFIX]} "
        "to finish terminating (groupReplacementPolicy PostTermination)"
    )
    return Event(NORMAL, REASON_REPLACEMENT_HELD, ACTION_UPDATE, note, related)


def replacement_released(
    group: str, reason: str, pods: tuple[str, ...], nodes: tuple[str, ...], threshold: float
) -> Event:
    """A tearing-down group stopped holding its replacement back before its pods were
    gone; `reason` is NodeNotReady, TerminationOverrun or Orphaned."""
    where = f" on node {', '.join(nodes)}" if nodes else ""
    if reason == NODE_NOT_READY:
        why = f"node not Ready (or gone) for {threshold:g}s"
    elif reason == ORPHANED:
        why = "their worker StatefulSet was orphaned, so they are no longer this LeaderWorkerSet's"
    else:
        why = f"still present {threshold:g}s past the end of the deletion grace period"
    note = f"Stopped waiting for group {group[:_KEY_PREFIX]}: pods {', '.join(pods)}{where}: {why}"
    return Event(WARNING, REASON_REPLACEMENT_RELEASED, ACTION_UPDATE, note)


# --- Workload-Aware Scheduling -------------------------------------------
def workload_scheduling_failed(reason: str, message: str) -> Event:
    """The WorkloadSchedulingReady condition turned False (reason as the condition's)."""
    return Event(WARNING, reason, "Reconcile", message)


class Recorder(Protocol):
    """What records an event (the runtime's `EventRecorder`); a protocol, so that the
    decisions that return events stay free of the runtime."""

    def event(
        self,
        regarding: JSON,
        type_: str,
        reason: str,
        action: str,
        note: str,
        related: JSON | None = None,
    ) -> None: ...


def record(recorder: Recorder | None, regarding: JSON, event: Event) -> None:
    """Hand `event` about `regarding` to the recorder, if there is one."""
    if recorder is not None:
        recorder.event(regarding, event.type, event.reason, event.action, event.note, event.related)
