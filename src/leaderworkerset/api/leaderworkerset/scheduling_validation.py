"""Admission rules of `spec.scheduling` (upstream #982's `validateScheduling`), as one
pure function of the object, its stored version and what the controller can serve.

Three layers, in upstream's order:
- what the controller and cluster support (feature gate, scheduler provider, the
  scheduling.k8s.io API) and the delegation annotations of a parent Workload;
- with the `kubernetes` provider, the checks Kubernetes declares on its own
  scheduling.k8s.io building blocks (the API server never runs them on a CRD, so
  upstream runs them through the workload builder): one member of each union,
  topology and claim names, and Basic with `all` disruption refused. Like the API
  server's declarative validation they ratchet: an update that leaves a block as it
  was is not checked again;
- LeaderWorkerSet rules: a gang is exactly one group (minCount = size), and what a
  gang cannot be combined with.

Messages and field paths are upstream's (Kubernetes' for the building blocks), so a
refusal reads the same from either controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaderworkerset.api.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_many,
)
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.types import (
    DisruptionMode,
    LeaderWorkerSet,
    LeaderWorkerSetSchedulingConfiguration,
    LeaderWorkerSetSpec,
    PodGroupResourceClaim,
    SchedulingConstraints,
    SchedulingPolicy,
)
from leaderworkerset.api.metavalidation import (
    content_dns1123_label_errors,
    content_dns1123_subdomain_errors,
    content_label_key_errors,
)
from leaderworkerset.api.objects import JSON

SCHEDULING = "spec.scheduling"
POLICY = f"{SCHEDULING}.schedulingPolicy"
GANG = f"{POLICY}.gang"
MIN_COUNT = f"{GANG}.minCount"
CONSTRAINTS = f"{SCHEDULING}.schedulingConstraints"
TOPOLOGY = f"{CONSTRAINTS}.topology"
DISRUPTION_MODE = f"{SCHEDULING}.disruptionMode"
RESOURCE_CLAIMS = f"{SCHEDULING}.resourceClaims"
KNOWN_PROVIDERS = (s.PROVIDER_KUBERNETES, s.PROVIDER_VOLCANO)
# The CRD's maxItems (a PodGroup holds at most 4 claims).
MAX_RESOURCE_CLAIMS = c.MAX_SCHEDULING_RESOURCE_CLAIMS
# Kubernetes allows one topology constraint per PodGroup for now.
MAX_TOPOLOGY_CONSTRAINTS = 1

# How to get the API when the API server lacks it (Kubernetes 1.37: beta, off).
ENABLE_API_HINT = (
    f"enable it with kube-apiserver --runtime-config={s.SCHEDULING_API_VERSION}=true and "
    "--feature-gates=GenericWorkload=true (and the same gate on kube-scheduler)"
)


def annotation_path(key: str) -> str:
    """`metadata.annotations[key]`, as apimachinery's `Path.Key` spells a map member."""
    return f"metadata.annotations[{key}]"


def validate_scheduling(
    lws: LeaderWorkerSet | JSON,
    old: LeaderWorkerSet | JSON | None,
    support: s.SchedulingSupport,
) -> list[FieldError]:
    """Every error of `spec.scheduling` in `lws` (typed, or JSON as the API server
    stores it, defaulted), created (`old` None) or updated from `old`, for a controller
    with `support`. An object without `spec.scheduling` that never had one is left
    alone, whatever the support."""
    new = _typed(lws)
    previous = _typed(old) if old is not None else None
    config = _config(new)
    old_config = _config(previous)
    if config is None:
        if old_config is not None:
            return [forbidden(SCHEDULING, "cannot remove scheduling after creation")]
        return []
    errs: list[FieldError] = []
    if not support.feature_gate:
        errs.append(
            forbidden(
                SCHEDULING, f"requires the {s.FEATURE_WORKLOAD_AWARE_SCHEDULING} feature gate"
            )
        )
    provider = support.provider
    if not provider:
        errs.append(required(SCHEDULING, "requires a configured scheduler provider"))
    elif provider == s.PROVIDER_VOLCANO:
        errs.extend(_volcano_errors(config))
    elif provider != s.PROVIDER_KUBERNETES:
        errs.append(not_supported(SCHEDULING, provider, KNOWN_PROVIDERS))
    kubernetes = provider == s.PROVIDER_KUBERNETES
    if kubernetes and not support.api_available:
        errs.extend(
            forbidden(
                SCHEDULING,
                f"{s.SCHEDULING_API_VERSION} {kind} API is not available: no matches for kind "
                f'"{kind}" in version "{s.SCHEDULING_API_VERSION}"; {ENABLE_API_HINT}',
            )
            for kind in (s.WORKLOAD_KIND, s.POD_GROUP_KIND)
        )
    if kubernetes:
        errs.extend(_delegation_errors(new))
    if previous is not None and old_config is None:
        errs.append(forbidden(SCHEDULING, "cannot add scheduling after creation"))
    if kubernetes:
        errs.extend(building_block_errors(config, old_config))
    errs.extend(_gang_errors(new, config))
    errs.extend(_template_errors(new, config))
    return errs


