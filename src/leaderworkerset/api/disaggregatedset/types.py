"""The DisaggregatedSet and DisaggregatedSetRoleScaler v1 models as typed Python.

The same conventions as the LeaderWorkerSet model (`leaderworkerset.api.leaderworkerset.types`):
`None` means absent in JSON, members the model does not know survive in `extra`,
and each role embeds a LeaderWorkerSet template (`metadata` and `spec`) whose spec
is the LeaderWorkerSet spec model itself. Upstream's embedded spec has no
`groupIdentity` or `groupReplacementPolicy` (our Group Identity members); ours has
them, without schema defaults (see `crd.py` beside this module).
"""

from __future__ import annotations

from dataclasses import dataclass

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.fields import Kind, api_field, extra_field
from leaderworkerset.api.leaderworkerset.types import (
    OBJECT_META,
    Condition,
    LeaderWorkerSetSpec,
    TopLevel,
)
from leaderworkerset.api.objects import JSON


@dataclass
class RoleScaling:
    mode: str | None = api_field(
        "mode",
        Kind.STRING,
        "Where the role's replica count comes from: Static (the role's spec.replicas) or "
        "External (spec.replicas of the DisaggregatedSetRoleScaler named "
        "<disaggregatedset>-<role>, which an autoscaler drives through /scale).",
        enum=c.SCALING_MODES,
        schema_default=c.SCALING_STATIC,
    )
    extra: JSON = extra_field()


@dataclass
class DisaggregatedRoleSpec:
    name: str | None = api_field(
        "name",
        Kind.STRING,
        "The role's name (prefill, decode, ...), unique in the DisaggregatedSet. It is part "
        "of the names of the role's LeaderWorkerSets and Services.",
        required=True,
        schema_extra={
            "minLength": 1,
            "maxLength": c.ROLE_NAME_MAX_LENGTH,
            "pattern": c.ROLE_NAME_PATTERN,
        },
    )
    scaling: RoleScaling | None = api_field(
        "scaling",
        Kind.MODEL,
        "How the role's replica count is set. Absent means Static.",
        model=RoleScaling,
    )
    metadata: JSON | None = api_field(
        "metadata",
        Kind.K8S,
        "Labels and annotations copied onto the role's LeaderWorkerSets.",
        k8s_ref=OBJECT_META,
    )
    spec: LeaderWorkerSetSpec | None = api_field(
        "spec",
        Kind.MODEL,
        "The LeaderWorkerSet spec of the role. rolloutStrategy.type must be RollingUpdate and "
        "partition must not be set: the DisaggregatedSet rolls all roles out together.",
        model=LeaderWorkerSetSpec,
    )
    extra: JSON = extra_field()

    @property
    def external(self) -> bool:
        return self.scaling is not None and self.scaling.mode == c.SCALING_EXTERNAL


@dataclass
class PlacementPolicy:
    type: str | None = api_field(
        "type",
        Kind.STRING,
        "None: no placement. ExclusiveSlice: the roles of a slice share one topology domain "
        "and the slices of this DisaggregatedSet use different domains. ExclusiveTopology: "
        "ExclusiveSlice, and no slice of another DisaggregatedSet shares the domain.",
        enum=c.PLACEMENT_TYPES,
        schema_default=c.PLACEMENT_NONE,
    )
    topology: str | None = api_field(
        "topology",
        Kind.STRING,
        "The node label whose value names a domain (the affinity topologyKey). Required "
        "unless type is None.",
    )
    extra: JSON = extra_field()


@dataclass
class DisaggregatedSetSpec:
    roles: list[DisaggregatedRoleSpec] | None = api_field(
        "roles",
        Kind.MODEL_LIST,
        "The roles, 2 to 10, each with a unique name.",
        model=DisaggregatedRoleSpec,
        required=True,
        list_map_keys=("name",),
        schema_extra={"minItems": c.MIN_ROLES, "maxItems": c.MAX_ROLES},
    )
    slices: int | None = api_field(
        "slices",
        Kind.INT32,
        "Independent copies of the whole set of roles, each rolled out on its own. Changing "
        "it adds or deletes copies and starts no rollout.",
        schema_default=c.DEFAULT_SLICES,
        minimum=c.MIN_SLICES,
        maximum=c.MAX_SLICES,
    )
    placement_policy: PlacementPolicy | None = api_field(
        "placementPolicy",
        Kind.MODEL,
        "Where the slices' pods go, as pod affinity written into the LeaderWorkerSets when "
        "they are created: a change applies from the next rollout.",
        model=PlacementPolicy,
    )
    extra: JSON = extra_field()


