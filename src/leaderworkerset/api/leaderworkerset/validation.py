"""Validation of LeaderWorkerSets, as pure functions returning every error at once.

`validate_create` and `validate_update` run on the defaulted object (what the
validating webhook sees). They cover the schema checks the API server makes
(enums, bounds, required members), the upstream webhook rules and the Group
Identity rules. `warnings_for` returns advice that does not block admission.
"""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.codec import child_path
from leaderworkerset.api.errors import (
    FieldError,
    forbidden,
    immutable,
    invalid,
    not_supported,
    required,
)
from leaderworkerset.api.fields import Kind, api_fields
from leaderworkerset.api.go.intstr import IntOrString, is_percent, scaled_value
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.scheduling_validation import (
    crd_schema_errors,
    crd_transition_errors,
)
from leaderworkerset.api.leaderworkerset.types import (
    LeaderWorkerSet,
    LeaderWorkerSetSpec,
    SubGroupPolicy,
    group_identity_of,
    is_hash_mode,
)
from leaderworkerset.api.metavalidation import qualified_name_errors, validate_object_meta

SPEC = "spec"
TEMPLATE = "spec.leaderWorkerTemplate"
SIZE = f"{TEMPLATE}.size"
REPLICAS = "spec.replicas"
SUBGROUP_SIZE = f"{TEMPLATE}.subGroupPolicy.subGroupSize"
ROLLING_UPDATE = "spec.rolloutStrategy.rollingUpdateConfiguration"
MAX_UNAVAILABLE = f"{ROLLING_UPDATE}.maxUnavailable"
MAX_SURGE = f"{ROLLING_UPDATE}.maxSurge"
PARTITION = f"{ROLLING_UPDATE}.partition"
SUBDOMAIN_POLICY = "spec.networkConfig.subdomainPolicy"
GROUP_IDENTITY = "spec.groupIdentity"
SUBGROUP_EXCLUSIVE_ANNOTATION = f"metadata.annotations.{c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY}"
# Annotations whose value the pod webhook writes into pods as an affinity topologyKey.
TOPOLOGY_KEY_ANNOTATIONS = (
    c.ANNOTATION_EXCLUSIVE_TOPOLOGY,
    c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY,
)

PERCENT_FORMAT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)

# Kubernetes names a StatefulSet's pods' `controller-revision-hash` label
# "<statefulset>-<up to 10 characters>", and a label value holds at most 63.
_REVISION_LABEL_SUFFIX = 11
_LABEL_VALUE_MAX = 63
# A Deployment's pods are "<deployment>-<pod-template-hash>-<5 characters>".
_DEPLOYMENT_POD_SUFFIX = 1 + 10 + 1 + 5


def validate_create(lws: LeaderWorkerSet) -> list[FieldError]:
    return _validate_object(lws, None)


def validate_update(new: LeaderWorkerSet, old: LeaderWorkerSet) -> list[FieldError]:
    errs = _validate_object(new, old)
    errs.extend(_validate_transition(new, old))
    return errs


def _validate_object(lws: LeaderWorkerSet, old: LeaderWorkerSet | None) -> list[FieldError]:
    """The rules every object meets, on create and update alike; `old` only ratchets."""
    errs = validate_object_meta(lws.metadata)
    errs.extend(_validate_spec(lws))
    errs.extend(_topology_key_errors(lws, old))
    return errs


def _topology_key_errors(new: LeaderWorkerSet, old: LeaderWorkerSet | None) -> list[FieldError]:
    """An exclusive-placement topology must be a label key. The pod webhook writes it into
    the pods' affinity as `topologyKey`, which the API server refuses otherwise (every
    pod refused), and the pod reconciler looks it up as a node label. Upstream admits
    any value; an update that leaves a value as it was is still admitted (ratcheting),
    so an object created under upstream can be scaled or edited without fixing it."""
    errs: list[FieldError] = []
    before = dict(_topology_values(old)) if old is not None else {}
    for path, value in _topology_values(new):
        if old is not None and before.get(path) == value:
            continue
        errs.extend(invalid(path, value, msg) for msg in qualified_name_errors(value))
    return errs


