"""Defaulting, as pure functions over the model.

Two layers, applied in the API server's order:
- `apply_schema_defaults`: the `default:` values of the CRD schema (a field gets
  its default only when it is absent and its parent object is present). The API
  server applies these itself; we replay them so that `lws validate` and the
  unit tests see what the server would store.
- `apply_webhook_defaults`: what the mutating admission webhook adds, including
  the members upstream's Go webhook adds by decoding the object into its typed
  structs and encoding it back (`fill_typed_members`).
`default_leaderworkerset` does both and returns a new object; it is idempotent.
"""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.fields import Kind, api_fields
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.types import (
    LeaderWorkerSet,
    LeaderWorkerTemplate,
    NetworkConfig,
    RollingUpdateConfiguration,
    RolloutStrategy,
)
from leaderworkerset.api.objects import JSON


def default_leaderworkerset(lws: LeaderWorkerSet) -> LeaderWorkerSet:
    out = copy.deepcopy(lws)
    apply_schema_defaults(out)
    apply_webhook_defaults(out)
    # The API server re-applies schema defaults after a mutating webhook patched the
    # object, which matters for members the webhook created (rollingUpdateConfiguration).
    apply_schema_defaults(out)
    return out


def apply_schema_defaults(model: Any) -> None:
    """Fill absent members that carry a schema default, recursing into present objects."""
    for name, spec in api_fields(type(model)):
        value = getattr(model, name)
        if value is None and spec.schema_default is not None:
            setattr(model, name, copy.deepcopy(spec.schema_default))
            continue
        if value is None:
            continue
        if spec.kind is Kind.MODEL:
            apply_schema_defaults(value)
        elif spec.kind is Kind.MODEL_LIST:
            for item in value:
                apply_schema_defaults(item)


def apply_webhook_defaults(lws: LeaderWorkerSet) -> None:
    spec = lws.spec
    if spec is None:
        return
    template = spec.leader_worker_template
    if template is not None:
        if not template.restart_policy:
            template.restart_policy = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
        if template.restart_policy == c.RESTART_POLICY_DEPRECATED_DEFAULT:
            # The deprecated spelling is never stored, so readers see one value only.
            template.restart_policy = c.RESTART_POLICY_NONE

    if spec.rollout_strategy is None:
        spec.rollout_strategy = RolloutStrategy()
    strategy = spec.rollout_strategy
    if not strategy.type:
        strategy.type = c.ROLLOUT_STRATEGY_ROLLING_UPDATE
    if (
        strategy.type == c.ROLLOUT_STRATEGY_ROLLING_UPDATE
        and strategy.rolling_update_configuration is None
    ):
        strategy.rolling_update_configuration = RollingUpdateConfiguration(
            partition=c.DEFAULT_PARTITION,
            max_unavailable=c.DEFAULT_MAX_UNAVAILABLE,
            max_surge=c.DEFAULT_MAX_SURGE,
        )

    if spec.network_config is None:
        spec.network_config = NetworkConfig(subdomain_policy=c.SUBDOMAIN_POLICY_SHARED)
    elif spec.network_config.subdomain_policy is None:
        spec.network_config.subdomain_policy = c.SUBDOMAIN_POLICY_SHARED

    # Go clients that leave startupPolicy unset send "", which the enum would reject;
    # treating it as absent is friendlier and changes nothing for valid objects.
    if not spec.startup_policy:
        spec.startup_policy = c.STARTUP_POLICY_LEADER_CREATED
    if spec.group_identity is None:
        spec.group_identity = c.GROUP_IDENTITY_ORDINAL
    if spec.group_replacement_policy is None:
        spec.group_replacement_policy = c.GROUP_REPLACEMENT_POST_TERMINATION

    if template is not None:
        fill_typed_members(template)


# --- Members a Go typed round trip always writes ---------------------------------------
#
# Go's encoding/json ignores `omitempty` on struct-typed fields, so encoding a decoded
# PodTemplateSpec writes them even when the request omitted them: the template's
# `metadata` (its null creationTimestamp is left out by current apimachinery, and
# the API server drops nulls from CRD objects anyway), every container's `resources`,
# and a resourceFieldRef's `divisor` (a zero Quantity encodes as "0"). Upstream's
# defaulting webhook patches the object with that encoding, so these members are
# stored and reach the template revision hash; persisting the same ones keeps the
# hash of a manifest equal to upstream's.

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def fill_typed_members(template: LeaderWorkerTemplate) -> None:
    for pod_template in (template.leader_template, template.worker_template):
        if isinstance(pod_template, dict):
            _fill_pod_template(pod_template)
    for claim in template.volume_claim_templates or ():
        if isinstance(claim, dict):
            _fill_claim(claim, with_status=True)


def _fill_pod_template(pod_template: JSON) -> None:
    pod_template.setdefault("metadata", {})
    spec = pod_template.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    for member in _CONTAINER_LISTS:
        for container in _dicts(spec.get(member)):
            container.setdefault("resources", {})
            for env in _dicts(container.get("env")):
                _fill_divisor(_child(_child(env, "valueFrom"), "resourceFieldRef"))
    for volume in _dicts(spec.get("volumes")):
        for item in _dicts(_child(volume, "downwardAPI").get("items")):
            _fill_divisor(_child(item, "resourceFieldRef"))
        for source in _dicts(_child(volume, "projected").get("sources")):
            for item in _dicts(_child(source, "downwardAPI").get("items")):
                _fill_divisor(_child(item, "resourceFieldRef"))
        claim = _child(_child(volume, "ephemeral"), "volumeClaimTemplate")
        if claim:
            _fill_claim(claim, with_status=False)


def _fill_claim(claim: JSON, *, with_status: bool) -> None:
    """A PersistentVolumeClaim (template): metadata, spec and spec.resources are
    structs; a full claim also has a struct status."""
    claim.setdefault("metadata", {})
    spec = claim.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("resources", {})
    if with_status:
        claim.setdefault("status", {})


def _fill_divisor(selector: JSON) -> None:
    if selector:
        selector.setdefault("divisor", "0")


def _child(obj: JSON, name: str) -> JSON:
    value = obj.get(name)
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[JSON]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
