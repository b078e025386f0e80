"""The pod affinity a placement policy adds to a slice's pod templates (KEP-848).

Every term keys off the set-name and slice labels that each pod of a DisaggregatedSet
carries, over the policy's topology (a node label):

- ExclusiveSlice: the pods of one slice share a domain (affinity: same set, same
  slice), and the slices of this set use different domains (anti-affinity: same set,
  another slice). Other sets may share a domain.
- ExclusiveTopology: the same, plus anti-affinity to any other set's slice, so a domain
  holds one slice of all DisaggregatedSets.

The terms are appended to what the template already has; nothing is removed.
"""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.types import PlacementPolicy
from leaderworkerset.api.objects import JSON

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def with_placement(
    pod_spec: JSON, set_name: str, slice_index: int, policy: PlacementPolicy | None
) -> JSON:
    """A copy of `pod_spec` with the policy's affinity terms added. No policy, None, or no
    topology (validation refuses that) adds nothing: a term needs a topologyKey."""
    out = copy.deepcopy(pod_spec)
    if policy is None or policy.type in (None, "", c.PLACEMENT_NONE) or not policy.topology:
        return out
    topology = policy.topology
    affinity = _member(out, "affinity")
    co_locate = _member(affinity, "podAffinity")
    spread = _member(affinity, "podAntiAffinity")
    _terms(co_locate).append(
        _term(topology, _is_in(c.LABEL_SET_NAME, set_name), _is_in(c.LABEL_SLICE, str(slice_index)))
    )
    _terms(spread).append(_term(topology, *_other_slices_of_this_set(set_name, slice_index)))
    if policy.type == c.PLACEMENT_EXCLUSIVE_TOPOLOGY:
        # The set label must exist: NotIn alone would also repel pods of no set at all.
        _terms(spread).append(
            _term(
                topology,
                _exists(c.LABEL_SET_NAME),
                _not_in(c.LABEL_SET_NAME, set_name),
                _exists(c.LABEL_SLICE),
            )
        )
    return out


def _other_slices_of_this_set(set_name: str, slice_index: int) -> list[JSON]:
    """Same set, another slice. A pod without a slice label was made before slices and
    belongs to slice 0: NotIn matches it, which is right for other slices, but slice 0
    must not repel it, so slice 0's term also asks for the label to exist."""
    expressions = [_is_in(c.LABEL_SET_NAME, set_name)]
    if slice_index == 0:
        expressions.append(_exists(c.LABEL_SLICE))
    expressions.append(_not_in(c.LABEL_SLICE, str(slice_index)))
    return expressions


def _term(topology: str, *expressions: JSON) -> JSON:
    return {"labelSelector": {"matchExpressions": list(expressions)}, "topologyKey": topology}


def _is_in(key: str, value: str) -> JSON:
    return {"key": key, "operator": "In", "values": [value]}


def _not_in(key: str, value: str) -> JSON:
    return {"key": key, "operator": "NotIn", "values": [value]}


def _exists(key: str) -> JSON:
    return {"key": key, "operator": "Exists"}


def _member(parent: JSON, name: str) -> JSON:
    value = parent.get(name)
    if not isinstance(value, dict):
        value = parent[name] = {}
    return value


def _terms(affinity: JSON) -> list[Any]:
    terms = affinity.get(_REQUIRED)
    if not isinstance(terms, list):
        terms = affinity[_REQUIRED] = []
    return terms