def _topology_values(lws: LeaderWorkerSet) -> list[tuple[str, str]]:
    """(field path, value) of each topology the pods will be placed by: the object's
    annotations, and the same annotations set directly on a pod template."""
    out: list[tuple[str, str]] = []
    annotations = (lws.metadata or {}).get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    exclusive = annotations.get(c.ANNOTATION_EXCLUSIVE_TOPOLOGY)
    if isinstance(exclusive, str):
        # Even empty: the pod reconciler then looks up a node label "" and fails.
        out.append((f"metadata.annotations.{c.ANNOTATION_EXCLUSIVE_TOPOLOGY}", exclusive))
    subgroup = annotations.get(c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY)
    template = lws.spec.leader_worker_template if lws.spec else None
    # An empty one is never copied to the pods; without subGroupPolicy it is refused
    # by its own rule.
    if isinstance(subgroup, str) and subgroup and template and template.subgroup_policy:
        out.append((SUBGROUP_EXCLUSIVE_ANNOTATION, subgroup))
    for field, pod_template in (
        ("leaderTemplate", template.leader_template if template else None),
        ("workerTemplate", template.worker_template if template else None),
    ):
        metadata = pod_template.get("metadata") if isinstance(pod_template, dict) else None
        if not isinstance(metadata, dict):
            continue  # a wrong type is the schema's to refuse
        on_pods = metadata.get("annotations") or {}
        for key in TOPOLOGY_KEY_ANNOTATIONS:
            value = on_pods.get(key) if isinstance(on_pods, dict) else None
            if isinstance(value, str):  # copied to the pods as it is, even empty
                out.append((f"{TEMPLATE}.{field}.metadata.annotations.{key}", value))
    return out


def _claim_name(claim: dict[str, Any]) -> str:
    metadata = claim.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def _validate_spec(lws: LeaderWorkerSet) -> list[FieldError]:
    spec = lws.spec
    if spec is None:
        return [required(SPEC)]
    rule_errs: list[FieldError] = []
    rule_errs.extend(_validate_counts(spec))
    rule_errs.extend(_validate_rolling_update(spec))
    rule_errs.extend(_validate_subgroups(lws))
    rule_errs.extend(restart_budget_errors(spec))
    rule_errs.extend(group_identity_errors(spec))
    # The API server checks the schema first and reports its own message; where the
    # webhook has a rule for the same field, report the webhook's wording only.
    ruled = {e.field for e in rule_errs}
    schema_errs = [e for e in schema_errors(spec, SPEC) if e.field not in ruled]
    schema_errs.extend(crd_schema_errors(spec))
    return schema_errs + rule_errs


def schema_errors(model: Any, path: str) -> list[FieldError]:
    """What the CRD schema enforces on model fields: required members, enums, bounds."""
    errs: list[FieldError] = []
    for name, spec in api_fields(type(model)):
        value = getattr(model, name)
        field = child_path(path, spec.json)
        if value is None:
            if spec.required:
                errs.append(required(field))
            continue
        if spec.enum is not None and value not in spec.enum:
            errs.append(not_supported(field, value, spec.enum))
        if spec.minimum is not None and isinstance(value, int) and value < spec.minimum:
            errs.append(invalid(field, value, f"should be greater than or equal to {spec.minimum}"))
        if spec.maximum is not None and isinstance(value, int) and value > spec.maximum:
            errs.append(invalid(field, value, f"should be less than or equal to {spec.maximum}"))
        if spec.kind is Kind.MODEL:
            errs.extend(schema_errors(value, field))
        elif spec.kind is Kind.MODEL_LIST:
            for i, item in enumerate(value):
                errs.extend(schema_errors(item, f"{field}[{i}]"))
        elif spec.k8s_ref is not None and spec.k8s_ref.endswith("PodTemplateSpec"):
            errs.extend(_pod_template_errors(value, field))
    return errs


def _pod_template_errors(template: dict[str, Any], path: str) -> list[FieldError]:
    pod_spec = template.get("spec")
    if isinstance(pod_spec, dict) and "containers" not in pod_spec:
        return [required(f"{path}.spec.containers")]
    return []


def _validate_counts(spec: LeaderWorkerSetSpec) -> list[FieldError]:
    errs: list[FieldError] = []
    replicas = spec.replicas
    size = spec.leader_worker_template.size if spec.leader_worker_template else None
    if replicas is not None and replicas < 0:
        errs.append(invalid(REPLICAS, replicas, "replicas must be equal or greater than 0"))
    if replicas is not None and replicas > c.MAX_REPLICAS:
        errs.append(
            invalid(REPLICAS, replicas, f"replicas must be equal or less than {c.MAX_REPLICAS}")
        )
    if size is not None and size < 1:
        errs.append(invalid(SIZE, size, "size must be equal or greater than 1"))
    if replicas is not None and size is not None and replicas * size > c.MAX_INT32:
        errs.append(
            invalid(
                REPLICAS,
                replicas,
                f"the product of replicas and worker replicas must not exceed {c.MAX_INT32}",
            )
        )
    return errs


