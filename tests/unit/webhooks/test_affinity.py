"""Exclusive placement terms."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.webhooks.affinity import add_exclusive_affinity, has_exclusive_terms

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
LABEL = c.LABEL_GROUP_KEY
AFFINITY_TERM = {
    "labelSelector": {"matchExpressions": [{"key": LABEL, "operator": "In", "values": ["k"]}]},
    "topologyKey": "zone",
}
ANTI_TERM = {
    "labelSelector": {
        "matchExpressions": [
            {"key": LABEL, "operator": "Exists"},
            {"key": LABEL, "operator": "NotIn", "values": ["k"]},
        ]
    },
    "topologyKey": "zone",
}


def term(topology: str, app: str = "other") -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology}


def pod_with(affinity: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"spec": spec}


def test_adds_the_exclusive_pair_to_a_bare_pod() -> None:
    pod = pod_with(None)
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    assert pod["spec"]["affinity"] == {
        "podAffinity": {REQ: [AFFINITY_TERM]},
        "podAntiAffinity": {REQ: [ANTI_TERM]},
    }


def test_creates_spec_when_missing() -> None:
    pod: dict[str, Any] = {}
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    assert pod["spec"]["affinity"]["podAffinity"][REQ] == [AFFINITY_TERM]


@pytest.mark.parametrize(
    "affinity",
    [
        {},
        {"podAffinity": None, "podAntiAffinity": None},
        {"podAffinity": {REQ: None}, "podAntiAffinity": {}},
    ],
)
def test_fills_null_members(affinity: dict[str, Any]) -> None:
    pod = pod_with(affinity)
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    assert pod["spec"]["affinity"]["podAffinity"][REQ] == [AFFINITY_TERM]
    assert pod["spec"]["affinity"]["podAntiAffinity"][REQ] == [ANTI_TERM]


def test_appends_after_existing_terms_and_keeps_everything_else() -> None:
    node_affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
    }
    preferred = [{"weight": 1, "podAffinityTerm": term("host")}]
    pod = pod_with(
        {
            "nodeAffinity": node_affinity,
            "podAffinity": {
                REQ: [term("host")],
                "preferredDuringSchedulingIgnoredDuringExecution": preferred,
            },
            "podAntiAffinity": {REQ: [term("rack")]},
        }
    )
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    affinity = pod["spec"]["affinity"]
    assert affinity["nodeAffinity"] == node_affinity
    assert affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert affinity["podAffinity"][REQ] == [term("host"), AFFINITY_TERM]
    assert affinity["podAntiAffinity"][REQ] == [term("rack"), ANTI_TERM]


def test_is_idempotent() -> None:
    pod = pod_with(None)
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    once = copy.deepcopy(pod)
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    assert pod == once


def test_only_topology_keys_are_compared() -> None:
    # Any pair over the same topology counts as present, whatever it selects (upstream).
    pod = pod_with({"podAffinity": {REQ: [term("zone")]}, "podAntiAffinity": {REQ: [term("zone")]}})
    before = copy.deepcopy(pod)
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    assert pod == before


def test_one_sided_presence_adds_both_terms() -> None:
    pod = pod_with({"podAffinity": {REQ: [AFFINITY_TERM]}})
    assert not has_exclusive_terms(pod, "zone")
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    assert pod["spec"]["affinity"]["podAffinity"][REQ] == [AFFINITY_TERM, AFFINITY_TERM]
    assert pod["spec"]["affinity"]["podAntiAffinity"][REQ] == [ANTI_TERM]


def test_different_topologies_get_separate_pairs() -> None:
    pod = pod_with(None)
    add_exclusive_affinity(pod, "k", "zone", LABEL)
    add_exclusive_affinity(pod, "s", "rack", c.LABEL_SUBGROUP_KEY)
    affinity = pod["spec"]["affinity"]["podAffinity"][REQ]
    assert [t["topologyKey"] for t in affinity] == ["zone", "rack"]
    assert affinity[1]["labelSelector"]["matchExpressions"] == [
        {"key": c.LABEL_SUBGROUP_KEY, "operator": "In", "values": ["s"]}
    ]


def test_has_exclusive_terms_needs_all_objects() -> None:
    assert not has_exclusive_terms(pod_with(None), "zone")
    assert not has_exclusive_terms(pod_with({"podAffinity": {REQ: [term("zone")]}}), "zone")
    both = pod_with(
        {"podAffinity": {REQ: [term("zone")]}, "podAntiAffinity": {REQ: [term("zone")]}}
    )
    assert has_exclusive_terms(both, "zone")
    assert not has_exclusive_terms(both, "rack")
