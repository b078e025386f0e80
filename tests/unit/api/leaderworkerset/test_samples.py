"""The sample manifests (our own, in the shapes upstream ships) default and validate."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from leaderworkerset.api.leaderworkerset.defaults import default_leaderworkerset
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import validate_create
from tests.toolkit.paths import REPO

SAMPLES = REPO / "config" / "samples"
SHAPES = {
    "worker-template-only.yaml": lambda s: "leaderTemplate" not in s["leaderWorkerTemplate"],
    "leader-and-worker.yaml": lambda s: "leaderTemplate" in s["leaderWorkerTemplate"],
    "subgroups.yaml": lambda s: "subGroupPolicy" in s["leaderWorkerTemplate"],
    "exclusive-placement.yaml": lambda s: True,
    "volume-claim-templates.yaml": lambda s: "volumeClaimTemplates" in s["leaderWorkerTemplate"],
    "rollout-strategy.yaml": lambda s: "rollingUpdateConfiguration" in s["rolloutStrategy"],
    "hash-identity.yaml": lambda s: s["groupIdentity"] == "Hash",
}


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return data


def test_every_sample_is_listed() -> None:
    kinds = {p.name: yaml.safe_load(p.read_text())["kind"] for p in SAMPLES.glob("*.yaml")}
    assert {name for name, kind in kinds.items() if kind == "LeaderWorkerSet"} == set(SHAPES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_sample_defaults_and_validates(name: str) -> None:
    data = _load(name)
    assert SHAPES[name](data["spec"])
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == []
    defaulted = default_leaderworkerset(lws)
    assert validate_create(defaulted) == []
    spec = defaulted.to_json()["spec"]
    assert spec["rolloutStrategy"]["type"] == "RollingUpdate"
    assert spec["networkConfig"]["subdomainPolicy"] in ("Shared", "UniquePerReplica")


def test_exclusive_sample_carries_the_annotation() -> None:
    annotations = _load("exclusive-placement.yaml")["metadata"]["annotations"]
    assert "leaderworkerset.sigs.k8s.io/exclusive-topology" in annotations


def test_hash_sample_with_claims_is_rejected() -> None:
    data = _load("volume-claim-templates.yaml")
    data["spec"]["groupIdentity"] = "Hash"
    lws, _ = LeaderWorkerSet.from_json(data)
    errors = validate_create(default_leaderworkerset(lws))
    assert [e.field for e in errors] == ["spec.leaderWorkerTemplate.volumeClaimTemplates"]
