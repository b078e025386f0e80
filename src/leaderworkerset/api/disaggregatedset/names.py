"""Names, labels, selectors and the revision of what a DisaggregatedSet owns, spelled
as upstream's v0.10.0 spells them so that either controller finds the other's objects.

- LeaderWorkerSet: `<set>-<slice>-<revision>-<role>` (before slices existed:
  `<set>-<revision>-<role>`, which still names slice 0 of old objects).
- headless Service of a LeaderWorkerSet: `<lws>-prv`.
- DisaggregatedSetRoleScaler of an External role: `<set>-<role>`.
- revision: the first 8 hex digits of the SHA-256 of the role names and
  leaderWorkerTemplates, as Go encodes them (`api.go.encoding`), and, only for a role that
  departs from the LeaderWorkerSet defaults, its Group Identity members.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Final

from leaderworkerset.api.codec import encode
from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec
from leaderworkerset.api.go.encoding import LEADER_WORKER_TEMPLATE, go_json, go_string
from leaderworkerset.api.leaderworkerset import constants as lws
from leaderworkerset.api.leaderworkerset.types import (
    LeaderWorkerSetSpec,
    group_identity_of,
    is_hash_mode,
)

_INT32: Final = re.compile(r"[+-]?[0-9]+")


def lws_name(set_name: str, slice_index: int, revision: str, role: str) -> str:
    return f"{set_name}-{slice_index}-{revision}-{role}"


def legacy_lws_name(set_name: str, revision: str, role: str) -> str:
    """The name before slices: it still names slice 0 of a set made by v0.9."""
    return f"{set_name}-{revision}-{role}"


def service_name(leaderworkerset_name: str) -> str:
    """The headless Service of one LeaderWorkerSet (a legacy one included)."""
    return leaderworkerset_name + c.SERVICE_SUFFIX


def scaler_name(set_name: str, role: str) -> str:
    return f"{set_name}-{role}"


def lws_labels(set_name: str, slice_index: int, revision: str, role: str) -> dict[str, str]:
    """The labels of a LeaderWorkerSet and of its pod templates."""
    return {
        c.LABEL_APP: f"{set_name}-{slice_index}-{role}",
        c.LABEL_ROLE: role,
        c.LABEL_SLICE: str(slice_index),
        c.LABEL_SET_NAME: set_name,
        c.LABEL_REVISION: revision,
    }


def service_selector(set_name: str, leaderworkerset_labels: Mapping[str, str]) -> dict[str, str]:
    """The selector (and labels) of a LeaderWorkerSet's Service: its set, role and revision,
    and its slice unless it is a legacy one without a slice label."""
    selector = {
        c.LABEL_SET_NAME: set_name,
        c.LABEL_ROLE: leaderworkerset_labels.get(c.LABEL_ROLE, ""),
        c.LABEL_REVISION: leaderworkerset_labels.get(c.LABEL_REVISION, ""),
    }
    if has_slice_label(leaderworkerset_labels):
        selector[c.LABEL_SLICE] = leaderworkerset_labels[c.LABEL_SLICE]
    return selector


def scaler_labels(set_name: str, role: str) -> dict[str, str]:
    return {c.LABEL_SET_NAME: set_name, c.LABEL_ROLE: role}


def scaler_selector(set_name: str, role: str) -> str:
    """The RoleScaler's status.selector: the role's leader pods, one per group."""
    return (
        f"{c.LABEL_SET_NAME}={set_name},{c.LABEL_ROLE}={role},"
        f"{lws.LABEL_WORKER_INDEX}={lws.LEADER_WORKER_INDEX}"
    )


def has_slice_label(labels: Mapping[str, str]) -> bool:
    """Made by a slice-aware controller (a non-empty slice label)."""
    return bool(labels.get(c.LABEL_SLICE))


def slice_label_matches(labels: Mapping[str, str], slice_index: int) -> bool:
    """Whether an object belongs to a slice; a negative slice matches every slice, and
    slice 0 also takes objects without a slice label (made before slices existed)."""
    if slice_index < 0:
        return True
    value = labels.get(c.LABEL_SLICE)
    if not value:
        return slice_index == 0
    return value == str(slice_index)


def slice_of(label: str | None) -> int | None:
    """A slice label as upstream reads it (Go's Atoi: an optional sign and ASCII
    digits, nothing else), or None when it is absent or not a number."""
    if not label or not _INT32.fullmatch(label):
        return None
    return int(label)


def initial_replicas(annotations: Mapping[str, str] | None) -> int | None:
    """The initial-replicas annotation as upstream reads it (a base-10 int32, sign
    allowed), or None when absent, empty or not a number."""
    value = (annotations or {}).get(c.ANNOTATION_INITIAL_REPLICAS)
    if not value or not _INT32.fullmatch(value):
        return None
    number = int(value)
    return number if -(2**31) <= number < 2**31 else None


def compute_revision(roles: Sequence[DisaggregatedRoleSpec]) -> str:
    """The revision of a set of roles: their names and leaderWorkerTemplates, in order.
    Replicas, rollout settings, scaling, slices and placement are not part of it, so
    changing them starts no rollout. A role's Group Identity members are, but only when
    they differ from the LeaderWorkerSet defaults: a set that does not use them (or
    spells out the defaults) keeps upstream's revision, while changing them makes new
    LeaderWorkerSets, as a LeaderWorkerSet's groupIdentity cannot change in place."""
    parts = []
    for role in roles:
        template = role.spec.leader_worker_template if role.spec is not None else None
        encoded = go_json(encode(template) if template is not None else {}, LEADER_WORKER_TEMPLATE)
        ours = _group_identity_members(role.spec)
        parts.append(f'{{"name":{go_string(role.name or "")},"template":{encoded}{ours}}}')
    document = "[" + ",".join(parts) + "]"
    return hashlib.sha256(document.encode("utf-8")).hexdigest()[: c.REVISION_LENGTH]


def _group_identity_members(spec: LeaderWorkerSetSpec | None) -> str:
    """`,"groupIdentity":"Hash"` (and the replacement policy when not the default) for a
    Hash role; nothing for an Ordinal one, whatever it spells out."""
    if spec is None or not is_hash_mode(group_identity_of(spec)):
        return ""
    out = f',"groupIdentity":{go_string(lws.GROUP_IDENTITY_HASH)}'
    policy = spec.group_replacement_policy
    if policy not in (None, lws.GROUP_REPLACEMENT_POST_TERMINATION):
        out += f',"groupReplacementPolicy":{go_string(policy or "")}'
    return out
