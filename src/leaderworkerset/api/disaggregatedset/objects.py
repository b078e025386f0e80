"""The objects a DisaggregatedSet owns, built as upstream's v0.10.0 controller builds
them: a LeaderWorkerSet per slice, revision and role, the headless Service of each
LeaderWorkerSet, and the RoleScaler of each External role. The controller sends them;
they are here, below it, so that the set's webhook can judge each role's
LeaderWorkerSet exactly as it will be sent (`role_admission`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from leaderworkerset.api.codec import encode
from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import (
    lws_labels,
    lws_name,
    scaler_labels,
    scaler_name,
    service_name,
    service_selector,
)
from leaderworkerset.api.disaggregatedset.placement import with_placement
from leaderworkerset.api.disaggregatedset.types import (
    DisaggregatedRoleSpec,
    DisaggregatedSet,
)
from leaderworkerset.api.leaderworkerset import constants as lws
from leaderworkerset.api.objects import JSON


def owner_reference(ds: DisaggregatedSet, *, block_owner_deletion: bool = False) -> JSON:
    """The controller reference to the set (the RoleScaler's also blocks its deletion)."""
    reference: JSON = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": ds.name,
        "uid": str((ds.metadata or {}).get("uid", "")),
        "controller": True,
    }
    if block_owner_deletion:
        reference["blockOwnerDeletion"] = True
    return reference


def leaderworkerset(
    ds: DisaggregatedSet,
    role: DisaggregatedRoleSpec,
    slice_index: int,
    revision: str,
    replicas: int,
) -> JSON:
    """A role's LeaderWorkerSet: the role's spec with these replicas; the role's labels
    and annotations, plus the set's labels (which win) on it and on its pod templates;
    the placement policy's affinity in its pod templates."""
    role_name = role.name or ""
    labels = lws_labels(ds.name, slice_index, revision, role_name)
    spec = encode(role.spec) if role.spec is not None else {}
    spec["replicas"] = replicas
    template = spec.setdefault("leaderWorkerTemplate", {})
    policy = ds.spec.placement_policy if ds.spec is not None else None
    for member in ("workerTemplate", "leaderTemplate"):
        pod = template.get(member)
        if member == "leaderTemplate" and not isinstance(pod, dict):
            continue
        pod = template[member] = copy.deepcopy(pod) if isinstance(pod, dict) else {}
        pod_meta = pod.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
        _drop_if_empty(pod_meta, "annotations")
        pod["spec"] = with_placement(pod.get("spec") or {}, ds.name, slice_index, policy)
    meta = role.metadata or {}
    metadata: JSON = {
        "name": lws_name(ds.name, slice_index, revision, role_name),
        "namespace": ds.namespace,
        "labels": {**(meta.get("labels") or {}), **labels},
        "annotations": copy.deepcopy(meta.get("annotations") or {}),
        "ownerReferences": [owner_reference(ds)],
    }
    _drop_if_empty(metadata, "annotations")
    return {"apiVersion": lws.API_VERSION, "kind": lws.KIND, "metadata": metadata, "spec": spec}


def service(ds: DisaggregatedSet, leaderworkerset: Mapping[str, object]) -> JSON:
    """The headless, portless Service of one LeaderWorkerSet, selecting its pods."""
    metadata = leaderworkerset.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    selector = service_selector(ds.name, meta.get("labels") or {})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(str(meta.get("name", ""))),
            "namespace": ds.namespace,
            "labels": dict(selector),
            "ownerReferences": [owner_reference(ds)],
        },
        "spec": {"clusterIP": "None", "selector": selector},
    }


def role_scaler(ds: DisaggregatedSet, role: str, seed: int) -> JSON:
    """The RoleScaler of an External role, starting at `seed` replicas."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.SCALER_KIND,
        "metadata": {
            "name": scaler_name(ds.name, role),
            "namespace": ds.namespace,
            "labels": scaler_labels(ds.name, role),
            "ownerReferences": [owner_reference(ds, block_owner_deletion=True)],
        },
        "spec": {"replicas": seed},
    }


def _drop_if_empty(metadata: JSON, member: str) -> None:
    """Upstream copies an empty map as nil, which Go leaves out."""
    if not metadata.get(member):
        metadata.pop(member, None)