def restart_budget_errors(spec: LeaderWorkerSetSpec, path: str = SPEC) -> list[FieldError]:
    """Upstream #877 allows the budget with RecreateGroupOnPodRestart only; we also allow
    it with RecreateGroupAfterStart, which recreates groups by the same path."""
    template = spec.leader_worker_template
    if template is None or template.max_group_restarts is None:
        return []
    # Unset is the schema's default (a DisaggregatedSet role is validated undefaulted).
    if template.restart_policy in (
        None,
        c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART,
        c.RESTART_POLICY_RECREATE_GROUP_AFTER_START,
    ):
        return []
    return [
        invalid(
            f"{path}.leaderWorkerTemplate.maxGroupRestarts",
            template.max_group_restarts,
            "maxGroupRestarts is only supported when restartPolicy is "
            "RecreateGroupOnPodRestart or RecreateGroupAfterStart",
        )
    ]


def _validate_rolling_update(spec: LeaderWorkerSetSpec) -> list[FieldError]:
    config = spec.rollout_strategy.rolling_update_configuration if spec.rollout_strategy else None
    if config is None:
        return []
    errs: list[FieldError] = []
    for path, value in ((MAX_UNAVAILABLE, config.max_unavailable), (MAX_SURGE, config.max_surge)):
        if value is not None:
            errs.extend(int_or_percent_errors(value, path))
    if config.partition is not None and config.partition < 0:
        errs.append(invalid(PARTITION, config.partition, "must be greater than or equal to 0"))

    replicas = spec.replicas if spec.replicas is not None else c.DEFAULT_REPLICAS
    unavailable = _scaled_or_error(
        config.max_unavailable, MAX_UNAVAILABLE, replicas, round_up=False, errs=errs
    )
    surge = _scaled_or_error(config.max_surge, MAX_SURGE, replicas, round_up=True, errs=errs)
    if unavailable == 0 and surge == 0 and replicas != 0:
        errs.append(
            invalid(
                MAX_UNAVAILABLE,
                config.max_unavailable,
                "must not be 0 when `maxSurge` is 0",
            )
        )
    return errs


def int_or_percent_errors(value: IntOrString, path: str) -> list[FieldError]:
    if isinstance(value, int):
        return [] if value >= 0 else [invalid(path, value, "must be greater than or equal to 0")]
    if not is_percent(value):
        return [invalid(path, value, PERCENT_FORMAT_MSG)]
    if int(value[:-1]) > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []


def _scaled_or_error(
    value: IntOrString | None,
    path: str,
    replicas: int,
    *,
    round_up: bool,
    errs: list[FieldError],
) -> int | None:
    if value is None:
        return None
    try:
        return scaled_value(value, replicas, round_up)
    except ValueError:
        errs.append(invalid(path, value, "invalid value"))
        return None


def _validate_subgroups(lws: LeaderWorkerSet) -> list[FieldError]:
    spec = lws.spec
    assert spec is not None
    template = spec.leader_worker_template
    policy = template.subgroup_policy if template else None
    annotations = (lws.metadata or {}).get("annotations") or {}
    if policy is None:
        if c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY in annotations:
            return [
                invalid(
                    SUBGROUP_EXCLUSIVE_ANNOTATION,
                    annotations[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY],
                    "cannot have subgroup-exclusive-topology without subGroupSize set",
                )
            ]
        return []
    size = template.size if template and template.size is not None else c.DEFAULT_SIZE
    return _subgroup_size_errors(policy, size)


def _subgroup_size_errors(policy: SubGroupPolicy, size: int) -> list[FieldError]:
    sgs = policy.subgroup_size
    if sgs is None:
        return [required(SUBGROUP_SIZE, "subGroupSize is required when subGroupPolicy is set")]
    if sgs < 1:
        return [invalid(SUBGROUP_SIZE, sgs, "subGroupSize must be equal or greater than 1")]
    errs: list[FieldError] = []
    if size % sgs != 0 and (size - 1) % sgs != 0:
        errs.append(
            invalid(SUBGROUP_SIZE, sgs, "size or size - 1 must be divisible by subGroupSize")
        )
    if size < sgs:
        errs.append(invalid(SUBGROUP_SIZE, sgs, "subGroupSize cannot be larger than size"))
    if policy.type == c.SUBGROUP_POLICY_LEADER_EXCLUDED and (size - 1) % sgs != 0:
        errs.append(
            invalid(
                SUBGROUP_SIZE,
                sgs,
                "size-1 must be divisible by subGroupSize when using LeaderExcluded",
            )
        )
    return errs


