"""Settings the reconcilers and webhooks read at each use."""

from __future__ import annotations

from dataclasses import dataclass, field

# How long a tearing-down group may hold back its replacement in the two cases where
# the capacity it holds will not come back by waiting (see docs/hash-mode.md).
DEFAULT_NODE_NOT_READY_RELEASE = 120.0
DEFAULT_TERMINATION_OVERRUN_RELEASE = 300.0


@dataclass(frozen=True)
class ReleaseThresholds:
    """Seconds after which a tearing-down group stops holding back its replacement;
    0 turns that release off (the replacement then waits for the pods to go)."""

    # The group's remaining pods sit on nodes that have not been Ready this long.
    node_not_ready: float = DEFAULT_NODE_NOT_READY_RELEASE
    # The group's remaining pods are still there this long after their deletion
    # timestamp (which the API server sets to the end of the grace period).
    termination_overrun: float = DEFAULT_TERMINATION_OVERRUN_RELEASE


@dataclass
class ControllerOptions:
    # gangSchedulingManagement.schedulerProvider: volcano
    gang_scheduling: bool = False
    # groupReplacement in the manager Configuration.
    replacement_release: ReleaseThresholds = field(default_factory=ReleaseThresholds)
