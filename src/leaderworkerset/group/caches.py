"""The watch caches the LeaderWorkerSet controllers read from.

Every cache except the LeaderWorkerSets' own is label-selected on the
`leaderworkerset.sigs.k8s.io/name` label, so the controller holds only the
objects it manages, not every pod of the cluster. Reconciles read these caches
and never LIST the API server. Nodes are the exception: the group-replacement
rule reads whether a node is Ready, and that cache keeps nothing else of a Node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.runtime.cache import Informer, ListerWatcher, strip_managed_fields
from leaderworkerset.runtime.client import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    NODES,
    PODS,
    SERVICES,
    STATEFULSETS,
)
from leaderworkerset.runtime.indexes import label_index_name

BY_LWS = label_index_name(c.LABEL_SET_NAME)

# The StatefulSet controller keeps a ControllerRevision per worker StatefulSet, made
# of the pod template and its labels (so carrying the LWS name label) plus this hash
# label. The LWS's own revisions never have it. Leaving those out keeps a thousand
# full pod templates out of memory and out of every revision lookup.
STATEFULSET_REVISION_HASH = "controller.kubernetes.io/hash"
REVISIONS_SELECTOR = f"{c.LABEL_SET_NAME},!{STATEFULSET_REVISION_HASH}"
BY_GROUP = "group"
BY_NODE = "node"
BY_LEADER_OF = "leader-of"  # leader pods only, by "<namespace>/<lws name>"


# What the controllers read of a cached pod, besides its metadata. Everything else
# (images, volumes, mounts, env, tolerations, container states) is never read and is
# most of a pod's size, so the pod cache drops it. Cached pods are never written back
# (pods are only patched), so a trimmed pod cannot wipe a field on the server.
_POD_SPEC_READ = ("nodeName", "schedulingGates", "readinessGates")
_POD_CONTAINER_LISTS = ("containers", "initContainers")  # their resources: TPU requests
_POD_STATUS_READ = ("phase", "reason", "conditions")  # reason: Evicted, NodeLost
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


def _by_leader_of(pod: JSON) -> Iterable[str]:
    """A reconcile of a LeaderWorkerSet reads its leaders, a tenth of its pods or
    fewer; filtering every pod for them was a visible share of its cost."""
    meta = meta_of(pod)
    labels = meta.get("labels") or {}
    name = labels.get(c.LABEL_SET_NAME)
    if not name or labels.get(c.LABEL_WORKER_INDEX) != c.LEADER_WORKER_INDEX:
        return ()
    return (f"{meta.get('namespace', '')}/{name}",)


class _NodesByName(Mapping[str, JSON]):
    """A read-through view of the node cache: no copy of every Node per reconcile."""

    def __init__(self, informer: Informer) -> None:
        self._informer = informer

    def __getitem__(self, name: str) -> JSON:
        node = self._informer.get(None, name)
        if node is None:
            raise KeyError(name)
        return node

    def __iter__(self) -> Iterator[str]:
        return iter(self._informer.keys())

    def __len__(self) -> int:
        return len(self._informer)


def _by_node(pod: JSON) -> Iterable[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return (str(node),) if node else ()


def node_readiness(node: JSON) -> JSON:
    """A Node cut down to its identity and Ready condition: the rest (images, volumes,
    addresses, capacity) is large, never read, and changes with every status post."""
    meta = meta_of(node)
    kept_meta = {
        k: meta[k]
        for k in ("name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
        if k in meta
    }
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = [
        {k: cond[k] for k in ("type", "status", "lastTransitionTime") if k in cond}
        for cond in conditions
        if isinstance(cond, dict) and cond.get("type") == "Ready"
    ]
    return {
        "apiVersion": node.get("apiVersion", "v1"),
        "kind": node.get("kind", "Node"),
        "metadata": kept_meta,
        "status": {"conditions": ready},
    }


@dataclass
class LwsCaches:
    leaderworkersets: Informer
    statefulsets: Informer
    deployments: Informer
    pods: Informer
    services: Informer
    revisions: Informer
    # Cluster-scoped; None where a caller builds caches without it (tests).
    nodes: Informer | None = None

    def all(self) -> list[Informer]:
        informers = [
            self.leaderworkersets,
            self.statefulsets,
            self.deployments,
            self.pods,
            self.services,
            self.revisions,
        ]
        return informers if self.nodes is None else [*informers, self.nodes]

    def node_map(self) -> Mapping[str, JSON] | None:
        """Cached (cut-down) Nodes by name; None until the node cache has synced (or
        without one), when an absent Node would not mean a deleted one."""
        if self.nodes is None or not self.nodes.has_synced:
            return None
        return _NodesByName(self.nodes)

    def lws_keys_on_node(self, node_name: str) -> list[str]:
        """`namespace/lws-name` of every LeaderWorkerSet with a pod bound to the node."""
        keys = set()
        for pod in self.pods.by_index(BY_NODE, node_name):
            meta = meta_of(pod)
            name = (meta.get("labels") or {}).get(c.LABEL_SET_NAME)
            if name:
                keys.add(f"{meta.get('namespace', '')}/{name}")
        return sorted(keys)

    @staticmethod
    def of_lws(informer: Informer, namespace: str, lws_name: str) -> list[JSON]:
        """The objects of `informer` labelled with this LeaderWorkerSet's name."""
        return informer.by_index(BY_LWS, f"{namespace}/{lws_name}")

    def leaders_of(self, namespace: str, lws_name: str) -> list[JSON]:
        """The leader pods of this LeaderWorkerSet."""
        return self.pods.by_index(BY_LEADER_OF, f"{namespace}/{lws_name}")

    def group_pods(self, namespace: str, lws_name: str, group: str) -> list[JSON]:
        return self.pods.by_index(BY_GROUP, group_index_value(namespace, lws_name, group))


def build_caches(client: ListerWatcher, namespace: str | None = None) -> LwsCaches:
    """Caches for all namespaces, or for one (a controller scoped to a namespace)."""
    selector = c.LABEL_SET_NAME

    def labelled(
        resource: Any,
        transform: Callable[[JSON], JSON] = strip_managed_fields,
        label_selector: str = selector,
        **extra: Any,
    ) -> Informer:
        return Informer(
            client,
            resource,
            namespace=namespace,
            label_selector=label_selector,
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
        pods=labelled(
            PODS,
            pod_fields_read,
            indexers={BY_GROUP: _by_group, BY_NODE: _by_node, BY_LEADER_OF: _by_leader_of},
        ),
        services=labelled(SERVICES),
        revisions=labelled(CONTROLLER_REVISIONS, label_selector=REVISIONS_SELECTOR),
        nodes=Informer(client, NODES, transform=node_readiness),
    )
