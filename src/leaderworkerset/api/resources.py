"""Where each kind the controller reads or writes lives in the API: its group, version,
plural and kind, enough to build every URL for it. Kubernetes' own kinds and both of
ours, in one place, so that the runtime stays free of LeaderWorkerSet and a reconciler,
a webhook and `kubectl lws` name a kind the same way."""

from __future__ import annotations

from dataclasses import dataclass

from leaderworkerset.api.disaggregatedset import constants as ds
from leaderworkerset.api.leaderworkerset import constants as lws


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: enough to build every URL for it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
CORE_EVENTS = Resource("", "v1", "events", "Event")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
LEADERWORKERSETS = Resource(lws.GROUP, lws.VERSION, lws.PLURAL, lws.KIND)
DISAGGREGATEDSETS = Resource(ds.GROUP, ds.VERSION, ds.PLURAL, ds.KIND)
ROLE_SCALERS = Resource(ds.GROUP, ds.VERSION, ds.SCALER_PLURAL, ds.SCALER_KIND)
# Volcano's PodGroup, for `gangSchedulingManagement.schedulerProvider: volcano`.
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
# Kubernetes' Workload API (KEP-4671), for `gangSchedulingManagement.schedulerProvider:
# kubernetes`: one Workload per LeaderWorkerSet, one PodGroup per group and revision.
WORKLOADS = Resource("scheduling.k8s.io", "v1beta1", "workloads", "Workload")
POD_GROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup")