def _typed(lws: LeaderWorkerSet | JSON) -> LeaderWorkerSet:
    if isinstance(lws, LeaderWorkerSet):
        return lws
    model, _ = LeaderWorkerSet.from_json(lws)  # type errors are the schema's to report
    return model


def _config(lws: LeaderWorkerSet | None) -> LeaderWorkerSetSchedulingConfiguration | None:
    return lws.spec.scheduling if lws is not None and lws.spec is not None else None


def _volcano_errors(config: LeaderWorkerSetSchedulingConfiguration) -> list[FieldError]:
    """What the Volcano provider cannot express: it only knows a replica-sized gang."""
    errs: list[FieldError] = []
    policy = config.scheduling_policy
    if policy is not None and policy.basic is not None:
        errs.append(forbidden(POLICY, "the Volcano provider does not support Basic policy"))
    if config.scheduling_constraints is not None:
        errs.append(
            forbidden(
                CONSTRAINTS, "the Volcano provider does not support typed scheduling constraints"
            )
        )
    if config.disruption_mode is not None:
        errs.append(
            forbidden(
                DISRUPTION_MODE, "the Volcano provider does not support typed disruption mode"
            )
        )
    if config.resource_claims:
        errs.append(
            forbidden(
                RESOURCE_CLAIMS, "the Volcano provider does not support shared resource claims"
            )
        )
    return errs


def _delegation_errors(lws: LeaderWorkerSet) -> list[FieldError]:
    """KEP-6089 linkage: an LWS whose PodGroups a parent Workload owns names that
    Workload's template, and is itself owned by the parent's controller."""
    meta = lws.metadata or {}
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    template_key = s.ANNOTATION_GROUP_TEMPLATE_NAME
    parent_key = s.ANNOTATION_PARENT_COMPOSITE_POD_GROUP
    delegated = template_key in annotations
    has_parent = parent_key in annotations
    errs: list[FieldError] = []
    if has_parent and not delegated:
        errs.append(
            forbidden(
                annotation_path(parent_key),
                "requires the group-template-name delegation annotation",
            )
        )
    if delegated:
        if not annotations.get(template_key):
            errs.append(
                required(annotation_path(template_key), "must name a parent Workload template")
            )
        if not _has_controller(meta):
            errs.append(
                forbidden(
                    annotation_path(template_key),
                    "delegated scheduling requires a controller owner",
                )
            )
        if has_parent and not annotations.get(parent_key):
            errs.append(
                required(annotation_path(parent_key), "must name a parent CompositePodGroup")
            )
    return errs


def _has_controller(meta: JSON) -> bool:
    refs = meta.get("ownerReferences")
    return isinstance(refs, list) and any(
        isinstance(ref, dict) and ref.get("controller") is True for ref in refs
    )


# --- Kubernetes' declarative validation of the building blocks --------------------------


def building_block_errors(
    config: LeaderWorkerSetSchedulingConfiguration,
    old: LeaderWorkerSetSchedulingConfiguration | None,
) -> list[FieldError]:
    """What Kubernetes declares on its scheduling.k8s.io blocks, and the workload
    builder's own cross-block rule; `old` is the stored configuration on an update."""
    errs: list[FieldError] = []
    if config.scheduling_policy is not None:
        errs.extend(
            _policy_errors(config.scheduling_policy, old.scheduling_policy if old else None)
        )
    if config.scheduling_constraints is not None:
        errs.extend(
            _constraints_errors(
                config.scheduling_constraints, old.scheduling_constraints if old else None
            )
        )
    if config.disruption_mode is not None:
        errs.extend(
            _disruption_mode_errors(config.disruption_mode, old.disruption_mode if old else None)
        )
    old_claims = {claim.name: claim for claim in (old.resource_claims or [])} if old else {}
    for i, claim in enumerate(config.resource_claims or []):
        errs.extend(_claim_errors(claim, old_claims.get(claim.name), f"{RESOURCE_CLAIMS}[{i}]"))
    errs.extend(_basic_with_all_disruption(config))
    return errs


def _union(
    path: str, members: Sequence[tuple[str, bool]], old: Sequence[bool] | None
) -> list[FieldError]:
    """Exactly one member set. On an update whose old block set the same members, no
    error (Kubernetes ratchets unions)."""
    chosen = [name for name, is_set in members if is_set]
    if old is not None and list(old) == [is_set for _, is_set in members]:
        return []
    every = ", ".join(f"`{name}`" for name, _ in members)
    if len(chosen) > 1:
        return [
            invalid(path, "{" + ", ".join(chosen) + "}", f"must specify exactly one of: {every}")
        ]
    if not chosen:
        return [invalid(path, "", f"must specify one of: {every}")]
    return []


