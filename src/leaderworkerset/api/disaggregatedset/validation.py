"""Validation of DisaggregatedSets, as pure functions returning every error at once,
each with its Kubernetes field path (`spec.roles[1].name`).

`validate_create` and `validate_update` run on the defaulted object (what a validating
webhook sees). They cover:
- what the CRD schema makes the API server check: 2 to 10 roles with unique names of
  at most 63 characters, enums, bounds, required members, and its CEL rule (the
  non-External roles' replicas are all zero or all positive);
- upstream's webhook: rolloutStrategy.type RollingUpdate, no partition, maxSurge and
  maxUnavailable not both 0, a RoleScaler name within 253 characters, no External role
  with several slices, a topology for any placement but None, and no LeaderWorkerSet
  exclusive-placement annotation together with a placement policy;
- ours: the names the set gives its LeaderWorkerSets and Services must be valid, and
  so must the placement topology (a label key: the roles' pod affinity topologyKey),
  so a set is refused at admission rather than failing later, at every LeaderWorkerSet
  creation. An update that leaves such an error as it was is admitted, so a set
  created under upstream can still be edited. A role's Group Identity members
  (`groupIdentity`, `groupReplacementPolicy`) follow the LeaderWorkerSet's own rules
  (the same function checks both), and so does its `scheduling`
  (`role_scheduling_errors`, which needs what the controller serves). The rest of a
  role's LeaderWorkerSet is judged whole, as the LeaderWorkerSet webhooks will judge
  what the controller sends, by `role_admission`.
Upstream makes no field immutable, and neither do we: a role's groupIdentity is
immutable on a LeaderWorkerSet, but changing it on a set makes a new revision, whose
LeaderWorkerSets are new objects.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import lws_name, scaler_name, service_name
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec, DisaggregatedSet
from leaderworkerset.api.errors import (
    ErrorType,
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
)
from leaderworkerset.api.go.intstr import scaled_value
from leaderworkerset.api.leaderworkerset import constants as lws
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.scheduling_validation import validate_scheduling
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import (
    group_identity_errors,
    int_or_percent_errors,
    restart_budget_errors,
    schema_errors,
)
from leaderworkerset.api.leaderworkerset.validation import warnings_for as lws_warnings_for
from leaderworkerset.api.metavalidation import (
    dns1035_label_errors,
    dns1123_subdomain_errors,
    qualified_name_errors,
)

SPEC = "spec"
ROLES = "spec.roles"
SLICES = "spec.slices"
PLACEMENT = "spec.placementPolicy"
_ROLE_NAME = re.compile(c.ROLE_NAME_PATTERN)
# The LeaderWorkerSet annotations that make its pod webhook place groups (or subgroups)
# exclusively: a placement policy of the set places whole slices, and both at once
# never schedule.
EXCLUSIVE_ANNOTATIONS = (
    lws.ANNOTATION_EXCLUSIVE_TOPOLOGY,
    lws.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY,
)


def validate_create(ds: DisaggregatedSet) -> list[FieldError]:
    return _validate(ds)


def validate_update(new: DisaggregatedSet, old: DisaggregatedSet) -> list[FieldError]:
    """The same rules as on create; name and topology errors the old object already had
    (stored before these rules, or under upstream, which has neither) are let go."""
    already = {str(e) for e in [*name_fit_errors(old), *topology_key_errors(old)]}
    return [e for e in _validate(new) if str(e) not in already]


def role_scheduling_errors(
    ds: DisaggregatedSet, old: DisaggregatedSet | None, support: SchedulingSupport
) -> list[FieldError]:
    """Each role's `scheduling`, judged by the LeaderWorkerSet webhook's own rules for
    a controller with `support`, the paths under the role (`spec.roles[0].spec.
    scheduling...`): the set is refused at admission rather than its controller being
    refused every LeaderWorkerSet it makes. A role that had `scheduling` before (by
    name) is judged as an update of it, so a block stored as it was is not checked
    again; one that gains it is judged as new (the gain is a new revision, whose
    LeaderWorkerSets are new objects)."""
    before = {role.name: role for role in old.roles} if old is not None else {}
    errs: list[FieldError] = []
    for i, role in enumerate(ds.roles):
        if role.spec is None or role.spec.scheduling is None:
            continue
        previous = before.get(role.name)
        stored = None
        if (
            previous is not None
            and previous.spec is not None
            and previous.spec.scheduling is not None
        ):
            stored = _role_lws(previous)
        for error in validate_scheduling(_role_lws(role), stored, support):
            errs.append(dataclasses.replace(error, field=_under_role(error.field, i)))
    return errs


def _role_lws(role: DisaggregatedRoleSpec) -> LeaderWorkerSet:
    """What the webhook reads of a role's LeaderWorkerSets: its spec, the role's
    annotations, and a controller owner (the set controls each one it makes)."""
    annotations = _annotations(role.metadata)
    meta = {"annotations": dict(annotations), "ownerReferences": [{"controller": True}]}
    return LeaderWorkerSet(metadata=meta, spec=role.spec)


def _under_role(field: str, index: int) -> str:
    """A LeaderWorkerSet's field path (`spec.x`, `metadata.x`) under role `index`."""
    return f"{ROLES}[{index}].{field}"


