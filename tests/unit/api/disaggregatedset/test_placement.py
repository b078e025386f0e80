"""The affinity of a placement policy, case by case against upstream's
TestSetPlacementAffinities (v0.10.0 affinity_test.go)."""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.disaggregatedset.placement import with_placement
from leaderworkerset.api.disaggregatedset.types import PlacementPolicy

DS = "my-ds"
TOPOLOGY = "cloud.google.com/gke-nodepool"
NAME = "disaggregatedset.x-k8s.io/name"
SLICE = "disaggregatedset.x-k8s.io/slice"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def policy(kind: str, topology: str = TOPOLOGY) -> PlacementPolicy:
    return PlacementPolicy(type=kind, topology=topology)


def terms(spec: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = spec["affinity"][kind][REQUIRED]
    return found


def test_nil_policy_injects_nothing() -> None:
    assert with_placement({}, DS, 0, None) == {}


def test_none_injects_nothing() -> None:
    assert with_placement({}, DS, 0, policy("None")) == {}


def test_non_none_with_empty_topology_injects_nothing() -> None:
    assert with_placement({}, DS, 0, policy("ExclusiveSlice", "")) == {}


def test_exclusive_slice_injects_co_location_and_same_set_spread() -> None:
    spec = with_placement({}, DS, 1, policy("ExclusiveSlice"))
    assert terms(spec, "podAffinity") == [
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": NAME, "operator": "In", "values": [DS]},
                    {"key": SLICE, "operator": "In", "values": ["1"]},
                ]
            },
            "topologyKey": TOPOLOGY,
        }
    ]
    assert terms(spec, "podAntiAffinity") == [
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": NAME, "operator": "In", "values": [DS]},
                    {"key": SLICE, "operator": "NotIn", "values": ["1"]},
                ]
            },
            "topologyKey": TOPOLOGY,
        }
    ]


def test_slice_0_spread_requires_the_slice_label_to_exist() -> None:
    (spread,) = terms(with_placement({}, DS, 0, policy("ExclusiveSlice")), "podAntiAffinity")
    assert spread["labelSelector"]["matchExpressions"] == [
        {"key": NAME, "operator": "In", "values": [DS]},
        {"key": SLICE, "operator": "Exists"},
        {"key": SLICE, "operator": "NotIn", "values": ["0"]},
    ]


def test_exclusive_topology_adds_cross_set_exclusion() -> None:
    spec = with_placement({}, DS, 0, policy("ExclusiveTopology"))
    assert len(terms(spec, "podAffinity")) == 1
    _, exclusion = terms(spec, "podAntiAffinity")
    assert exclusion == {
        "labelSelector": {
            "matchExpressions": [
                {"key": NAME, "operator": "Exists"},
                {"key": NAME, "operator": "NotIn", "values": [DS]},
                {"key": SLICE, "operator": "Exists"},
            ]
        },
        "topologyKey": TOPOLOGY,
    }


def test_preserves_existing_affinity_without_mutating_the_callers_copy() -> None:
    existing = {
        "affinity": {
            "podAffinity": {REQUIRED: [{"topologyKey": "existing-key"}]},
            "nodeAffinity": {},
        },
        "containers": [{"name": "c"}],
    }
    before = copy.deepcopy(existing)
    spec = with_placement(existing, DS, 0, policy("ExclusiveSlice"))
    affinity = terms(spec, "podAffinity")
    assert len(affinity) == 2
    assert affinity[0] == {"topologyKey": "existing-key"}
    assert "nodeAffinity" in spec["affinity"]
    assert spec["containers"] == [{"name": "c"}]
    assert existing == before
