"""Defaulting, as pure functions over the model.

Two layers, applied in the API server's order:
- `apply_schema_defaults`: the `default:` values of the CRD schema (a field gets
  its default only when it is absent and its parent object is present). The API
  server applies these itself; we replay them so that `lws validate` and the
  unit tests see what the server would store.
- `apply_webhook_defaults`: what the mutating admission webhook adds.
`default_leaderworkerset` does both and returns a new object; it is idempotent.
"""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.api.fields import Kind, api_fields
from leaderworkerset.api.types import (
    LeaderWorkerSet,
    NetworkConfig,
    RollingUpdateConfiguration,
    RolloutStrategy,
)


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
