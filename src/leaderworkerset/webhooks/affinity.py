"""Exclusive placement terms of a pod.

A pair of required terms over one node topology: affinity to pods with the same
key value, anti-affinity against pods with a different value of that key. The
anti-affinity term also keeps other groups out once this pod is placed, which
is why workers need only a nodeSelector.
"""

from __future__ import annotations

from typing import Any

from leaderworkerset.webhooks.nested import Pod, child_map

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _has_term(kind: dict[str, Any] | None, topology_key: str) -> bool:
    terms = (kind or {}).get(_REQUIRED) or []
    return any(term.get("topologyKey") == topology_key for term in terms)


def has_exclusive_terms(pod: Pod, topology_key: str) -> bool:
    """Upstream compares only topology keys, so any pair of required terms over
    the same topology counts, whatever they select. Kept on purpose, see
    docs/upstream-deviations.md#equal-group-and-subgroup-topology-keys."""
    affinity = (pod.get("spec") or {}).get("affinity")
    if affinity is None:
        return False
    pod_affinity = affinity.get("podAffinity")
    anti_affinity = affinity.get("podAntiAffinity")
    if pod_affinity is None or anti_affinity is None:
        return False
    return _has_term(pod_affinity, topology_key) and _has_term(anti_affinity, topology_key)


def add_exclusive_affinity(pod: Pod, value: str, topology_key: str, label_key: str) -> None:
    """Append the exclusive pair for `label_key == value` over `topology_key`, in place.

    Existing terms are kept; nothing is added when terms over the same topology exist.
    """
    if has_exclusive_terms(pod, topology_key):
        return
    affinity = child_map(child_map(pod, "spec"), "affinity")
    same = {"key": label_key, "operator": "In", "values": [value]}
    others = [
        {"key": label_key, "operator": "Exists"},
        {"key": label_key, "operator": "NotIn", "values": [value]},
    ]
    pod_affinity = child_map(affinity, "podAffinity")
    anti_affinity = child_map(affinity, "podAntiAffinity")
    if pod_affinity.get(_REQUIRED) is None:
        pod_affinity[_REQUIRED] = []
    if anti_affinity.get(_REQUIRED) is None:
        anti_affinity[_REQUIRED] = []
    pod_affinity[_REQUIRED].append(
        {"labelSelector": {"matchExpressions": [same]}, "topologyKey": topology_key}
    )
    anti_affinity[_REQUIRED].append(
        {"labelSelector": {"matchExpressions": others}, "topologyKey": topology_key}
    )
