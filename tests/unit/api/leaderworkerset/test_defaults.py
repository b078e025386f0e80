"""Defaulting: the CRD schema defaults replayed, then the webhook's."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset.defaults import (
    apply_schema_defaults,
    default_leaderworkerset,
)
from tests.toolkit.lws import decoded, defaulted, lws_json, template


def test_absent_fields_get_upstream_defaults() -> None:
    data = lws_json()
    del data["spec"]["replicas"]
    del template(data)["size"]
    spec = defaulted(data).to_json()["spec"]
    assert spec["replicas"] == 1
    assert spec["leaderWorkerTemplate"]["size"] == 1
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert spec["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1, "maxSurge": 0},
    }
    assert spec["groupIdentity"] == "Ordinal"
    assert spec["groupReplacementPolicy"] == "PostTermination"


def test_deprecated_default_restart_policy_becomes_none() -> None:
    data = lws_json()
    template(data)["restartPolicy"] = "Default"
    assert defaulted(data).to_json()["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "None"


def test_explicit_values_are_kept() -> None:
    data = lws_json(
        replicas=5,
        startupPolicy="LeaderReady",
        networkConfig={"subdomainPolicy": "UniquePerReplica"},
        groupIdentity="Hash",
        groupReplacementPolicy="Immediate",
        rolloutStrategy={
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": "25%", "maxSurge": 2},
        },
    )
    template(data)["restartPolicy"] = "None"
    spec = defaulted(data).to_json()["spec"]
    assert spec["replicas"] == 5
    assert spec["startupPolicy"] == "LeaderReady"
    assert spec["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}
    assert spec["groupIdentity"] == "Hash"
    assert spec["groupReplacementPolicy"] == "Immediate"
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "None"
    # The schema fills only the member that is missing.
    assert spec["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "partition": 0,
        "maxUnavailable": "25%",
        "maxSurge": 2,
    }


def test_null_subdomain_policy_is_redefaulted() -> None:
    data = lws_json(networkConfig={"subdomainPolicy": None})
    assert defaulted(data).to_json()["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}


def test_empty_startup_policy_is_forgiven() -> None:
    data = lws_json(startupPolicy="")
    assert defaulted(data).to_json()["spec"]["startupPolicy"] == "LeaderCreated"


def test_schema_defaults_need_the_parent() -> None:
    lws = decoded(lws_json())
    apply_schema_defaults(lws)
    spec = lws.to_json()["spec"]
    # rolloutStrategy and networkConfig are absent, so nothing inside them is defaulted.
    assert "rolloutStrategy" not in spec
    assert "networkConfig" not in spec
    assert spec["startupPolicy"] == "LeaderCreated"


def test_subgroup_policy_type_default() -> None:
    data = lws_json()
    template(data).update(size=4, subGroupPolicy={"subGroupSize": 2})
    spec = defaulted(data).to_json()["spec"]
    assert spec["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupPolicyType"] == "LeaderWorker"


def test_defaulting_does_not_mutate_its_input() -> None:
    lws = decoded(lws_json())
    before = lws.to_json()
    default_leaderworkerset(lws)
    assert lws.to_json() == before


def test_an_ephemeral_claim_template_gets_its_struct_members() -> None:
    from leaderworkerset.api.leaderworkerset.defaults import fill_typed_members
    from leaderworkerset.api.leaderworkerset.types import LeaderWorkerTemplate

    volume = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    worker = {"spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [volume]}}
    template = LeaderWorkerTemplate(worker_template=worker)
    fill_typed_members(template)
    claim = worker["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]
    assert claim == {"metadata": {}, "spec": {"resources": {}}}
