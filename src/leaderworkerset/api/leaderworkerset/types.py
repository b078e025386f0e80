"""The LeaderWorkerSet v1 model (spec and status) as typed Python.

`None` means "absent in JSON". Pod templates, claim templates and the PVC
retention policy are Kubernetes types and stay raw JSON dicts, so fields this
code does not know (new Kubernetes versions) survive unchanged. Use
`LeaderWorkerSet.from_json` / `to_json` to convert.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Self

from leaderworkerset.api.codec import decode, encode
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.fields import Kind, api_field, extra_field
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON

IntOrString = int | str

POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"
PERSISTENT_VOLUME_CLAIM = "io.k8s.api.core.v1.PersistentVolumeClaim"
PVC_RETENTION_POLICY = "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@dataclass
class NetworkConfig:
    subdomain_policy: str | None = api_field(
        "subdomainPolicy",
        Kind.STRING,
        "How the headless Service of the groups is laid out: Shared (one Service "
        "named after the LeaderWorkerSet) or UniquePerReplica (one Service per group).",
        enum=c.SUBDOMAIN_POLICIES,
        required=True,
    )
    extra: JSON = extra_field()


@dataclass
class SubGroupPolicy:
    type: str | None = api_field(
        "subGroupPolicyType",
        Kind.STRING,
        "Whether the leader belongs to the first subgroup (LeaderWorker) or to no "
        "subgroup (LeaderExcluded).",
        enum=c.SUBGROUP_POLICY_TYPES,
        schema_default=c.SUBGROUP_POLICY_LEADER_WORKER,
    )
    subgroup_size: int | None = api_field(
        "subGroupSize",
        Kind.INT32,
        "Pods per subgroup. Immutable. size, or size - 1 (the leader is then the "
        "extra member of subgroup 0), must be a multiple of it.",
    )
    extra: JSON = extra_field()


@dataclass
class RollingUpdateConfiguration:
    partition: int | None = api_field(
        "partition",
        Kind.INT32,
        "Groups with an index below the partition keep their revision during a rolling "
        "update; groups from partition to replicas-1 are updated. Used for canaries.",
        schema_default=c.DEFAULT_PARTITION,
    )
    max_unavailable: IntOrString | None = api_field(
        "maxUnavailable",
        Kind.INT_OR_STRING,
        "Most groups that may be unavailable during an update: a number or a percentage "
        "of replicas (rounded down). Cannot be 0 when maxSurge is 0.",
        schema_default=c.DEFAULT_MAX_UNAVAILABLE,
    )
    max_surge: IntOrString | None = api_field(
        "maxSurge",
        Kind.INT_OR_STRING,
        "Most groups that may exist above replicas during an update: a number or a "
        "percentage of replicas (rounded up).",
        schema_default=c.DEFAULT_MAX_SURGE,
    )
    extra: JSON = extra_field()


@dataclass
class RolloutStrategy:
    type: str | None = api_field(
        "type",
        Kind.STRING,
        "The rollout strategy. Only RollingUpdate exists.",
        enum=c.ROLLOUT_STRATEGY_TYPES,
        schema_default=c.ROLLOUT_STRATEGY_ROLLING_UPDATE,
        required=True,
    )
    rolling_update_configuration: RollingUpdateConfiguration | None = api_field(
        "rollingUpdateConfiguration",
        Kind.MODEL,
        "Parameters of the RollingUpdate strategy.",
        model=RollingUpdateConfiguration,
    )
    extra: JSON = extra_field()


@dataclass
class LeaderWorkerTemplate:
    leader_template: JSON | None = api_field(
        "leaderTemplate",
        Kind.K8S,
        "Pod template of the leader pods. When absent, leaders use the worker template.",
        k8s_ref=POD_TEMPLATE_SPEC,
    )
    worker_template: JSON | None = api_field(
        "workerTemplate",
        Kind.K8S,
        "Pod template of the worker pods.",
        k8s_ref=POD_TEMPLATE_SPEC,
        required=True,
    )
    size: int | None = api_field(
        "size",
        Kind.INT32,
        "Pods per group, the leader included (minimum 1). A group of size 1 is a "
        "leader alone, with no worker StatefulSet.",
        schema_default=c.DEFAULT_SIZE,
    )
    restart_policy: str | None = api_field(
        "restartPolicy",
        Kind.STRING,
        "What a pod failure does to its group. RecreateGroupOnPodRestart recreates the "
        "whole group; RecreateGroupAfterStart does so only once every pod of the group "
        "has started; None restarts only the failed pod. Default is a deprecated "
        "spelling of None.",
        enum=c.RESTART_POLICIES,
        schema_default=c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART,
    )
    max_group_restarts: int | None = api_field(
        "maxGroupRestarts",
        Kind.INT32,
        "How many times the restart policy may recreate one group before it stops and "
        "the LeaderWorkerSet is marked Failed (0: never). Unset: no limit. Only with "
        "restartPolicy RecreateGroupOnPodRestart or RecreateGroupAfterStart. In Hash "
        "mode a replacement group carries on the count of the group it replaces.",
        minimum=0,
    )
    subgroup_policy: SubGroupPolicy | None = api_field(
        "subGroupPolicy",
        Kind.MODEL,
        "Splits every group into subgroups. Cannot be added or removed after creation.",
        model=SubGroupPolicy,
    )
    volume_claim_templates: list[JSON] | None = api_field(
        "volumeClaimTemplates",
        Kind.K8S_LIST,
        "Claims the pods may mount; each pod gets its own PersistentVolumeClaim. Not "
        "allowed with groupIdentity Hash.",
        k8s_ref=PERSISTENT_VOLUME_CLAIM,
    )
    pvc_retention_policy: JSON | None = api_field(
        "persistentVolumeClaimRetentionPolicy",
        Kind.K8S,
        "What happens to the claims of volumeClaimTemplates when the StatefulSets are "
        "deleted or scaled down.",
        k8s_ref=PVC_RETENTION_POLICY,
    )
    extra: JSON = extra_field()

    def effective_leader_template(self) -> JSON:
        """The template leaders are created from: leaderTemplate, else workerTemplate."""
        template = self.leader_template
        if template is None:
            template = self.worker_template
        return copy.deepcopy(template) if template is not None else {}


@dataclass
class BasicSchedulingPolicy:
    extra: JSON = extra_field()


@dataclass
class GangSchedulingPolicy:
    min_count: int | None = api_field(
        "minCount",
        Kind.INT32,
        "Pods of a group that must be placeable together before kube-scheduler binds any "
        "of them. Must equal leaderWorkerTemplate.size; it may change with the size.",
        required=True,
    )
    extra: JSON = extra_field()


@dataclass
class SchedulingPolicy:
    basic: BasicSchedulingPolicy | None = api_field(
        "basic",
        Kind.MODEL,
        "Place the pods of a group one by one, as kube-scheduler does without a gang. "
        "Chosen at creation; it cannot be unset later.",
        model=BasicSchedulingPolicy,
        schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "field is immutable"}
            ]
        },
    )
    gang: GangSchedulingPolicy | None = api_field(
        "gang",
        Kind.MODEL,
        "Place a group all at once or not at all (all-or-nothing).",
        model=GangSchedulingPolicy,
    )
    extra: JSON = extra_field()


@dataclass
class TopologyConstraint:
    key: str | None = api_field(
        "key",
        Kind.STRING,
        "Node label whose value names a topology domain (e.g. topology.kubernetes.io/rack); "
        "every pod of a group lands in one such domain.",
        required=True,
    )
    extra: JSON = extra_field()


@dataclass
class SchedulingConstraints:
    topology: list[TopologyConstraint] | None = api_field(
        "topology",
        Kind.MODEL_LIST,
        "Topology a group must fit in; at most one entry for now.",
        model=TopologyConstraint,
        schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    extra: JSON = extra_field()


@dataclass
class SingleDisruptionMode:
    extra: JSON = extra_field()


@dataclass
class AllDisruptionMode:
    extra: JSON = extra_field()


@dataclass
class DisruptionMode:
    single: SingleDisruptionMode | None = api_field(
        "single",
        Kind.MODEL,
        "The pods of a group may be evicted or preempted one at a time.",
        model=SingleDisruptionMode,
    )
    all_: AllDisruptionMode | None = api_field(
        "all",
        Kind.MODEL,
        "The pods of a group are evicted or preempted together, never one alone.",
        model=AllDisruptionMode,
    )
    extra: JSON = extra_field()


@dataclass
class PodGroupResourceClaim:
    name: str | None = api_field(
        "name",
        Kind.STRING,
        "Name of the claim within the group (a DNS label); the leader and worker templates "
        "refer to it by the same name in spec.resourceClaims.",
        required=True,
    )
    resource_claim_name: str | None = api_field(
        "resourceClaimName",
        Kind.STRING,
        "An existing ResourceClaim of the namespace, reserved for the whole group. Set "
        "this or resourceClaimTemplateName, not both.",
    )
    resource_claim_template_name: str | None = api_field(
        "resourceClaimTemplateName",
        Kind.STRING,
        "A ResourceClaimTemplate of the namespace from which each group gets a "
        "ResourceClaim of its own, deleted with the group's PodGroup. Set this or "
        "resourceClaimName, not both.",
    )
    extra: JSON = extra_field()


@dataclass
class LeaderWorkerSetSchedulingConfiguration:
    scheduling_policy: SchedulingPolicy | None = api_field(
        "schedulingPolicy",
        Kind.MODEL,
        "basic or gang. Absent means gang with minCount equal to the size.",
        model=SchedulingPolicy,
        schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(oldSelf.basic) || has(self.basic)",
                    "message": "field basic is immutable once set",
                }
            ]
        },
    )
    scheduling_constraints: SchedulingConstraints | None = api_field(
        "schedulingConstraints",
        Kind.MODEL,
        "Placement constraints on a whole group (topology).",
        model=SchedulingConstraints,
    )
    disruption_mode: DisruptionMode | None = api_field(
        "disruptionMode",
        Kind.MODEL,
        "Whether the pods of a group may be disrupted one by one (single) or only together (all).",
        model=DisruptionMode,
    )
    resource_claims: list[PodGroupResourceClaim] | None = api_field(
        "resourceClaims",
        Kind.MODEL_LIST,
        "Dynamic resource claims shared by all pods of a group, at most 4.",
        model=PodGroupResourceClaim,
        list_map_keys=("name",),
        schema_extra={"maxItems": c.MAX_SCHEDULING_RESOURCE_CLAIMS},
    )
    extra: JSON = extra_field()


@dataclass
class LeaderWorkerSetSpec:
    replicas: int | None = api_field(
        "replicas",
        Kind.INT32,
        "Number of groups. The scale subresource maps to this field, so an "
        "HorizontalPodAutoscaler can drive it; its selector picks the leader pods.",
        schema_default=c.DEFAULT_REPLICAS,
        minimum=0,
        maximum=c.MAX_REPLICAS,
    )
    leader_worker_template: LeaderWorkerTemplate | None = api_field(
        "leaderWorkerTemplate",
        Kind.MODEL,
        "The templates of the leader and worker pods of every group.",
        model=LeaderWorkerTemplate,
        required=True,
    )
    rollout_strategy: RolloutStrategy | None = api_field(
        "rolloutStrategy",
        Kind.MODEL,
        "How groups are updated when leaderWorkerTemplate or networkConfig changes.",
        model=RolloutStrategy,
    )
    startup_policy: str | None = api_field(
        "startupPolicy",
        Kind.STRING,
        "When the workers of a group are created: as soon as the leader pod exists "
        "(LeaderCreated) or once it is ready (LeaderReady).",
        enum=c.STARTUP_POLICIES,
        schema_default=c.STARTUP_POLICY_LEADER_CREATED,
    )
    network_config: NetworkConfig | None = api_field(
        "networkConfig",
        Kind.MODEL,
        "The DNS layout of the groups.",
        model=NetworkConfig,
    )
    group_identity: str | None = api_field(
        "groupIdentity",
        Kind.STRING,
        "How groups are named and which controller manages the leaders: Ordinal "
        "(a leader StatefulSet, groups 0..replicas-1) or Hash (a leader Deployment, each "
        "group named by a random key never reused). Immutable.",
        enum=c.GROUP_IDENTITIES,
        schema_default=c.GROUP_IDENTITY_ORDINAL,
    )
    group_replacement_policy: str | None = api_field(
        "groupReplacementPolicy",
        Kind.STRING,
        "When a replacement group may schedule: PostTermination waits until the group it "
        "replaces is gone; Immediate does not wait (Hash only).",
        enum=c.GROUP_REPLACEMENT_POLICIES,
        schema_default=c.GROUP_REPLACEMENT_POST_TERMINATION,
    )
    scheduling: LeaderWorkerSetSchedulingConfiguration | None = api_field(
        "scheduling",
        Kind.MODEL,
        "Workload-Aware Scheduling (alpha): each group becomes a Kubernetes "
        "scheduling.k8s.io PodGroup, placed as one unit by kube-scheduler. Needs the "
        "WorkloadAwareScheduling feature gate and a scheduler provider in the manager's "
        "Configuration. Cannot be added or removed after creation.",
        model=LeaderWorkerSetSchedulingConfiguration,
    )
    extra: JSON = extra_field()


@dataclass
class Condition:
    type: str | None = api_field(
        "type",
        Kind.STRING,
        "Condition type in CamelCase.",
        required=True,
        schema_extra={
            "maxLength": 316,
            "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        },
    )
    status: str | None = api_field(
        "status",
        Kind.STRING,
        "True, False or Unknown.",
        enum=("True", "False", "Unknown"),
        required=True,
    )
    observed_generation: int | None = api_field(
        "observedGeneration",
        Kind.INT64,
        "The metadata.generation the condition was set for.",
        minimum=0,
    )
    last_transition_time: str | None = api_field(
        "lastTransitionTime",
        Kind.STRING,
        "When the status last changed (RFC 3339).",
        required=True,
        schema_extra={"format": "date-time"},
    )
    reason: str | None = api_field(
        "reason",
        Kind.STRING,
        "Machine-readable CamelCase reason for the last transition.",
        required=True,
        schema_extra={
            "maxLength": 1024,
            "minLength": 1,
            "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
    )
    message: str | None = api_field(
        "message",
        Kind.STRING,
        "Human-readable detail of the last transition.",
        required=True,
        schema_extra={"maxLength": 32768},
    )
    extra: JSON = extra_field()


@dataclass
class LeaderWorkerSetStatus:
    conditions: list[Condition] | None = api_field(
        "conditions",
        Kind.MODEL_LIST,
        "Available, Progressing and UpdateInProgress.",
        model=Condition,
        list_map_keys=("type",),
    )
    ready_replicas: int | None = api_field(
        "readyReplicas", Kind.INT32, "Groups whose leader and workers are all ready."
    )
    updated_replicas: int | None = api_field(
        "updatedReplicas", Kind.INT32, "Groups on the current template revision."
    )
    replicas: int | None = api_field(
        "replicas", Kind.INT32, "Groups that exist, ready or not, updated or not."
    )
    hpa_pod_selector: str | None = api_field(
        "hpaPodSelector",
        Kind.STRING,
        "Label selector of the leader pods, published for the scale subresource.",
    )
    observed_generation: int | None = api_field(
        "observedGeneration",
        Kind.INT64,
        "The metadata.generation this status describes.",
        minimum=0,
    )
    extra: JSON = extra_field()


class TopLevel:
    """What every kind of this API's models shares: JSON conversion and the object's
    name (the DisaggregatedSet kinds are models of the same codec)."""

    metadata: JSON | None

    @classmethod
    def from_json(cls, data: Any) -> tuple[Self, list[FieldError]]:
        """Decode; the errors list names every member of the wrong JSON type."""
        errors: list[FieldError] = []
        return decode(cls, data, "", errors), errors

    def to_json(self) -> JSON:
        return encode(self)

    @property
    def name(self) -> str:
        return str((self.metadata or {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str((self.metadata or {}).get("namespace", ""))


@dataclass
class LeaderWorkerSet(TopLevel):
    api_version: str | None = api_field("apiVersion", Kind.STRING, "API version.")
    kind: str | None = api_field("kind", Kind.STRING, "Object kind.")
    metadata: JSON | None = api_field(
        "metadata", Kind.K8S, "Standard object metadata.", k8s_ref=OBJECT_META
    )
    spec: LeaderWorkerSetSpec | None = api_field(
        "spec",
        Kind.MODEL,
        "Desired state: groups of one leader and size-1 workers.",
        model=LeaderWorkerSetSpec,
    )
    status: LeaderWorkerSetStatus | None = api_field(
        "status",
        Kind.MODEL,
        "Observed state, written by the controller.",
        model=LeaderWorkerSetStatus,
    )
    extra: JSON = extra_field()


def group_identity_of(spec: LeaderWorkerSetSpec | JSON | None) -> str:
    """The effective group identity of a spec, typed or as the API stores it (a JSON
    object, read without decoding the whole LeaderWorkerSet): absent means Ordinal."""
    if isinstance(spec, dict):
        value = spec.get("groupIdentity")
        return c.GROUP_IDENTITY_ORDINAL if value is None else str(value)
    if spec is None or spec.group_identity is None:
        return c.GROUP_IDENTITY_ORDINAL
    return spec.group_identity


def is_hash_mode(group_identity: str) -> bool:
    """Whether a group identity (as `group_identity_of` reads it) is Hash: leaders of a
    Deployment with random group keys, rather than Ordinal's leader StatefulSet."""
    return group_identity == c.GROUP_IDENTITY_HASH
