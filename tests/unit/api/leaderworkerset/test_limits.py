"""The cluster's own size limits (leaderWorkerSetLimits in the manager Configuration):
off by default, as upstream; when set, admission refuses a LeaderWorkerSet past them
with the field named, and an update that does not grow an object already past them is
still admitted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from leaderworkerset.api.config.codec import ConfigError
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.controller_command import Settings, load_configuration
from leaderworkerset.webhooks.admission import leaderworkerset_validator
from leaderworkerset.webhooks.leaderworkerset import validate_object
from tests.toolkit.lws import defaulted, lws_json, template

GIANT = 100_000_000
HEADER = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


def lws(replicas: int, size: int) -> dict[str, Any]:
    data = lws_json(replicas=replicas)
    template(data)["size"] = size
    return data


def test_no_limit_by_default_admits_a_giant_group() -> None:
    assert SizeLimits().errors(defaulted(lws(1, GIANT))) == []
    assert validate_object("CREATE", lws(1, GIANT)).allowed


def test_a_group_past_max_size_is_refused_with_the_field() -> None:
    errors = SizeLimits(max_size=64).errors(defaulted(lws(1, 65)))
    assert [(e.field, e.bad_value) for e in errors] == [("spec.leaderWorkerTemplate.size", 65)]
    assert "must be no more than 64" in str(errors[0])
    assert "leaderWorkerSetLimits.maxSize" in str(errors[0])
    assert SizeLimits(max_size=64).errors(defaulted(lws(1, 64))) == []


def test_replicas_times_size_past_max_pods_is_refused_naming_replicas() -> None:
    limits = SizeLimits(max_pods=1000)
    errors = limits.errors(defaulted(lws(126, 8)))
    assert [e.field for e in errors] == ["spec.replicas"]
    assert "replicas x size is 1008 pods, more than 1000" in str(errors[0])
    assert limits.errors(defaulted(lws(125, 8))) == []


def test_an_update_that_does_not_grow_an_object_past_the_limit_is_admitted() -> None:
    limits = SizeLimits(max_size=8, max_pods=100)
    before = defaulted(lws(20, 16))
    assert limits.errors(defaulted(lws(20, 16)), before) == []
    assert limits.errors(defaulted(lws(10, 16)), before) == []
    grown = limits.errors(defaulted(lws(21, 16)), before)
    assert [e.field for e in grown] == ["spec.replicas"]


def test_the_validating_webhook_enforces_the_limits() -> None:
    validate = leaderworkerset_validator(limits=SizeLimits(max_size=4))
    request = {"uid": "u", "operation": "CREATE", "namespace": "d", "object": lws(1, 5)}
    response = asyncio.run(validate(request)).to_json("u")
    assert response["allowed"] is False
    causes = response["status"]["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.leaderWorkerTemplate.size"]


def test_the_configuration_carries_the_limits(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + "leaderWorkerSetLimits: {maxSize: 64, maxPods: 4096}\n")
    settings = Settings(configuration=load_configuration(path), namespace="lws-system")
    assert settings.size_limits == SizeLimits(max_size=64, max_pods=4096)


@pytest.mark.parametrize("member", ["maxSize", "maxPods"])
def test_a_negative_limit_is_a_configuration_error(tmp_path: Path, member: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + f"leaderWorkerSetLimits: {{{member}: -1}}\n")
    with pytest.raises(ConfigError, match=f"leaderWorkerSetLimits.{member}"):
        load_configuration(path)