def warnings_for(ds: DisaggregatedSet) -> list[str]:
    """Upstream's admission warning (replicas above 1 on an External role are ignored),
    and ours: a role whose LeaderWorkerSets' names would be too long for their worker
    pods (`worker_name_warnings`)."""
    return [*_external_replicas_warnings(ds), *worker_name_warnings(ds)]


def worker_name_warnings(ds: DisaggregatedSet) -> list[str]:
    """The LeaderWorkerSet webhook's warning about names too long for worker pods, for
    the longest name each role's LeaderWorkerSets get. That webhook answers the
    controller, which nobody watches; and a Hash role reaches the limit much sooner (its
    worker StatefulSets are named after Deployment-made leader pods), so a set name and
    role name of 24 characters together already break it."""
    slices = (ds.spec.slices if ds.spec is not None else None) or c.DEFAULT_SLICES
    out = []
    for i, role in enumerate(ds.roles):
        template = role.spec.leader_worker_template if role.spec is not None else None
        if template is None or (template.size or 1) < 2:
            continue  # no workers, no worker StatefulSet
        longest = lws_name(ds.name, slices - 1, "x" * c.REVISION_LENGTH, role.name or "")
        lws = LeaderWorkerSet(metadata={"name": longest}, spec=role.spec)
        for warning in lws_warnings_for(lws):
            out.append(f"{ROLES}[{i}]: LeaderWorkerSet {warning.removeprefix('metadata.name: ')}")
    return out


def _external_replicas_warnings(ds: DisaggregatedSet) -> list[str]:
    out = []
    for role in ds.roles:
        replicas = role.spec.replicas if role.spec is not None else None
        if role.external and replicas is not None and replicas > 1:
            out.append(
                f"role {json.dumps(role.name)} sets scaling.mode: External and spec.replicas: "
                f"{replicas} — spec.replicas is ignored; drive replicas via "
                f"DisaggregatedSetRoleScaler {json.dumps(scaler_name(ds.name, role.name or ''))}"
                " instead"
            )
    return out


def _validate(ds: DisaggregatedSet) -> list[FieldError]:
    if ds.spec is None:
        return [required(SPEC)]
    rules = [*_role_rules(ds), *_slice_rules(ds), *_placement_rules(ds), *name_fit_errors(ds)]
    # The API server's schema check speaks first; where a webhook rule covers the same
    # field, its wording is the one reported.
    ruled = {e.field for e in rules}
    schema = [e for e in _schema_rules(ds) if e.field not in ruled]
    return schema + rules


# --- What the CRD schema enforces ------------------------------------------------------


def _schema_rules(ds: DisaggregatedSet) -> list[FieldError]:
    assert ds.spec is not None
    errs = schema_errors(ds.spec, SPEC)
    roles = ds.spec.roles
    if roles is not None:
        errs.extend(_role_count_errors(len(roles)))
        errs.extend(_role_name_errors(roles))
        if not _replicas_all_or_nothing(roles):
            errs.append(invalid(SPEC, "object", c.REPLICAS_RULE_MESSAGE))
    return errs


