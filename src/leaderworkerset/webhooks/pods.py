"""The pod admission mutation (upstream's, plus Group Identity's Hash mode) as a
pure function: no API calls, so the webhook server, the tests and any
simulated cluster all compute the same labels, names and env vars.

Hash mode, in brief (docs/hash-mode.md; details on each helper):
  * leader: a random group key, which also fills `group-index` (there is no
    ordinal); hostname = first 8 key characters; subdomain = the LWS's shared
    Service, or `names.hash_group_service_name` under UniquePerReplica; readiness
    gate `group-ready` when size > 1; scheduling gate `group-replacement`
    under PostTermination.
  * worker: hostname `<8 key characters>-<ordinal>` (`names.hash_worker_hostname`),
    so that every group member's DNS name is known when the leader is admitted.
  * subgroup keys hash the group key instead of the (unknown) leader pod name.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.types import is_hash_mode
from leaderworkerset.api.objects import labels_of, namespace_of
from leaderworkerset.group import names as naming
from leaderworkerset.group.gates import add_group_ready_gate, add_scheduling_gate
from leaderworkerset.group.roles import is_leader
from leaderworkerset.group.tpu import pod_requests_tpus
from leaderworkerset.group.workload_objects import pod_group_for_labels
from leaderworkerset.webhooks.affinity import add_exclusive_affinity
from leaderworkerset.webhooks.denial import Denied, atoi, display_name
from leaderworkerset.webhooks.env import add_lws_env
from leaderworkerset.webhooks.nested import Pod, child_map
from leaderworkerset.webhooks.tpu import add_tpu_env

__all__ = [
    "DEFAULT_CONTEXT",
    "MAX_KEY_DRAWS",
    "Denied",
    "PodAdmissionContext",
    "mutate_pod",
    "mutate_pod_in_place",
    "snapshot_for_patch",
]

# Draws of a Hash group key before giving up. With 32 bits of hostname a single redraw
# almost never collides again; a run of collisions means the key source is broken, and
# the creator (a ReplicaSet) retries the denied pod later.
MAX_KEY_DRAWS = 8


@dataclass(frozen=True)
class PodAdmissionContext:
    """What the webhook knows about a pod besides the pod: its owning LWS and the config."""

    group_identity: str = c.GROUP_IDENTITY_ORDINAL
    group_replacement_policy: str = c.GROUP_REPLACEMENT_POST_TERMINATION
    gang_scheduling: bool = False
    # Groups are Kubernetes PodGroups (spec.scheduling with the kubernetes provider).
    workload_scheduling: bool = False
    # Injectable so that tests can pin Hash-mode keys.
    new_group_key: Callable[[str], str] = naming.random_group_key
    # Hostnames (first key characters) of this LWS's live groups: a new key must not
    # repeat one, or `<hostname>.<lws>.<ns>` would resolve to two leaders. Only asked
    # about the keys drawn, so the webhook passes a lookup, not a set of every group.
    hostnames_in_use: Container[str] = frozenset()

    @property
    def hash_mode(self) -> bool:
        return is_hash_mode(self.group_identity)


DEFAULT_CONTEXT = PodAdmissionContext()


def mutate_pod(pod: Pod, ctx: PodAdmissionContext = DEFAULT_CONTEXT) -> Pod:
    """Return a mutated deep copy of `pod`; raise Denied to refuse its creation."""
    out = copy.deepcopy(pod)
    mutate_pod_in_place(out, ctx)
    return out


def snapshot_for_patch(pod: Pod) -> Pod:
    """A copy of `pod` to diff against after `mutate_pod_in_place`, made in a few
    microseconds where a deep copy of a whole pod takes hundreds.

    Only what the mutation writes into is copied: the pod, its metadata, labels and
    annotations, its spec, the spec's gate lists and affinity, and every container
    and its env list. Everything else (volumes, tolerations, status, managed fields,
    the other members of a container) is shared with the pod, and `json_patch` passes
    over a member it finds identical on both sides without looking into it. A helper
    that starts writing somewhere else must be listed here too; the equivalence tests
    compare this patch with the one against a deep copy.
    """
    snapshot = dict(pod)
    meta = pod.get("metadata")
    if isinstance(meta, dict):
        meta = snapshot["metadata"] = dict(meta)
        for key in ("labels", "annotations"):
            if isinstance(meta.get(key), dict):
                meta[key] = dict(meta[key])
    spec = pod.get("spec")
    if isinstance(spec, dict):
        spec = snapshot["spec"] = dict(spec)
        for key in ("readinessGates", "schedulingGates"):
            if isinstance(spec.get(key), list):
                spec[key] = list(spec[key])
        if "affinity" in spec:
            spec["affinity"] = copy.deepcopy(spec["affinity"])
        for key in ("containers", "initContainers"):
            if isinstance(spec.get(key), list):
                spec[key] = [_container_snapshot(container) for container in spec[key]]
    return snapshot


def _container_snapshot(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    copied = dict(container)
    if isinstance(copied.get("env"), list):
        copied["env"] = list(copied["env"])
    return copied


def mutate_pod_in_place(pod: Pod, ctx: PodAdmissionContext = DEFAULT_CONTEXT) -> None:
    """Mutate `pod` itself; raise Denied to refuse its creation (the pod is then
    left half-mutated)."""
    if c.LABEL_SET_NAME not in labels_of(pod):
        return
    meta = child_map(pod, "metadata")
    labels: dict[str, str] = child_map(meta, "labels")
    annotations: dict[str, str] = meta.get("annotations") or {}
    if c.ANNOTATION_SIZE not in annotations:
        raise Denied(f"size annotation is unexpectedly missing for pod {display_name(pod)}")
    size = atoi(annotations[c.ANNOTATION_SIZE])

    if is_leader(pod):
        if ctx.hash_mode:
            _admit_hash_leader(pod, labels, annotations, size, ctx)
        else:
            _admit_ordinal_leader(pod, labels, annotations)
        _place_leader(pod, labels, annotations, ctx.hash_mode)
    else:
        _admit_worker(pod, labels, annotations, size, ctx.hash_mode)

    if ctx.gang_scheduling:
        _set_pod_group_name(meta, labels)
    if (
        ctx.workload_scheduling
        and annotations.get(s.ANNOTATION_WORKLOAD_AWARE_SCHEDULING) == "true"
    ):
        # The group's PodGroup, which the LWS reconciler makes (before an Ordinal
        # group's leader; right after a Hash leader, whose key is drawn above).
        child_map(pod, "spec")["schedulingGroup"] = {"podGroupName": pod_group_for_labels(labels)}
    if pod_requests_tpus(pod):
        leader_host = naming.hash_hostname(labels.get(c.LABEL_GROUP_KEY, ""))
        add_tpu_env(pod, size, leader_host=leader_host if ctx.hash_mode else None)
    add_lws_env(pod, hash_mode=ctx.hash_mode)


def _parse_ordinal(pod: Pod) -> int:
    _, ordinal = naming.parse_ordinal(display_name(pod))
    if ordinal == -1:
        raise Denied(f"parsing pod ordinal for pod {display_name(pod)}")
    return ordinal


def _admit_ordinal_leader(pod: Pod, labels: dict[str, str], annotations: dict[str, str]) -> None:
    name = display_name(pod)
    if c.LABEL_GROUP_INDEX not in labels:
        labels[c.LABEL_GROUP_INDEX] = str(_parse_ordinal(pod))
    if annotations.get(c.ANNOTATION_SUBDOMAIN_POLICY) == c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA:
        child_map(pod, "spec")["subdomain"] = name
    if c.LABEL_GROUP_KEY not in labels:
        namespace = namespace_of(pod)
        labels[c.LABEL_GROUP_KEY] = naming.ordinal_group_key(namespace, name)


def _admit_hash_leader(
    pod: Pod,
    labels: dict[str, str],
    annotations: dict[str, str],
    size: int,
    ctx: PodAdmissionContext,
) -> None:
    if not labels.get(c.LABEL_GROUP_KEY):
        labels[c.LABEL_GROUP_KEY] = _draw_group_key(namespace_of(pod), labels, ctx)
    group_key = labels[c.LABEL_GROUP_KEY]
    # No ordinal exists; upstream tools read group-index, so it carries the key (docs/hash-mode.md).
    labels.setdefault(c.LABEL_GROUP_INDEX, group_key)
    spec = child_map(pod, "spec")
    spec["hostname"] = naming.hash_hostname(group_key)
    lws_name = labels[c.LABEL_SET_NAME]
    if annotations.get(c.ANNOTATION_SUBDOMAIN_POLICY) == c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA:
        spec["subdomain"] = naming.hash_group_service_name(lws_name, group_key)
    else:
        spec["subdomain"] = lws_name
    if size > 1:
        add_group_ready_gate(spec)
    if ctx.group_replacement_policy == c.GROUP_REPLACEMENT_POST_TERMINATION:
        add_scheduling_gate(spec)


def _draw_group_key(namespace: str, labels: dict[str, str], ctx: PodAdmissionContext) -> str:
    """A fresh key whose hostname no live group of the LWS has. (A key that came with
    the pod is the creator's choice and is kept as it is.)"""
    for _ in range(MAX_KEY_DRAWS):
        key = ctx.new_group_key(namespace)
        if naming.hash_hostname(key) not in ctx.hostnames_in_use:
            return key
    raise Denied(
        f"no group key drawn in {MAX_KEY_DRAWS} tries has a hostname (its first "
        f"{naming.HASH_HOSTNAME_LENGTH} characters) unused by the live groups of "
        f"LeaderWorkerSet {namespace}/{labels.get(c.LABEL_SET_NAME, '')}"
    )


def _place_leader(
    pod: Pod, labels: dict[str, str], annotations: dict[str, str], hash_mode: bool
) -> None:
    """Exclusive placement and subgroup 0 membership, the same for both modes."""
    group_key = labels[c.LABEL_GROUP_KEY]
    if c.ANNOTATION_EXCLUSIVE_TOPOLOGY in annotations:
        topology = annotations[c.ANNOTATION_EXCLUSIVE_TOPOLOGY]
        add_exclusive_affinity(pod, group_key, topology, c.LABEL_GROUP_KEY)
    if (
        c.ANNOTATION_SUBGROUP_SIZE in annotations
        and not labels.get(c.LABEL_SUBGROUP_INDEX)
        and annotations.get(c.ANNOTATION_SUBGROUP_POLICY_TYPE) != c.SUBGROUP_POLICY_LEADER_EXCLUDED
    ):
        owner = group_key if hash_mode else display_name(pod)
        _join_subgroup(pod, labels, annotations, "0", owner)


def _admit_worker(
    pod: Pod, labels: dict[str, str], annotations: dict[str, str], size: int, hash_mode: bool
) -> None:
    ordinal = _parse_ordinal(pod)
    labels[c.LABEL_WORKER_INDEX] = str(ordinal)
    group_key = labels.get(c.LABEL_GROUP_KEY, "")
    if hash_mode and group_key:
        child_map(pod, "spec")["hostname"] = naming.hash_worker_hostname(group_key, ordinal)
    if c.ANNOTATION_SUBGROUP_SIZE in annotations and not labels.get(c.LABEL_SUBGROUP_INDEX):
        subgroup_size = atoi(annotations[c.ANNOTATION_SUBGROUP_SIZE])
        if subgroup_size < 1:
            # Upstream divides by it and panics; a denial says what is wrong.
            raise Denied(f"subgroup size must be a positive integer for pod {display_name(pod)}")
        index = naming.subgroup_index(size, subgroup_size, ordinal)
        owner = group_key if hash_mode else annotations.get(c.ANNOTATION_LEADER_NAME, "")
        _join_subgroup(pod, labels, annotations, index, owner)


def _join_subgroup(
    pod: Pod, labels: dict[str, str], annotations: dict[str, str], index: str, owner: str
) -> None:
    """`owner` is the leader pod name (Ordinal) or the group key (Hash)."""
    labels[c.LABEL_SUBGROUP_INDEX] = index
    key = naming.subgroup_key(owner, index)
    labels[c.LABEL_SUBGROUP_KEY] = key
    if c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY in annotations:
        topology = annotations[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY]
        add_exclusive_affinity(pod, key, topology, c.LABEL_SUBGROUP_KEY)


def _set_pod_group_name(meta: dict[str, Any], labels: dict[str, str]) -> None:
    """The volcano PodGroup name; in Hash mode the group-index segment is the group key."""
    parts = (c.LABEL_SET_NAME, c.LABEL_GROUP_INDEX, c.LABEL_TEMPLATE_REVISION_HASH)
    name = "-".join(labels.get(label, "") for label in parts)
    child_map(meta, "annotations")[c.ANNOTATION_POD_GROUP_NAME] = name