def _policy_members(policy: SchedulingPolicy) -> list[tuple[str, bool]]:
    return [("basic", policy.basic is not None), ("gang", policy.gang is not None)]


def _policy_errors(policy: SchedulingPolicy, old: SchedulingPolicy | None) -> list[FieldError]:
    old_members = [is_set for _, is_set in _policy_members(old)] if old is not None else None
    errs = _union(POLICY, _policy_members(policy), old_members)
    gang = policy.gang
    count = gang.min_count if gang is not None else None
    old_gang = old.gang if old is not None else None
    old_count = old_gang.min_count if old_gang is not None else None
    unchanged = old_gang is not None and count == old_count
    if count is not None and count < 1 and not unchanged:
        errs.append(invalid(MIN_COUNT, count, "must be greater than or equal to 1"))
    return errs


def _constraints_errors(
    constraints: SchedulingConstraints, old: SchedulingConstraints | None
) -> list[FieldError]:
    topology = constraints.topology or []
    if old is not None and topology == (old.topology or []):
        return []
    if len(topology) > MAX_TOPOLOGY_CONSTRAINTS:
        return [too_many(TOPOLOGY, len(topology), MAX_TOPOLOGY_CONSTRAINTS)]
    errs: list[FieldError] = []
    for i, constraint in enumerate(topology):
        key, path = constraint.key, f"{TOPOLOGY}[{i}].key"
        if key is None:
            continue  # missing: the schema's `required`
        if key == "":
            errs.append(required(path))
            continue
        errs.extend(invalid(path, key, msg) for msg in content_label_key_errors(key))
    return errs


def _disruption_members(mode: DisruptionMode) -> list[tuple[str, bool]]:
    return [("single", mode.single is not None), ("all", mode.all_ is not None)]


def _disruption_mode_errors(mode: DisruptionMode, old: DisruptionMode | None) -> list[FieldError]:
    old_members = [is_set for _, is_set in _disruption_members(old)] if old is not None else None
    return _union(DISRUPTION_MODE, _disruption_members(mode), old_members)


def _claim_members(claim: PodGroupResourceClaim) -> list[tuple[str, bool]]:
    return [
        ("resourceClaimName", claim.resource_claim_name is not None),
        ("resourceClaimTemplateName", claim.resource_claim_template_name is not None),
    ]


def _claim_errors(
    claim: PodGroupResourceClaim, old: PodGroupResourceClaim | None, path: str
) -> list[FieldError]:
    """One shared claim; `old` is the stored claim of the same name, if any."""
    old_members = [is_set for _, is_set in _claim_members(old)] if old is not None else None
    errs = _union(path, _claim_members(claim), old_members)
    if old is None and claim.name is not None:  # a missing name is the schema's
        if claim.name == "":
            errs.append(required(f"{path}.name"))
        else:
            errs.extend(
                invalid(f"{path}.name", claim.name, msg)
                for msg in content_dns1123_label_errors(claim.name)
            )
    for member, value, before in (
        (
            "resourceClaimName",
            claim.resource_claim_name,
            old.resource_claim_name if old else None,
        ),
        (
            "resourceClaimTemplateName",
            claim.resource_claim_template_name,
            old.resource_claim_template_name if old else None,
        ),
    ):
        if value is None or (old is not None and value == before):
            continue
        errs.extend(
            invalid(f"{path}.{member}", value, msg)
            for msg in content_dns1123_subdomain_errors(value)
        )
    return errs


def _basic_with_all_disruption(config: LeaderWorkerSetSchedulingConfiguration) -> list[FieldError]:
    """The builder resolves each block to one member (basic before gang, single before
    all); a Basic group is placed pod by pod, so all-or-nothing disruption means
    nothing for it."""
    policy, mode = config.scheduling_policy, config.disruption_mode
    basic = policy is not None and policy.basic is not None
    all_together = mode is not None and mode.single is None and mode.all_ is not None
    if basic and all_together:
        return [
            invalid(
                DISRUPTION_MODE,
                "",
                "the disruptionMode `all` is not supported with the Basic scheduling policy",
            )
        ]
    return []


# --- LeaderWorkerSet rules -------------------------------------------------------------


def is_gang(config: LeaderWorkerSetSchedulingConfiguration) -> bool:
    """Whether the groups are gangs: unless `basic` is chosen (an absent or empty
    policy means a gang of the group's size)."""
    policy = config.scheduling_policy
    return policy is None or policy.basic is None