def _role_count_errors(count: int) -> list[FieldError]:
    if count < c.MIN_ROLES:
        return [invalid(ROLES, count, f"{ROLES} in body should have at least {c.MIN_ROLES} items")]
    if count > c.MAX_ROLES:
        return [invalid(ROLES, count, f"{ROLES} in body should have at most {c.MAX_ROLES} items")]
    return []


def _role_name_errors(roles: Sequence[DisaggregatedRoleSpec]) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, role in enumerate(roles):
        path = f"{ROLES}[{i}].name"
        name = role.name
        if name is None:
            continue  # schema_errors reports it as required
        if name in seen:
            errs.append(FieldError(ErrorType.DUPLICATE, f"{ROLES}[{i}]", {"name": name}))
        seen.add(name)
        if not name:
            errs.append(invalid(path, name, f"{path} in body should be at least 1 chars long"))
        elif len(name) > c.ROLE_NAME_MAX_LENGTH:
            errs.append(too_long(path, name, c.ROLE_NAME_MAX_LENGTH))
        elif not _ROLE_NAME.fullmatch(name):
            errs.append(invalid(path, name, f"{path} in body should match '{c.ROLE_NAME_PATTERN}'"))
    return errs


def _replicas_all_or_nothing(roles: Sequence[DisaggregatedRoleSpec]) -> bool:
    """The CRD's CEL rule: non-External roles have all zero (or absent) replicas, or all
    positive ones."""
    replicas = [role.spec.replicas if role.spec else None for role in roles if not role.external]
    return all(r is None or r == 0 for r in replicas) or all(
        r is not None and r > 0 for r in replicas
    )


# --- Upstream's webhook ------------------------------------------------------------------


def _role_rules(ds: DisaggregatedSet) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, role in enumerate(ds.roles):
        path = f"{ROLES}[{i}]"
        rollout = _rollout_errors(role, f"{path}.spec.rolloutStrategy")
        errs.extend(rollout)
        if role.spec is not None:
            # Partition is refused by the set's own rule already, in upstream's words.
            ruled = {e.field for e in rollout}
            identity = group_identity_errors(role.spec, f"{path}.spec")
            errs.extend(e for e in identity if e.field not in ruled)
            errs.extend(restart_budget_errors(role.spec, f"{path}.spec"))
        name = scaler_name(ds.name, role.name or "")
        if role.external and len(name) > c.OBJECT_NAME_MAX_LENGTH:
            errs.append(
                invalid(
                    f"{path}.name",
                    role.name,
                    f"would produce scaler name {json.dumps(name)} exceeding "
                    f"{c.OBJECT_NAME_MAX_LENGTH} characters",
                )
            )
    return errs


def _slice_rules(ds: DisaggregatedSet) -> list[FieldError]:
    assert ds.spec is not None
    slices = ds.spec.slices
    if slices is not None and slices > 1 and any(role.external for role in ds.roles):
        return [
            forbidden(
                SLICES,
                "spec.slices > 1 is not supported while any role has scaling.mode: External "
                "(alpha restriction)",
            )
        ]
    return []


def _rollout_errors(role: DisaggregatedRoleSpec, path: str) -> list[FieldError]:
    strategy = role.spec.rollout_strategy if role.spec is not None else None
    if strategy is None:
        return []
    errs: list[FieldError] = []
    if strategy.type not in (None, "", lws.ROLLOUT_STRATEGY_ROLLING_UPDATE):
        errs.append(
            not_supported(f"{path}.type", strategy.type, (lws.ROLLOUT_STRATEGY_ROLLING_UPDATE, ""))
        )
    config = strategy.rolling_update_configuration
    if config is None:
        return errs
    config_path = f"{path}.rollingUpdateConfiguration"
    if config.partition:
        errs.append(
            forbidden(
                f"{config_path}.partition",
                "partition is not supported by DisaggregatedSet; rolling updates are managed "
                "across roles by the DisaggregatedSet controller",
            )
        )
    replicas = role.spec.replicas if role.spec is not None else None
    if replicas:  # an all-zero set is valid, as the LeaderWorkerSet webhook agrees
        errs.extend(_surge_errors(config.max_unavailable, config.max_surge, replicas, config_path))
    return errs


