"""Small builders of LeaderWorkerSet JSON for tests."""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.defaults import default_leaderworkerset
from leaderworkerset.api.types import LeaderWorkerSet

CONTAINER = {"name": "c", "image": "registry.k8s.io/pause:3.10"}


def lws_json(name: str = "test-sample", **spec: Any) -> dict[str, Any]:
    """A minimal valid object; keyword arguments are merged into spec (dotted-free)."""
    body: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"spec": {"containers": [copy.deepcopy(CONTAINER)]}},
            },
        },
    }
    body["spec"].update(spec)
    return body


def decoded(data: dict[str, Any]) -> LeaderWorkerSet:
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == [], errors
    return lws


def defaulted(data: dict[str, Any]) -> LeaderWorkerSet:
    return default_leaderworkerset(decoded(data))


def template(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["spec"]["leaderWorkerTemplate"]
    return result


def rolling(data: dict[str, Any], **config: Any) -> dict[str, Any]:
    data["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": config,
    }
    return data