@dataclass
class RoleStatus:
    name: str | None = api_field("name", Kind.STRING, "The role.", required=True)
    replicas: int | None = api_field(
        "replicas", Kind.INT32, "The role's groups, all revisions together."
    )
    ready_replicas: int | None = api_field(
        "readyReplicas", Kind.INT32, "The role's groups that are ready."
    )
    updated_replicas: int | None = api_field(
        "updatedReplicas", Kind.INT32, "The role's groups of the current revision."
    )
    extra: JSON = extra_field()


@dataclass
class DisaggregatedSetStatus:
    observed_generation: int | None = api_field(
        "observedGeneration",
        Kind.INT64,
        "The metadata.generation this status describes: less than metadata.generation "
        "while the controller has not yet acted on the latest spec.",
    )
    role_statuses: list[RoleStatus] | None = api_field(
        "roleStatuses",
        Kind.MODEL_LIST,
        "One entry per role, in the order of spec.roles.",
        model=RoleStatus,
        list_map_keys=("name",),
    )
    conditions: list[Condition] | None = api_field(
        "conditions",
        Kind.MODEL_LIST,
        "Available and Progressing.",
        model=Condition,
        list_map_keys=("type",),
    )
    extra: JSON = extra_field()


@dataclass
class DisaggregatedSet(TopLevel):
    api_version: str | None = api_field("apiVersion", Kind.STRING, "API version.")
    kind: str | None = api_field("kind", Kind.STRING, "Object kind.")
    metadata: JSON | None = api_field(
        "metadata", Kind.K8S, "Standard object metadata.", k8s_ref=OBJECT_META
    )
    spec: DisaggregatedSetSpec | None = api_field(
        "spec",
        Kind.MODEL,
        "The roles, their slices and their placement.",
        model=DisaggregatedSetSpec,
        required=True,
        schema_extra={
            "x-kubernetes-validations": [
                {"rule": c.REPLICAS_RULE, "message": c.REPLICAS_RULE_MESSAGE}
            ]
        },
    )
    status: DisaggregatedSetStatus | None = api_field(
        "status",
        Kind.MODEL,
        "Observed state, written by the controller.",
        model=DisaggregatedSetStatus,
    )
    extra: JSON = extra_field()

    @property
    def roles(self) -> list[DisaggregatedRoleSpec]:
        return (self.spec.roles if self.spec is not None else None) or []


@dataclass
class DisaggregatedSetRoleScalerSpec:
    replicas: int | None = api_field(
        "replicas",
        Kind.INT32,
        "The role's desired replica count, written by an autoscaler through /scale. Always "
        "present (default 0), because the API server's /scale cannot read an absent one.",
        required=True,
        schema_default=c.DEFAULT_SCALER_REPLICAS,
        minimum=0,
    )
    extra: JSON = extra_field()


@dataclass
class DisaggregatedSetRoleScalerStatus:
    replicas: int | None = api_field(
        "replicas",
        Kind.INT32,
        "The role's groups (one leader pod each), all revisions together: the current "
        "count an autoscaler compares with spec.replicas.",
    )
    selector: str | None = api_field(
        "selector",
        Kind.STRING,
        "Label selector of the role's leader pods, one per group, all revisions.",
    )
    observed_generation: int | None = api_field(
        "observedGeneration", Kind.INT64, "The metadata.generation this status describes."
    )
    conditions: list[Condition] | None = api_field(
        "conditions",
        Kind.MODEL_LIST,
        "Ready: the scaler is bound to a role of a live DisaggregatedSet.",
        model=Condition,
        list_map_keys=("type",),
    )
    extra: JSON = extra_field()


@dataclass
class DisaggregatedSetRoleScaler(TopLevel):
    api_version: str | None = api_field("apiVersion", Kind.STRING, "API version.")
    kind: str | None = api_field("kind", Kind.STRING, "Object kind.")
    metadata: JSON | None = api_field(
        "metadata", Kind.K8S, "Standard object metadata.", k8s_ref=OBJECT_META
    )
    spec: DisaggregatedSetRoleScalerSpec | None = api_field(
        "spec",
        Kind.MODEL,
        "The desired replica count of one External role.",
        model=DisaggregatedSetRoleScalerSpec,
    )
    status: DisaggregatedSetRoleScalerStatus | None = api_field(
        "status",
        Kind.MODEL,
        "Observed state, written by the DisaggregatedSet controller.",
        model=DisaggregatedSetRoleScalerStatus,
    )
    extra: JSON = extra_field()