def _gang_errors(
    lws: LeaderWorkerSet, config: LeaderWorkerSetSchedulingConfiguration
) -> list[FieldError]:
    spec = lws.spec
    assert spec is not None
    exclusive = _annotation(lws, c.ANNOTATION_EXCLUSIVE_TOPOLOGY)
    errs: list[FieldError] = []
    if is_gang(config):
        template = spec.leader_worker_template
        size = template.size if template is not None and template.size is not None else 1
        policy = config.scheduling_policy
        gang = policy.gang if policy is not None else None
        if gang is not None and gang.min_count is not None and gang.min_count != size:
            errs.append(invalid(MIN_COUNT, gang.min_count, "must equal leaderWorkerTemplate.size"))
        if spec.startup_policy == c.STARTUP_POLICY_LEADER_READY:
            errs.append(
                forbidden(GANG, "gang scheduling is incompatible with startupPolicy LeaderReady")
            )
        if exclusive:
            errs.append(
                forbidden(
                    SCHEDULING,
                    "gang scheduling cannot be combined with exclusive topology in alpha",
                )
            )
    if config.scheduling_constraints is not None and exclusive:
        errs.append(
            forbidden(
                CONSTRAINTS,
                "workload topology constraints cannot be combined with exclusive topology in alpha",
            )
        )
    return errs


def _annotation(lws: LeaderWorkerSet, key: str) -> str:
    annotations = (lws.metadata or {}).get("annotations")
    value = annotations.get(key) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) else ""


def _template_errors(
    lws: LeaderWorkerSet, config: LeaderWorkerSetSchedulingConfiguration
) -> list[FieldError]:
    """One PodGroup holds the leader and the workers: one priority, no group of the
    user's own, and every shared claim referenced by both pod templates."""
    spec = lws.spec
    assert spec is not None
    template = spec.leader_worker_template
    worker = _pod_spec(template.worker_template if template else None)
    leader = _pod_spec(template.effective_leader_template() if template else None)
    errs: list[FieldError] = []
    if leader.get("priorityClassName", "") != worker.get("priorityClassName", ""):
        errs.append(
            invalid(
                SCHEDULING, None, "leader and worker templates must use the same priorityClassName"
            )
        )
    if leader.get("schedulingGroup") is not None or worker.get("schedulingGroup") is not None:
        errs.append(
            forbidden(SCHEDULING, "managed pod templates must not set spec.schedulingGroup")
        )
    for i, claim in enumerate(config.resource_claims or []):
        for role, pod_spec in (("leaderTemplate", leader), ("workerTemplate", worker)):
            if not any(_same_claim(claim, ref) for ref in _dicts(pod_spec.get("resourceClaims"))):
                errs.append(
                    invalid(
                        f"{RESOURCE_CLAIMS}[{i}]",
                        claim.name or "",
                        f"must have a matching reference in {role}.spec.resourceClaims",
                    )
                )
    return errs


def _pod_spec(template: Any) -> JSON:
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def _dicts(value: Any) -> list[JSON]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _same_claim(claim: PodGroupResourceClaim, ref: JSON) -> bool:
    """A pod's claim matches the group's only when it names the same claim the same way."""
    return (
        ref.get("name", "") == (claim.name or "")
        and ref.get("resourceClaimName") == claim.resource_claim_name
        and ref.get("resourceClaimTemplateName") == claim.resource_claim_template_name
    )


# --- What the CRD enforces beyond types, required members and enums ---------------------


def crd_schema_errors(spec: LeaderWorkerSetSpec) -> list[FieldError]:
    """resourceClaims: at most 4, a list-map keyed by name (the API server refuses a
    repeated name), in the API server's words."""
    config = spec.scheduling
    claims = (config.resource_claims if config else None) or []
    limit = MAX_RESOURCE_CLAIMS
    errs: list[FieldError] = []
    if len(claims) > limit:
        errs.append(too_many(RESOURCE_CLAIMS, len(claims), limit))
    seen: set[str] = set()
    for i, claim in enumerate(claims):
        if claim.name is None:
            continue  # missing: the schema's `required`
        if claim.name in seen:
            errs.append(duplicate(f"{RESOURCE_CLAIMS}[{i}]", {"name": claim.name}))
        seen.add(claim.name)
    return errs


def crd_transition_errors(new: LeaderWorkerSet, old: LeaderWorkerSet) -> list[FieldError]:
    """The CRD's CEL rule on schedulingPolicy, which the API server evaluates before any
    webhook (replayed for `lws validate --old`): once `basic`, always `basic`. Like
    every transition rule it applies only when both versions have the block."""
    new_config, old_config = _config(new), _config(old)
    new_policy = new_config.scheduling_policy if new_config else None
    old_policy = old_config.scheduling_policy if old_config else None
    if new_policy is None or old_policy is None:
        return []
    if old_policy.basic is not None and new_policy.basic is None:
        return [invalid(POLICY, "object", "field basic is immutable once set")]
    return []
