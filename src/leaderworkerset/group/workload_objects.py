"""The Kubernetes Workload API objects of a LeaderWorkerSet with `spec.scheduling`:
its Workload, one PodGroup per group and revision, and which PodGroups it needs.

Kubernetes' order for a workload controller (KEP-4671): the Workload, then a
group's PodGroup, then the group's pods, each pod naming its PodGroup in
`spec.schedulingGroup.podGroupName`. The names follow upstream's #982, so an LWS
handed over between the Go manager and this one keeps its objects:
the Workload is named like the LWS; a PodGroup `<lws>-<group>-<revision>`, where
`<group>` is the group index (Ordinal) or the group key (Hash, whose group-index
label carries the key). A rollout makes new names; a leader recreated under the
same revision finds its PodGroup still there.

Pure: JSON in, JSON out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import POD_GROUPS, WORKLOADS
from leaderworkerset.group.ownership import lws_reference


def scheduling_of(view: LwsView) -> JSON | None:
    """`spec.scheduling`, or None when the LWS does not ask for Workload scheduling."""
    return view.scheduling


def pod_group_name(lws_name: str, group: str, revision: str) -> str:
    return f"{lws_name}-{group}-{revision}"


def pod_group_of_pod(pod: JSON) -> str | None:
    """The PodGroup a pod belongs to, as its spec names it."""
    spec = pod.get("spec")
    ref = spec.get("schedulingGroup") if isinstance(spec, dict) else None
    name = ref.get("podGroupName") if isinstance(ref, dict) else None
    return str(name) if name else None


def pod_group_for_labels(labels: dict[str, str]) -> str:
    """The PodGroup of a group member, from the labels every member carries."""
    return pod_group_name(
        labels.get(c.LABEL_SET_NAME, ""),
        labels.get(c.LABEL_GROUP_INDEX, ""),
        labels.get(c.LABEL_TEMPLATE_REVISION_HASH, ""),
    )


def _priority_class(view: LwsView) -> str:
    # Admission refuses differing leader and worker classes: one flat PodGroup has
    # one priority, and the scheduler refuses members whose priority differs from it.
    spec = view.leader_template().get("spec") or {}
    return str(spec.get("priorityClassName") or "")


def pod_group_template(view: LwsView) -> JSON:
    """The Workload's one PodGroupTemplate: what every group is scheduled by. An
    absent policy, or a gang without minCount, is a gang of the whole group."""
    scheduling = scheduling_of(view) or {}
    policy = copy.deepcopy(scheduling.get("schedulingPolicy") or {})
    if "basic" in policy and policy.get("basic") is not None:
        policy = {"basic": {}}
    else:
        gang = policy.get("gang") or {}
        policy = {"gang": {"minCount": int(gang.get("minCount") or view.size)}}
    template: JSON = {"name": s.WORKLOAD_TEMPLATE_NAME, "schedulingPolicy": policy}
    topology = ((scheduling.get("schedulingConstraints") or {}).get("topology")) or []
    if topology:
        template["schedulingConstraints"] = {
            "topology": [{"key": str(t.get("key", ""))} for t in topology]
        }
    mode = scheduling.get("disruptionMode") or {}
    if mode.get("all") is not None:
        template["disruptionMode"] = {"all": {}}
    elif mode.get("single") is not None:
        template["disruptionMode"] = {"single": {}}
    claims = scheduling.get("resourceClaims") or []
    if claims:
        template["resourceClaims"] = [_claim(claim) for claim in claims]
    priority_class = _priority_class(view)
    if priority_class:
        template["priorityClassName"] = priority_class
    return template


def _claim(claim: JSON) -> JSON:
    out: JSON = {"name": str(claim.get("name", ""))}
    for key in ("resourceClaimName", "resourceClaimTemplateName"):
        if claim.get(key):
            out[key] = str(claim[key])
    return out


def workload(view: LwsView) -> JSON:
    return {
        "apiVersion": WORKLOADS.api_version,
        "kind": WORKLOADS.kind,
        "metadata": {
            "name": view.name,
            "namespace": view.namespace,
            "labels": {c.LABEL_SET_NAME: view.name},
            "ownerReferences": [lws_reference(view.obj)],
        },
        "spec": {
            "controllerRef": {"apiGroup": c.GROUP, "kind": c.KIND, "name": view.name},
            "podGroupTemplates": [pod_group_template(view)],
        },
    }


def pod_group(view: LwsView, template: JSON, group: str, revision: str) -> JSON:
    """A group's PodGroup, made from the Workload's template as it is stored (so an
    admission-filled priority carries over) and owned by the LWS, never by the leader:
    it exists before the leader does."""
    spec: JSON = {
        "workloadRef": {"workloadName": view.name, "templateName": s.WORKLOAD_TEMPLATE_NAME}
    }
    for key in (
        "schedulingPolicy",
        "schedulingConstraints",
        "disruptionMode",
        "resourceClaims",
        "priorityClassName",
        "priority",
    ):
        if template.get(key) is not None:
            spec[key] = copy.deepcopy(template[key])
    return {
        "apiVersion": POD_GROUPS.api_version,
        "kind": POD_GROUPS.kind,
        "metadata": {
            "name": pod_group_name(view.name, group, revision),
            "namespace": view.namespace,
            "labels": {
                c.LABEL_SET_NAME: view.name,
                c.LABEL_GROUP_INDEX: group,
                c.LABEL_TEMPLATE_REVISION_HASH: revision,
            },
            "ownerReferences": [lws_reference(view.obj)],
        },
        "spec": spec,
    }


def stored_template(workload_obj: JSON | None) -> JSON | None:
    """The `replica` template of a stored Workload."""
    if workload_obj is None:
        return None
    for template in (workload_obj.get("spec") or {}).get("podGroupTemplates") or []:
        if isinstance(template, dict) and template.get("name") == s.WORKLOAD_TEMPLATE_NAME:
            return template
    return None


# Immutable in a stored PodGroupTemplate (Kubernetes lets only a gang's minCount change).
_IMMUTABLE = ("schedulingConstraints", "disruptionMode", "resourceClaims", "priorityClassName")


def template_drift(stored: JSON, desired: JSON) -> list[str]:
    """The immutable members in which the stored template differs from the desired
    one ("schedulingPolicy" when it changed between basic and gang)."""
    drift = [key for key in _IMMUTABLE if stored.get(key) != desired.get(key)]
    old_policy = stored.get("schedulingPolicy") or {}
    new_policy = desired.get("schedulingPolicy") or {}
    if ("gang" in old_policy) != ("gang" in new_policy):
        drift.append("schedulingPolicy")
    return drift


def only_priority_drifted(drift: list[str]) -> bool:
    """The pod templates' priorityClassName changed (a rollout may change it): the
    Workload is made again, as its template cannot be edited; every other member of
    spec.scheduling is immutable at admission, so no other drift comes from the user."""
    return drift == ["priorityClassName"]


def with_min_count(workload_obj: JSON, desired: JSON) -> JSON | None:
    """The stored Workload with the desired gang minCount, or None when it has it."""
    stored = stored_template(workload_obj)
    new_gang = (desired.get("schedulingPolicy") or {}).get("gang")
    if stored is None or new_gang is None:
        return None
    old_gang = (stored.get("schedulingPolicy") or {}).get("gang") or {}
    if old_gang.get("minCount") == new_gang.get("minCount"):
        return None
    body = copy.deepcopy(workload_obj)
    for template in body["spec"]["podGroupTemplates"]:
        if template.get("name") == s.WORKLOAD_TEMPLATE_NAME:
            template["schedulingPolicy"]["gang"]["minCount"] = new_gang["minCount"]
    return body


@dataclass(frozen=True)
class GroupRevision:
    group: str  # the group index (Ordinal) or key (Hash)
    revision: str


def groups_needed(
    lws_name: str, planned: Iterable[GroupRevision], leaders: Iterable[JSON]
) -> dict[str, GroupRevision]:
    """PodGroup name -> the group and revision it is for: every planned group at the
    revision it is to run, and every leader at the revision it runs (a group behind
    the rollout's partition keeps its own, and a leader recreated there needs it)."""
    needed: dict[str, GroupRevision] = {}
    for g in planned:
        needed[pod_group_name(lws_name, g.group, g.revision)] = g
    for leader in leaders:
        labels = meta_of(leader).get("labels") or {}
        group = labels.get(c.LABEL_GROUP_INDEX)
        revision = labels.get(c.LABEL_TEMPLATE_REVISION_HASH)
        if group and revision:
            g = GroupRevision(str(group), str(revision))
            needed.setdefault(pod_group_name(lws_name, g.group, g.revision), g)
    return needed
