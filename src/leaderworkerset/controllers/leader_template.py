"""Pieces shared by the leader workloads of both modes (the Ordinal StatefulSet and the
Hash Deployment) and by the worker StatefulSets: the decorated leader pod template,
the subgroup annotations, claim templates and metadata merging."""

from __future__ import annotations

import copy

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerTemplate
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group.ownership import lws_reference
from leaderworkerset.group.workload_objects import scheduling_of


def leader_selector(lws_name: str) -> dict[str, str]:
    """Leader pods only: the same selector the status publishes for the HPA."""
    return {c.LABEL_SET_NAME: lws_name, c.LABEL_WORKER_INDEX: c.LEADER_WORKER_INDEX}


def leader_pod_template(view: LwsView, key: str) -> JSON:
    """The live leader template (or worker template) with the controller's labels
    and annotations merged over the user's. Built from the live spec, so it always
    describes the newest revision."""
    template = view.leader_template()
    labels = {
        c.LABEL_WORKER_INDEX: c.LEADER_WORKER_INDEX,
        c.LABEL_SET_NAME: view.name,
        c.LABEL_TEMPLATE_REVISION_HASH: key,
    }
    annotations = {c.ANNOTATION_SIZE: str(view.size)}
    annotations.update(exclusive_topology_annotations(view))
    annotations.update(subgroup_annotations(view, view.template, leader=True))
    annotations.update(workload_scheduling_annotations(view))
    if view.unique_per_replica:
        annotations[c.ANNOTATION_SUBDOMAIN_POLICY] = c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA
    merge_metadata(template, labels, annotations)
    return template


def exclusive_topology_annotations(view: LwsView) -> dict[str, str]:
    topology = view.annotation(c.ANNOTATION_EXCLUSIVE_TOPOLOGY)
    return {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: topology} if topology else {}


def workload_scheduling_annotations(view: LwsView) -> dict[str, str]:
    """With spec.scheduling, the mark that makes the pod webhook name each pod's
    PodGroup (spec.scheduling cannot be added or removed, so the live spec decides)."""
    if scheduling_of(view) is None:
        return {}
    return {s.ANNOTATION_WORKLOAD_AWARE_SCHEDULING: "true"}


def subgroup_annotations(
    view: LwsView, template: LeaderWorkerTemplate, leader: bool
) -> dict[str, str]:
    """Subgroup settings come from `template` (the live one for leaders, the revision's
    for workers); the exclusive-topology key always from the live annotations. The
    leader always carries the policy type; workers only when it is set, as upstream does."""
    policy = template.subgroup_policy
    if policy is None:
        return {}
    out: dict[str, str] = {}
    if leader or policy.type is not None:
        out[c.ANNOTATION_SUBGROUP_POLICY_TYPE] = policy.type or c.SUBGROUP_POLICY_LEADER_WORKER
    if policy.subgroup_size is not None:
        out[c.ANNOTATION_SUBGROUP_SIZE] = str(policy.subgroup_size)
    topology = view.annotation(c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY)
    if topology:
        out[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] = topology
    return out


def merge_metadata(obj: JSON, labels: dict[str, str], annotations: dict[str, str]) -> None:
    """Merge into obj.metadata: user keys are kept, the controller's win on conflicts."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    if labels:
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}


def volume_claim_templates(template: LeaderWorkerTemplate, namespace: str) -> list[JSON]:
    """As upstream: only name, namespace, access modes, storage class, volume mode and resource
    requests/limits of each claim are carried over."""
    out = []
    for claim in template.volume_claim_templates or []:
        meta = meta_of(claim)
        spec = claim.get("spec") or {}
        claim_spec: JSON = {}
        if spec.get("accessModes") is not None:
            claim_spec["accessModes"] = copy.deepcopy(spec["accessModes"])
        for member in ("storageClassName", "volumeMode"):
            if spec.get(member) is not None:
                claim_spec[member] = spec[member]
        resources = spec.get("resources") or {}
        kept = {
            part: copy.deepcopy(resources[part])
            for part in ("requests", "limits")
            if resources.get(part) is not None
        }
        if kept:
            claim_spec["resources"] = kept
        out.append(
            {"metadata": {"name": meta.get("name", ""), "namespace": namespace}, "spec": claim_spec}
        )
    return out


def add_claims_and_retention(
    sts_spec: JSON, template: LeaderWorkerTemplate, namespace: str
) -> None:
    """Claim templates only when there are some; the retention policy only when set."""
    claims = volume_claim_templates(template, namespace)
    if claims:
        sts_spec["volumeClaimTemplates"] = claims
    if template.pvc_retention_policy is not None:
        sts_spec["persistentVolumeClaimRetentionPolicy"] = copy.deepcopy(
            template.pvc_retention_policy
        )


def copied_metadata(view: LwsView, labels: dict[str, str]) -> tuple[JSON, JSON]:
    """(labels, annotations) of an object the controller creates for the LWS: all LWS
    labels and annotations, then the controller's labels."""
    return {**view.labels, **labels}, dict(view.annotations)


def leader_workload_metadata(view: LwsView, key: str, **annotations: str) -> JSON:
    """The metadata of the leader StatefulSet (Ordinal) or Deployment (Hash): named like
    the LWS, owned by it, carrying its labels and annotations, the name and revision
    labels, and `annotations` on top."""
    labels, copied = copied_metadata(
        view, {c.LABEL_SET_NAME: view.name, c.LABEL_TEMPLATE_REVISION_HASH: key}
    )
    return {
        "name": view.name,
        "namespace": view.namespace,
        "labels": labels,
        "annotations": {**copied, **annotations},
        "ownerReferences": [lws_reference(view.obj)],
    }
