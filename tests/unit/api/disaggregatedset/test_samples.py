"""The DisaggregatedSet sample manifests (our own, after docs/disaggregatedset.md)
default and validate, and each shows what its comment says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from leaderworkerset.api.disaggregatedset.defaults import default_disaggregatedset
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.disaggregatedset.validation import validate_create, warnings_for
from leaderworkerset.api.schema_check import check_against_schema
from tests.toolkit.paths import REPO

SAMPLES = REPO / "config" / "samples"
SHAPES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "disaggregatedset.yaml": lambda s: [r["name"] for r in s["roles"]] == ["prefill", "decode"],
    "disaggregatedset-placement.yaml": lambda s: (
        s["slices"] > 1 and s["placementPolicy"]["type"] == "ExclusiveSlice"
    ),
    "disaggregatedset-autoscaled.yaml": lambda s: any(
        r.get("scaling", {}).get("mode") == "External" for r in s["roles"]
    ),
}


def test_every_sample_is_listed() -> None:
    kinds = {p.name: yaml.safe_load(p.read_text())["kind"] for p in SAMPLES.glob("*.yaml")}
    assert {name for name, kind in kinds.items() if kind == "DisaggregatedSet"} == set(SHAPES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_sample_defaults_and_validates(name: str) -> None:
    data = yaml.safe_load((SAMPLES / name).read_text())
    assert SHAPES[name](data["spec"])
    findings = check_against_schema(data)
    assert findings.unknown == [] and findings.errors == []
    ds, errors = DisaggregatedSet.from_json(data)
    assert errors == []
    defaulted = default_disaggregatedset(ds)
    assert validate_create(defaulted) == []
    assert warnings_for(defaulted) == []