def _surge_errors(
    max_unavailable: int | str | None, max_surge: int | str | None, replicas: int, path: str
) -> list[FieldError]:
    """maxSurge and maxUnavailable valid, and not both resolving to 0 (absent counts as 0)."""
    unavailable_path, surge_path = f"{path}.maxUnavailable", f"{path}.maxSurge"
    unavailable = 0 if max_unavailable is None else max_unavailable
    surge = 0 if max_surge is None else max_surge
    errs = int_or_percent_errors(unavailable, unavailable_path)
    errs += int_or_percent_errors(surge, surge_path)
    if errs:
        return errs
    if scaled_value(unavailable, replicas, False) == 0 and scaled_value(surge, replicas, True) == 0:
        return [invalid(unavailable_path, unavailable, "must not be 0 when `maxSurge` is 0")]
    return []


def _placement_rules(ds: DisaggregatedSet) -> list[FieldError]:
    assert ds.spec is not None
    policy = ds.spec.placement_policy
    if policy is None or policy.type in (None, "", c.PLACEMENT_NONE):
        return []
    errs: list[FieldError] = []
    if not policy.topology:
        errs.append(required(f"{PLACEMENT}.topology", "topology is required when type is not None"))
    errs += topology_key_errors(ds)
    for i, role in enumerate(ds.roles):
        key = _exclusive_annotation(role)
        if key is not None:
            errs.append(
                forbidden(
                    f"{ROLES}[{i}]",
                    f"the {json.dumps(key)} annotation must not be combined with a non-None "
                    f"spec.placementPolicy.type ({policy.type})",
                )
            )
    return errs


def topology_key_errors(ds: DisaggregatedSet) -> list[FieldError]:
    """The placement topology becomes the topologyKey of every role's pod affinity
    terms: judged as the API server judges those, but where the user wrote it."""
    policy = ds.spec.placement_policy if ds.spec is not None else None
    if policy is None or policy.type in (None, "", c.PLACEMENT_NONE) or not policy.topology:
        return []
    path = f"{PLACEMENT}.topology"
    return [invalid(path, policy.topology, m) for m in qualified_name_errors(policy.topology)]


def _exclusive_annotation(role: DisaggregatedRoleSpec) -> str | None:
    """The first exclusive-placement annotation the role sets where the LeaderWorkerSet
    webhooks read it: the role's metadata, or its leader or worker pod template."""
    template = role.spec.leader_worker_template if role.spec is not None else None
    places = [
        _annotations(role.metadata),
        _annotations((template.leader_template or {}).get("metadata") if template else None),
        _annotations((template.worker_template or {}).get("metadata") if template else None),
    ]
    for key in EXCLUSIVE_ANNOTATIONS:
        if any(key in annotations for annotations in places):
            return key
    return None


def _annotations(metadata: Any) -> dict[str, Any]:
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


# --- Ours: the generated names must be valid -----------------------------------------


def name_fit_errors(ds: DisaggregatedSet) -> list[FieldError]:
    """The set's name begins every LeaderWorkerSet name, a DNS-1035 label that the
    LeaderWorkerSet webhook checks, and the longest name, that of the last slice's
    Service (`<set>-<slice>-<revision>-<role>-prv`), must fit in 63 characters."""
    name = ds.name
    if not name or dns1123_subdomain_errors(name):
        return []  # the API server refuses the name itself
    if dns1035_label_errors(name):
        return [
            invalid(
                "metadata.name",
                name,
                "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a "
                "letter), as it begins the names of the set's LeaderWorkerSets and Services",
            )
        ]
    slices = (ds.spec.slices if ds.spec is not None else None) or c.DEFAULT_SLICES
    errs = []
    for i, role in enumerate(ds.roles):
        if (
            not _ROLE_NAME.fullmatch(role.name or "")
            or len(role.name or "") > c.ROLE_NAME_MAX_LENGTH
        ):
            continue  # the schema refuses the role name itself
        longest = service_name(lws_name(name, slices - 1, "x" * c.REVISION_LENGTH, role.name or ""))
        if len(longest) > c.DNS_LABEL_MAX_LENGTH:
            errs.append(
                invalid(
                    f"{ROLES}[{i}].name",
                    role.name,
                    f"makes Service names such as {json.dumps(longest)} longer than "
                    f"{c.DNS_LABEL_MAX_LENGTH} characters: shorten the role name or the "
                    f"DisaggregatedSet name ({len(name)} characters)",
                )
            )
    return errs
