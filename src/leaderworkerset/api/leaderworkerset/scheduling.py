"""Workload-Aware Scheduling: `spec.scheduling`, as upstream's pull request #982
(KEP-666) names it, and what decides whether a cluster can serve it.

With `spec.scheduling` set and the `kubernetes` scheduler provider configured
(behind the `WorkloadAwareScheduling` feature gate), every group is a Kubernetes
`scheduling.k8s.io/v1beta1` PodGroup of one Workload per LeaderWorkerSet, and
kube-scheduler places a group all at once or not at all.

Pure data and rules: the names on the wire, the cluster's support, the template
every PodGroup is made from. The objects themselves are built in
`group/workload_objects.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from leaderworkerset.api.leaderworkerset import constants as c

# --- the Kubernetes API ----------------------------------------------------------
SCHEDULING_GROUP: Final = "scheduling.k8s.io"
SCHEDULING_VERSION: Final = "v1beta1"
SCHEDULING_API_VERSION: Final = f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}"
WORKLOAD_KIND: Final = "Workload"
POD_GROUP_KIND: Final = "PodGroup"

# --- upstream #982's names --------------------------------------------------------
PROVIDER_KUBERNETES: Final = "kubernetes"
PROVIDER_VOLCANO: Final = "volcano"
FEATURE_WORKLOAD_AWARE_SCHEDULING: Final = "WorkloadAwareScheduling"
KNOWN_FEATURE_GATES: Final = (FEATURE_WORKLOAD_AWARE_SCHEDULING,)
# The one PodGroupTemplate of an LWS's Workload; every group is made from it.
WORKLOAD_TEMPLATE_NAME: Final = "replica"
# On managed pod templates: the pod webhook then sets spec.schedulingGroup.
ANNOTATION_WORKLOAD_AWARE_SCHEDULING: Final = c.PREFIX + "workload-aware-scheduling"
# KEP-6089 controller-linkage annotations (a parent workload delegating to the LWS).
ANNOTATION_GROUP_TEMPLATE_NAME: Final = "scheduling.k8s.io/group-template-name"
ANNOTATION_PARENT_COMPOSITE_POD_GROUP: Final = "scheduling.k8s.io/parent-compositepodgroup"

CONDITION_WORKLOAD_SCHEDULING_READY: Final = "WorkloadSchedulingReady"
REASON_READY: Final = "SchedulingPrerequisitesReady"
MESSAGE_READY: Final = "Workload and PodGroups are ready"
REASON_API_NOT_AVAILABLE: Final = "APINotAvailable"
REASON_UNSUPPORTED_PROVIDER_CAPABILITY: Final = "UnsupportedProviderCapability"
REASON_INVALID_SCHEDULING_CONFIGURATION: Final = "InvalidSchedulingConfiguration"
REASON_WORKLOAD_CREATE_FAILED: Final = "WorkloadCreateFailed"
REASON_POD_GROUP_CREATE_FAILED: Final = "PodGroupCreateFailed"
REASON_PARENT_WORKLOAD_NOT_READY: Final = "ParentWorkloadNotReady"
REASON_POD_GROUP_CLEANUP_BLOCKED: Final = "PodGroupCleanupBlocked"


@dataclass(frozen=True)
class SchedulingSupport:
    """What this controller and its cluster can do with `spec.scheduling`."""

    # gangSchedulingManagement.schedulerProvider; None when not configured.
    provider: str | None = None
    # featureGates.WorkloadAwareScheduling of the manager Configuration.
    feature_gate: bool = False
    # The API server serves scheduling.k8s.io/v1beta1 Workload and PodGroup.
    api_available: bool = True

    @property
    def kubernetes(self) -> bool:
        """Groups are Kubernetes PodGroups: the provider, the gate and the API."""
        return self.provider == PROVIDER_KUBERNETES and self.feature_gate and self.api_available
