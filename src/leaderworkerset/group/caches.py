"""The watch caches the LeaderWorkerSet controllers read from.

Every cache except the LeaderWorkerSets' own is label-selected on the
`leaderworkerset.sigs.k8s.io/name` label, so the controller holds only the
objects it manages, not every pod of the cluster. Reconciles read these caches
and never LIST the API server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.runtime.cache import Informer, ListerWatcher, strip_managed_fields
from leaderworkerset.runtime.client import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    PODS,
    SERVICES,
    STATEFULSETS,
)
from leaderworkerset.runtime.indexes import label_index_name

BY_LWS = label_index_name(c.LABEL_SET_NAME)
BY_GROUP = "group"


# What the controllers read of a cached pod, besides its metadata. Everything else
# (images, volumes, mounts, env, tolerations, container states) is never read and is
# most of a pod's size, so the pod cache drops it. Cached pods are never written back
# (pods are only patched), so a trimmed pod cannot wipe a field on the server.
_POD_SPEC_READ = ("nodeName", "schedulingGates", "readinessGates")
_POD_CONTAINER_LISTS = ("containers", "initContainers")  # their resources: TPU requests
_POD_STATUS_READ = ("phase", "conditions")
_POD_CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")  # restarts
_CONTAINER_STATUS_READ = ("name", "restartCount", "ready")


def pod_fields_read(pod: JSON) -> JSON:
    """The pod cache's transform: metadata without managedFields, and of spec and
    status only the fields the controllers read."""
    strip_managed_fields(pod)
    spec = pod.get("spec")
    if isinstance(spec, dict):
        kept = {k: spec[k] for k in _POD_SPEC_READ if k in spec}
        for field in _POD_CONTAINER_LISTS:
            if field in spec:
                kept[field] = [_container_read(x) for x in spec[field] or ()]
        pod["spec"] = kept
    status = pod.get("status")
    if isinstance(status, dict):
        kept = {k: status[k] for k in _POD_STATUS_READ if k in status}
        for field in _POD_CONTAINER_STATUS_LISTS:
            if field in status:
                kept[field] = [_container_status_read(x) for x in status[field] or ()]
        pod["status"] = kept
    return pod


def _container_read(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    return {k: container[k] for k in ("name", "resources") if k in container}


def _container_status_read(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    return {k: status[k] for k in _CONTAINER_STATUS_READ if k in status}


def group_index_value(namespace: str, lws_name: str, group: str) -> str:
    return f"{namespace}/{lws_name}/{group}"


def _by_group(obj: JSON) -> Iterable[str]:
    meta = meta_of(obj)
    labels = meta.get("labels") or {}
    name, group = labels.get(c.LABEL_SET_NAME), labels.get(c.LABEL_GROUP_INDEX)
    if not name or group is None:
        return ()
    return (group_index_value(str(meta.get("namespace", "")), name, str(group)),)


@dataclass
class LwsCaches:
    leaderworkersets: Informer
    statefulsets: Informer
    deployments: Informer
    pods: Informer
    services: Informer
    revisions: Informer

    def all(self) -> list[Informer]:
        return [
            self.leaderworkersets,
            self.statefulsets,
            self.deployments,
            self.pods,
            self.services,
            self.revisions,
        ]

    @staticmethod
    def of_lws(informer: Informer, namespace: str, lws_name: str) -> list[JSON]:
        """The objects of `informer` labelled with this LeaderWorkerSet's name."""
        return informer.by_index(BY_LWS, f"{namespace}/{lws_name}")

    def group_pods(self, namespace: str, lws_name: str, group: str) -> list[JSON]:
        return self.pods.by_index(BY_GROUP, group_index_value(namespace, lws_name, group))


def build_caches(client: ListerWatcher, namespace: str | None = None) -> LwsCaches:
    """Caches for all namespaces, or for one (a controller scoped to a namespace)."""
    selector = c.LABEL_SET_NAME

    def labelled(
        resource: Any, transform: Callable[[JSON], JSON] = strip_managed_fields, **extra: Any
    ) -> Informer:
        return Informer(
            client,
            resource,
            namespace=namespace,
            label_selector=selector,
            label_indexes=[c.LABEL_SET_NAME],
            # managedFields are never read, and about a third of a cached object's memory.
            transform=transform,
            **extra,
        )

    return LwsCaches(
        leaderworkersets=Informer(
            client, LEADERWORKERSETS, namespace=namespace, transform=strip_managed_fields
        ),
        statefulsets=labelled(STATEFULSETS),
        deployments=labelled(DEPLOYMENTS),
        pods=labelled(PODS, pod_fields_read, indexers={BY_GROUP: _by_group}),
        services=labelled(SERVICES),
        revisions=labelled(CONTROLLER_REVISIONS),
    )
