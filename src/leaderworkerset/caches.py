"""The watch caches the LeaderWorkerSet controllers and the pod webhook read from.

Informers, so I/O: they list and watch the API server. That is why they sit
here, beside `group/` (pure functions, no I/O) and below both `controllers/`
and `webhooks/`, which read them; neither this module nor `group/` imports the
other. `wiring.py` builds them (`build_caches`) and hands them to the manager.

Every cache except the LeaderWorkerSets' own is label-selected on the
`leaderworkerset.sigs.k8s.io/name` label, so the controller holds only the
objects it manages, not every pod of the cluster. Reconciles read these caches
and never LIST the API server. Nodes are the exception: the group-replacement
rule reads whether a node is Ready, and that cache keeps nothing else of a Node.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import JSON, controller_ref, meta_of
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    NODES,
    POD_GROUPS,
    PODS,
    SERVICES,
    STATEFULSETS,
    WORKLOADS,
)
from leaderworkerset.runtime.cache import Informer, ListerWatcher, strip_managed_fields
from leaderworkerset.runtime.indexes import OWNER_UID_INDEX, label_index_name
from leaderworkerset.runtime.metrics import RuntimeMetrics

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


# What the controllers read of a cached pod. Everything else is never read and is
# most of a pod's size, so the pod cache drops it. Cached pods are never written
# back (pods are only patched), so a trimmed pod cannot wipe a field on the server.
#
# Metadata: all of it but managedFields and generateName, with the labels and
# annotations cut to this controller's own (every one read is under the
# `leaderworkerset.sigs.k8s.io/` prefix, plus the gang-scheduling group name), and
# owner references to what identifies the owner (blockOwnerDeletion is never read).
_POD_META_DROPPED = ("managedFields", "generateName")
_OWNER_REFERENCE_READ = ("apiVersion", "kind", "name", "uid", "controller")
_POD_ANNOTATIONS_READ_OUTSIDE_PREFIX = (c.ANNOTATION_POD_GROUP_NAME,)
_POD_META_SHARED = frozenset(("namespace", "creationTimestamp"))
# Spec: the node, the gates, and of each container its name and TPU requests.
_POD_SPEC_READ = ("nodeName", "schedulingGates", "readinessGates", "schedulingGroup")
_POD_CONTAINER_LISTS = ("containers", "initContainers")
_RESOURCE_LISTS = ("limits", "requests")
# Status: reason (Evicted, NodeLost), the conditions read, and restart counts.
_POD_STATUS_READ = ("phase", "reason")
_POD_CONDITIONS_READ = frozenset(
    # Ready: pod readiness; ContainersReady: a Hash leader's LeaderReady start-up;
    # the group-ready gate's own; DisruptionTarget: why a pod is going.
    ("Ready", "ContainersReady", c.CONDITION_GROUP_READY, "DisruptionTarget")
)
_CONDITION_READ = ("type", "status", "reason")  # not the times, probes or messages
# Ready's transition time too: when a group became Ready (the group metrics).
_READY_CONDITION_READ = (*_CONDITION_READ, "lastTransitionTime")
_POD_CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")
_CONTAINER_STATUS_READ = ("name", "restartCount", "ready")


# Repeated strings (an LWS name, a group key, an owner's uid, "True") are interned
# as the transform copies them: thousands of pods hold the same few, and orjson makes
# a fresh string for every value it decodes. Interned strings are freed with their
# last holder, so the table does not grow with what has gone. Inline rather than
# through a helper: a call per string doubled the transform's cost.
_intern = sys.intern


def pod_fields_read(pod: JSON) -> JSON:
    """The pod cache's transform: of metadata, spec and status only what the
    controllers read, with repeated strings shared."""
    intern = _intern
    meta = pod.get("metadata")
    if isinstance(meta, dict):
        pod["metadata"] = _pod_meta_read(meta)
    for key in ("apiVersion", "kind"):
        value = pod.get(key)
        if value.__class__ is str:
            pod[key] = intern(value)
    spec = pod.get("spec")
    if isinstance(spec, dict):
        kept = {k: spec[k] for k in _POD_SPEC_READ if k in spec}
        node = kept.get("nodeName")
        if node.__class__ is str:
            kept["nodeName"] = intern(node)
        for field in _POD_CONTAINER_LISTS:
            if field in spec:
                kept[field] = [_container_read(x) for x in spec[field] or ()]
        pod["spec"] = kept
    status = pod.get("status")
    if isinstance(status, dict):
        kept = {
            k: intern(v) if (v := status[k]).__class__ is str else v
            for k in _POD_STATUS_READ
            if k in status
        }
        if "conditions" in status:
            kept["conditions"] = [
                {
                    k: intern(v) if (v := cond[k]).__class__ is str else v
                    for k in (
                        _READY_CONDITION_READ if cond.get("type") == "Ready" else _CONDITION_READ
                    )
                    if k in cond
                }
                for cond in status["conditions"] or ()
                if isinstance(cond, dict) and cond.get("type") in _POD_CONDITIONS_READ
            ]
        for field in _POD_CONTAINER_STATUS_LISTS:
            if field in status:
                kept[field] = [_keys_read(x, _CONTAINER_STATUS_READ) for x in status[field] or ()]
        pod["status"] = kept
    return pod


def _pod_meta_read(meta: JSON) -> JSON:
    intern = _intern
    kept: JSON = {}
    for key, value in meta.items():
        if key in _POD_META_DROPPED:
            continue
        if key == "labels":
            value = _own_entries(value, ())
        elif key == "annotations":
            value = _own_entries(value, _POD_ANNOTATIONS_READ_OUTSIDE_PREFIX)
        elif key == "ownerReferences" and isinstance(value, list):
            value = [_keys_read(ref, _OWNER_REFERENCE_READ) for ref in value]
        elif key in _POD_META_SHARED and value.__class__ is str:
            value = intern(value)
        kept[key] = value
    return kept


def _own_entries(mapping: Any, also: tuple[str, ...]) -> Any:
    """This controller's own labels or annotations (keys are shared already: orjson
    caches the short keys it decodes)."""
    if not isinstance(mapping, dict):
        return mapping
    intern, prefix = _intern, c.PREFIX
    return {
        k: intern(v) if v.__class__ is str else v
        for k, v in mapping.items()
        if k.__class__ is str and (k.startswith(prefix) or k in also)
    }


def _keys_read(obj: Any, keys: tuple[str, ...]) -> Any:
    """Of a dict, only `keys`, with string values shared (owner references, container
    statuses)."""
    if not isinstance(obj, dict):
        return obj
    intern = _intern
    return {k: intern(v) if (v := obj[k]).__class__ is str else v for k in keys if k in obj}


def _container_read(container: Any) -> Any:
    """Its name, and its TPU requests and limits only (`group.tpu` reads those)."""
    if not isinstance(container, dict):
        return container
    name = container.get("name")
    kept: JSON = {} if name is None else {"name": _intern(name) if name.__class__ is str else name}
    resources = container.get("resources")
    if isinstance(resources, dict):
        tpu = {
            field: {c.TPU_RESOURCE_NAME: quantities[c.TPU_RESOURCE_NAME]}
            for field in _RESOURCE_LISTS
            if isinstance(quantities := resources.get(field), dict)
            and c.TPU_RESOURCE_NAME in quantities
        }
        if tpu:
            kept["resources"] = tpu
    return kept


# A worker StatefulSet (one per group, controlled by its leader pod) is only created
# and deleted, never applied or updated, and what is read of it is its metadata, its
# replica count and its status; its pod template and claim templates are most of
# it. The leader StatefulSet is kept whole: the LWS reconciler compares the body it
# would apply against it (`AppliedObjects.needs_apply`).
_WORKER_STATEFULSET_SPEC_DROPPED = ("template", "volumeClaimTemplates")


def statefulset_fields_read(sts: JSON) -> JSON:
    strip_managed_fields(sts)
    owner = controller_ref(sts)
    spec = sts.get("spec")
    if owner is not None and owner.get("kind") == "Pod" and isinstance(spec, dict):
        sts["spec"] = {k: v for k, v in spec.items() if k not in _WORKER_STATEFULSET_SPEC_DROPPED}
    return sts


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
    # The Workload API's objects; None unless groups are Kubernetes PodGroups.
    workloads: Informer | None = None
    pod_groups: Informer | None = None

    def all(self) -> list[Informer]:
        informers = [
            self.leaderworkersets,
            self.statefulsets,
            self.deployments,
            self.pods,
            self.services,
            self.revisions,
        ]
        optional = (self.nodes, self.workloads, self.pod_groups)
        return [*informers, *(informer for informer in optional if informer is not None)]

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

    def lws_view(self, namespace: str, name: str) -> LwsView | None:
        """The cached LeaderWorkerSet, read when its version entered the cache (the
        view carries the object itself as `obj`); None when it is not cached."""
        return self.lws_view_by_key(f"{namespace}/{name}" if namespace else name)

    def lws_view_by_key(self, key: str) -> LwsView | None:
        """`lws_view` by its `namespace/name` key."""
        view: LwsView | None = self.leaderworkersets.derived_by_key(key)
        if view is not None:
            return view
        obj = self.leaderworkersets.get_by_key(key)
        # Not cached; or its view could not be built as it entered the cache: then it
        # is read here, so that failure is the reader's (a reconcile error, retried),
        # as it was before views were kept.
        return None if obj is None else view_of(obj)

    @staticmethod
    def of_lws(informer: Informer, namespace: str, lws_name: str) -> list[JSON]:
        """The objects of `informer` labelled with this LeaderWorkerSet's name."""
        return informer.by_index(BY_LWS, f"{namespace}/{lws_name}")

    def leaders_of(self, namespace: str, lws_name: str) -> list[JSON]:
        """The leader pods of this LeaderWorkerSet."""
        return self.pods.by_index(BY_LEADER_OF, f"{namespace}/{lws_name}")

    def controlled_pods(self, owner: JSON) -> list[JSON]:
        """The cached pods whose controller is `owner` (a worker StatefulSet)."""
        return self.pods.by_index(OWNER_UID_INDEX, str(meta_of(owner).get("uid", "")))

    def group_pods(self, namespace: str, lws_name: str, group: str) -> list[JSON]:
        return self.pods.by_index(BY_GROUP, group_index_value(namespace, lws_name, group))


