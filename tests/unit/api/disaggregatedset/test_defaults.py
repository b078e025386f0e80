"""Defaulting replays the CRD schema's defaults, as the API server applies them."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.disaggregatedset.defaults import (
    default_disaggregatedset,
    default_role_scaler,
)
from leaderworkerset.api.disaggregatedset.types import (
    DisaggregatedSet,
    DisaggregatedSetRoleScaler,
)


def defaulted(doc: dict[str, Any]) -> dict[str, Any]:
    ds, errors = DisaggregatedSet.from_json(doc)
    assert errors == []
    return default_disaggregatedset(ds).to_json()


def test_schema_defaults_of_the_set_and_its_roles() -> None:
    doc = {
        "metadata": {"name": "s"},
        "spec": {
            "placementPolicy": {"topology": "rack"},
            "roles": [
                {
                    "name": "a",
                    "scaling": {},
                    "spec": {"leaderWorkerTemplate": {"workerTemplate": {}}},
                },
                {"name": "b"},
            ],
        },
    }
    spec = defaulted(doc)["spec"]
    assert spec["slices"] == 1
    assert spec["placementPolicy"] == {"topology": "rack", "type": "None"}
    first, second = spec["roles"]
    assert first["scaling"] == {"mode": "Static"}
    assert first["spec"]["replicas"] == 1
    assert first["spec"]["startupPolicy"] == "LeaderCreated"
    template = first["spec"]["leaderWorkerTemplate"]
    assert (template["size"], template["restartPolicy"]) == (1, "RecreateGroupOnPodRestart")
    assert second == {"name": "b"}  # no scaling, no spec: nothing to default inside


def test_defaults_only_inside_present_objects() -> None:
    doc = {"spec": {"roles": [{"name": "a", "spec": {"leaderWorkerTemplate": {}}}]}}
    role = defaulted(doc)["spec"]["roles"][0]
    assert "scaling" not in role
    assert "rolloutStrategy" not in role["spec"]  # no mutating webhook, unlike LeaderWorkerSet
    assert "networkConfig" not in role["spec"]


def test_rollout_strategy_members_default_when_present() -> None:
    doc = {
        "spec": {
            "roles": [
                {
                    "name": "a",
                    "spec": {
                        "leaderWorkerTemplate": {},
                        "rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 2}},
                    },
                }
            ]
        }
    }
    strategy = defaulted(doc)["spec"]["roles"][0]["spec"]["rolloutStrategy"]
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1, "maxSurge": 2},
    }


def test_group_identity_members_get_no_default_in_a_role() -> None:
    doc = {"spec": {"roles": [{"name": "a", "spec": {"leaderWorkerTemplate": {}}}]}}
    spec = defaulted(doc)["spec"]["roles"][0]["spec"]
    assert "groupIdentity" not in spec and "groupReplacementPolicy" not in spec


def test_a_group_identity_member_given_is_kept_and_the_other_left_absent() -> None:
    doc = {"spec": {"roles": [{"name": "a", "spec": {"groupIdentity": "Hash"}}]}}
    spec = defaulted(doc)["spec"]["roles"][0]["spec"]
    assert spec["groupIdentity"] == "Hash" and "groupReplacementPolicy" not in spec


def test_defaulting_is_idempotent_and_copies() -> None:
    ds, _ = DisaggregatedSet.from_json({"spec": {"roles": [{"name": "a"}]}})
    once = default_disaggregatedset(ds)
    assert default_disaggregatedset(once) == once
    assert ds.spec is not None and ds.spec.slices is None


def test_role_scaler_replicas_default_to_zero() -> None:
    scaler, _ = DisaggregatedSetRoleScaler.from_json({"spec": {}})
    assert default_role_scaler(scaler).to_json() == {"spec": {"replicas": 0}}