def group_identity_errors(spec: LeaderWorkerSetSpec, path: str = SPEC) -> list[FieldError]:
    """The Group Identity rules of a LeaderWorkerSet spec at `path` (a DisaggregatedSet
    role's spec is checked by the same rules, under its own path)."""
    errs: list[FieldError] = []
    identity = group_identity_of(spec)
    if (
        identity == c.GROUP_IDENTITY_ORDINAL
        and spec.group_replacement_policy == c.GROUP_REPLACEMENT_IMMEDIATE
    ):
        errs.append(
            invalid(
                child_path(path, "groupReplacementPolicy"),
                spec.group_replacement_policy,
                "Immediate requires groupIdentity Hash: with Ordinal a StatefulSet always "
                "waits for the previous leader pod to be gone",
            )
        )
    if not is_hash_mode(identity):
        return errs
    template = spec.leader_worker_template
    claims = template.volume_claim_templates if template else None
    if claims:
        names = [_claim_name(claim) for claim in claims]
        errs.append(
            invalid(
                child_path(path, "leaderWorkerTemplate.volumeClaimTemplates"),
                names,
                "volumeClaimTemplates are not supported with groupIdentity Hash: a claim "
                "reattaches to a successor of the same identity, which Hash never reuses; "
                "use generic ephemeral volumes (spec.volumes[].ephemeral) for per-group "
                "scratch storage",
            )
        )
    config = spec.rollout_strategy.rolling_update_configuration if spec.rollout_strategy else None
    if config is not None and config.partition:
        errs.append(
            invalid(
                child_path(path, "rolloutStrategy.rollingUpdateConfiguration.partition"),
                config.partition,
                "partition is not supported with groupIdentity Hash: it is defined over "
                "group ordinals, which a Deployment does not have",
            )
        )
    return errs


def _validate_transition(new: LeaderWorkerSet, old: LeaderWorkerSet) -> list[FieldError]:
    errs: list[FieldError] = []
    new_spec, old_spec = new.spec, old.spec
    if new_spec is None or old_spec is None:
        return errs
    new_policy = _subgroup_policy(new_spec)
    old_policy = _subgroup_policy(old_spec)
    if new_policy is not None and old_policy is not None:
        if new_policy.subgroup_size != old_policy.subgroup_size:
            errs.append(immutable(SUBGROUP_SIZE, new_policy.subgroup_size))
    elif new_policy is not None:
        errs.append(
            forbidden(
                SUBGROUP_SIZE,
                "cannot enable subGroupSize after the lws is already created",
                new_policy.subgroup_size,
            )
        )
    elif old_policy is not None:
        errs.append(
            forbidden(
                SUBGROUP_SIZE,
                "cannot remove subGroupSize after enabled",
                old_policy.subgroup_size,
            )
        )
    if new_spec.network_config is not None and new_spec.network_config.subdomain_policy is None:
        errs.append(invalid(SUBDOMAIN_POLICY, None, "cannot set subdomainPolicy as null"))
    if group_identity_of(new_spec) != group_identity_of(old_spec):
        errs.append(immutable(GROUP_IDENTITY, group_identity_of(new_spec)))
    errs.extend(crd_transition_errors(new, old))
    return errs


def _subgroup_policy(spec: LeaderWorkerSetSpec) -> SubGroupPolicy | None:
    template = spec.leader_worker_template
    return template.subgroup_policy if template else None


def warnings_for(lws: LeaderWorkerSet) -> list[str]:
    """Advice returned as admission warnings: valid objects that will misbehave."""
    spec = lws.spec
    name = lws.name
    if spec is None or not name:
        return []
    longest_owner = len(name)
    if is_hash_mode(group_identity_of(spec)):
        # Worker StatefulSets are named after Deployment-made leader pods.
        longest_owner += _DEPLOYMENT_POD_SUFFIX
        where = "leader pod names of a Hash-mode LeaderWorkerSet"
    else:
        replicas = spec.replicas if spec.replicas is not None else c.DEFAULT_REPLICAS
        longest_owner += 1 + len(str(max(replicas - 1, 0)))
        where = "worker StatefulSet names"
    if longest_owner + _REVISION_LABEL_SUFFIX > _LABEL_VALUE_MAX:
        return [
            f"metadata.name: {name!r} is too long: {where} would reach {longest_owner} "
            f"characters, so the StatefulSet controller's controller-revision-hash pod label "
            f"would exceed {_LABEL_VALUE_MAX} characters and worker pods could not be created"
        ]
    return []
