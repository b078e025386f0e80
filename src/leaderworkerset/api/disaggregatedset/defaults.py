"""Defaulting of DisaggregatedSets and RoleScalers, as pure functions over the model.

Upstream has no mutating webhook for these kinds: every default is a `default:` of
the CRD schema, which the API server applies (a member gets its default only when it
is absent and its parent object is present). Replaying them lets validation and the
unit tests see what the server stores. The embedded LeaderWorkerSet spec takes the
LeaderWorkerSet model's schema defaults, except those of our Group Identity members,
which a role's schema leaves absent (the LeaderWorkerSet webhook defaults them on the
role's LeaderWorkerSets), so a set that does not use them is stored as upstream stores it.
"""

from __future__ import annotations

import copy

from leaderworkerset.api.disaggregatedset.types import (
    DisaggregatedSet,
    DisaggregatedSetRoleScaler,
)
from leaderworkerset.api.leaderworkerset.defaults import apply_schema_defaults


def default_disaggregatedset(ds: DisaggregatedSet) -> DisaggregatedSet:
    out = copy.deepcopy(ds)
    specs = [role.spec for role in out.roles if role.spec is not None]
    absent = [(s.group_identity is None, s.group_replacement_policy is None) for s in specs]
    apply_schema_defaults(out)
    for spec, (no_identity, no_replacement) in zip(specs, absent, strict=True):
        if no_identity:
            spec.group_identity = None
        if no_replacement:
            spec.group_replacement_policy = None
    return out


def default_role_scaler(scaler: DisaggregatedSetRoleScaler) -> DisaggregatedSetRoleScaler:
    out = copy.deepcopy(scaler)
    apply_schema_defaults(out)
    return out
