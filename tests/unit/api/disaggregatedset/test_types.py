"""The DisaggregatedSet and RoleScaler models read and write JSON losslessly, with our
codec's conventions, and report members of the wrong type with their paths."""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.disaggregatedset.types import (
    DisaggregatedSet,
    DisaggregatedSetRoleScaler,
)

SAMPLE: dict[str, Any] = {
    "apiVersion": "disaggregatedset.x-k8s.io/v1",
    "kind": "DisaggregatedSet",
    "metadata": {"name": "llm", "namespace": "serving", "labels": {"team": "a"}},
    "spec": {
        "slices": 2,
        "placementPolicy": {"type": "ExclusiveSlice", "topology": "rack"},
        "roles": [
            {
                "name": "prefill",
                "scaling": {"mode": "External"},
                "metadata": {"labels": {"tier": "p"}, "annotations": {"note": "x"}},
                "spec": {
                    "replicas": 2,
                    "leaderWorkerTemplate": {
                        "size": 2,
                        "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                    },
                    "rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": "50%"}},
                },
                "futureRoleMember": {"kept": True},
            },
            {"name": "decode", "spec": {"leaderWorkerTemplate": {"workerTemplate": {}}}},
        ],
        "futureSpecMember": 1,
    },
    "status": {
        "roleStatuses": [
            {"name": "prefill", "replicas": 2, "readyReplicas": 1, "updatedReplicas": 2}
        ],
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "reason": "Ready",
                "message": "",
            }
        ],
    },
}


def test_round_trip_is_lossless() -> None:
    ds, errors = DisaggregatedSet.from_json(copy.deepcopy(SAMPLE))
    assert errors == []
    assert ds.to_json() == SAMPLE


def test_typed_view() -> None:
    ds, _ = DisaggregatedSet.from_json(SAMPLE)
    assert (ds.name, ds.namespace) == ("llm", "serving")
    prefill, decode = ds.roles
    assert prefill.external and not decode.external
    assert prefill.spec is not None and prefill.spec.replicas == 2
    assert ds.spec is not None and ds.spec.placement_policy is not None
    assert (ds.spec.slices, ds.spec.placement_policy.topology) == (2, "rack")


def test_wrong_types_are_reported_with_their_paths() -> None:
    doc = copy.deepcopy(SAMPLE)
    doc["spec"]["slices"] = "two"
    doc["spec"]["roles"][1]["name"] = 7
    doc["spec"]["roles"][0]["spec"]["replicas"] = [1]
    _, errors = DisaggregatedSet.from_json(doc)
    assert sorted(e.field for e in errors) == [
        "spec.roles[0].spec.replicas",
        "spec.roles[1].name",
        "spec.slices",
    ]


def test_a_set_without_roles() -> None:
    ds, errors = DisaggregatedSet.from_json({"metadata": {"name": "x"}})
    assert errors == [] and ds.roles == [] and ds.name == "x"


def test_role_scaler_round_trip() -> None:
    doc = {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetRoleScaler",
        "metadata": {"name": "llm-prefill"},
        "spec": {"replicas": 3},
        "status": {"replicas": 2, "selector": "a=b", "observedGeneration": 4},
    }
    scaler, errors = DisaggregatedSetRoleScaler.from_json(copy.deepcopy(doc))
    assert errors == [] and scaler.to_json() == doc
    assert scaler.spec is not None and scaler.spec.replicas == 3
