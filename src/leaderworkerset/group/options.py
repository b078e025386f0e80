"""Settings the reconcilers and webhooks read at each use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.group.recreations import BackoffPolicy

# How long a tearing-down group may hold back its replacement in the two cases where
# the capacity it holds will not come back by waiting (see docs/hash-mode.md).
DEFAULT_NODE_NOT_READY_RELEASE = 120.0
DEFAULT_TERMINATION_OVERRUN_RELEASE = 300.0

# At most one LeaderWorkerSet pass per this many seconds for events of its pods and
# workloads (its own events are never held back). A pass reads every group, so
# back-to-back passes during a large scale-up cost CPU quadratic in groups; a second
# of status lag is what buys that back (docs/scale.md).
DEFAULT_CHILD_EVENT_PACE = 1.0

# Why a tearing-down group stopped holding back its replacement: one reason per
# threshold below. The replacement rule decides it, its event and metric name it.
NODE_NOT_READY: Final = "NodeNotReady"
TERMINATION_OVERRUN: Final = "TerminationOverrun"
# Not a threshold: the group's worker StatefulSet lost its owner (`kubectl delete pod
# <leader> --cascade=orphan`), so its pods are no longer the LeaderWorkerSet's.
ORPHANED: Final = "Orphaned"


@dataclass(frozen=True)
class ReleaseThresholds:
    """Seconds after which a tearing-down group stops holding back its replacement;
    0 turns that release off (the replacement then waits for the pods to go)."""

    # The group's remaining pods sit on nodes that have not been Ready this long.
    node_not_ready: float = DEFAULT_NODE_NOT_READY_RELEASE
    # The group's remaining pods are still there this long after their deletion
    # timestamp (which the API server sets to the end of the grace period).
    termination_overrun: float = DEFAULT_TERMINATION_OVERRUN_RELEASE


@dataclass(frozen=True)
class TeardownModes:
    """teardown in the manager Configuration: True where it is Parallel
    (docs/group-recovery.md, "Faster teardown")."""

    # A failed group's worker StatefulSet, pods and Service deleted beside the collector.
    group_restart: bool = True
    # A deleted LeaderWorkerSet's (Ordinal) groups deleted at every level at once.
    lws_deletion: bool = False


@dataclass
class ControllerOptions:
    # gangSchedulingManagement.schedulerProvider: volcano
    gang_scheduling: bool = False
    # groupReplacement in the manager Configuration.
    replacement_release: ReleaseThresholds = field(default_factory=ReleaseThresholds)
    # Seconds between LWS passes caused by its children's events; 0 turns pacing off.
    child_event_pace: float = DEFAULT_CHILD_EVENT_PACE
    # leaderWorkerSetLimits in the manager Configuration, enforced at admission.
    limits: SizeLimits = field(default_factory=SizeLimits)
    # teardown in the manager Configuration.
    teardown: TeardownModes = field(default_factory=TeardownModes)
    # What spec.scheduling can be served with: provider, feature gate, cluster API.
    scheduling: SchedulingSupport = field(default_factory=SchedulingSupport)
    # groupBackoff in the manager Configuration: how repeated recreations of a group wait.
    group_backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