def build_caches(
    client: ListerWatcher,
    namespace: str | None = None,
    *,
    metrics: RuntimeMetrics | None = None,
    workload_api: bool = False,
) -> LwsCaches:
    """Caches for all namespaces, or for one (a controller scoped to a namespace);
    `metrics`: where they count their open watches (the Manager's); `workload_api`:
    also Workloads and PodGroups (never watched on a cluster that does not serve them)."""
    selector = c.LABEL_SET_NAME
    metrics = metrics or RuntimeMetrics()

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
            metrics=metrics,
            **extra,
        )

    return LwsCaches(
        # Each version's view is built as it enters the cache: every pod event reads
        # its LeaderWorkerSet, and decoding it per read was the largest single cost.
        leaderworkersets=Informer(
            client,
            LEADERWORKERSETS,
            namespace=namespace,
            transform=strip_managed_fields,
            metrics=metrics,
            derive=view_of,
        ),
        statefulsets=labelled(STATEFULSETS, statefulset_fields_read),
        deployments=labelled(DEPLOYMENTS),
        pods=labelled(
            PODS,
            pod_fields_read,
            indexers={BY_GROUP: _by_group, BY_NODE: _by_node, BY_LEADER_OF: _by_leader_of},
        ),
        services=labelled(SERVICES),
        revisions=labelled(CONTROLLER_REVISIONS, label_selector=REVISIONS_SELECTOR),
        nodes=Informer(client, NODES, transform=node_readiness, metrics=metrics),
        workloads=_workloads(client, namespace, metrics) if workload_api else None,
        pod_groups=labelled(POD_GROUPS) if workload_api else None,
    )


def _workloads(client: ListerWatcher, namespace: str | None, metrics: RuntimeMetrics) -> Informer:
    # Not by label: a Workload the Go manager made carries none, and there is one per
    # LeaderWorkerSet with scheduling.
    return Informer(
        client, WORKLOADS, namespace=namespace, transform=strip_managed_fields, metrics=metrics
    )
