"""The objects a DisaggregatedSet owns, against upstream's TestManagerCreate
(lws_manager_test.go), TestServiceManager (service_manager_test.go) and the RoleScaler
that scaler_manager.go makes."""

from __future__ import annotations

from functools import partial

from leaderworkerset.api.disaggregatedset.names import lws_labels
from leaderworkerset.api.disaggregatedset.objects import (
    leaderworkerset,
    role_scaler,
    service,
)
from tests.toolkit.disaggregatedset import upstream_role, upstream_set

WORKER = {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}
# Upstream's TestManagerCreate set: named test-deploy, not defaulted.
make_ds = partial(upstream_set, name="test-deploy", defaulted=False)
OWNER = {
    "apiVersion": "disaggregatedset.x-k8s.io/v1",
    "kind": "DisaggregatedSet",
    "name": "test-deploy",
    "uid": "uid",
    "controller": True,
}


def test_manager_create_successfully_creates_new_lws() -> None:
    ds = make_ds(upstream_role("prefill", None, size=1))
    obj = leaderworkerset(ds, ds.roles[0], 0, "abc123", 3)
    assert obj["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and obj["kind"] == "LeaderWorkerSet"
    assert obj["metadata"] == {
        "name": "test-deploy-0-abc123-prefill",
        "namespace": "default",
        "labels": lws_labels("test-deploy", 0, "abc123", "prefill"),
        "ownerReferences": [OWNER],
    }
    assert obj["spec"]["replicas"] == 3
    worker = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["metadata"] == {"labels": lws_labels("test-deploy", 0, "abc123", "prefill")}
    assert worker["spec"] == WORKER["spec"]


def test_a_roles_group_identity_reaches_its_leaderworkerset() -> None:
    spec = {"groupIdentity": "Hash", "groupReplacementPolicy": "Immediate"}
    ds = make_ds(upstream_role("decode", None, **spec))
    obj = leaderworkerset(ds, ds.roles[0], 0, "abc123", 2)
    assert {k: obj["spec"][k] for k in spec} == spec


def test_a_role_without_group_identity_leaves_it_to_the_leaderworkerset_defaults() -> None:
    ds = make_ds(upstream_role("decode", None))
    obj = leaderworkerset(ds, ds.roles[0], 0, "abc123", 2)
    assert "groupIdentity" not in obj["spec"] and "groupReplacementPolicy" not in obj["spec"]


def test_manager_create_merges_user_metadata_with_system_labels_taking_precedence() -> None:
    role = {
        "name": "prefill",
        "metadata": {
            "labels": {"kueue.x-k8s.io/queue-name": "q1", "app": "user-app"},
            "annotations": {"note": "val"},
        },
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {**WORKER, "metadata": {"labels": {"app": "mine"}}}
            }
        },
    }
    ds = make_ds(role)
    obj = leaderworkerset(ds, ds.roles[0], 0, "rev1", 1)
    labels = obj["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "q1"
    assert labels["app"] == "test-deploy-0-prefill"
    assert obj["metadata"]["annotations"] == {"note": "val"}
    worker = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["metadata"]["labels"]["app"] == "test-deploy-0-prefill"


def test_manager_create_injects_placement_affinity_into_leader_and_worker_templates() -> None:
    role = {
        "name": "prefill",
        "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": {}, "workerTemplate": {}}},
    }
    policy = {"type": "ExclusiveTopology", "topology": "topology.example.com/rack"}
    ds = make_ds(role, placementPolicy=policy)
    obj = leaderworkerset(ds, ds.roles[0], 1, "abc123", 2)
    assert obj["metadata"]["name"] == "test-deploy-1-abc123-prefill"
    for member in ("leaderTemplate", "workerTemplate"):
        affinity = obj["spec"]["leaderWorkerTemplate"][member]["spec"]["affinity"]
        (co_locate,) = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert co_locate["topologyKey"] == "topology.example.com/rack"
        assert co_locate["labelSelector"]["matchExpressions"] == [
            {"key": "disaggregatedset.x-k8s.io/name", "operator": "In", "values": ["test-deploy"]},
            {"key": "disaggregatedset.x-k8s.io/slice", "operator": "In", "values": ["1"]},
        ]
        assert (
            len(affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]) == 2
        )


def test_manager_create_no_affinity_injected_without_a_placement_policy() -> None:
    role = {"name": "prefill", "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": {}}}}
    ds = make_ds(role)
    template = leaderworkerset(ds, ds.roles[0], 0, "abc123", 1)["spec"]["leaderWorkerTemplate"]
    assert "affinity" not in template["workerTemplate"]["spec"]
    assert "affinity" not in template["leaderTemplate"]["spec"]


def test_the_role_spec_is_copied_not_shared() -> None:
    ds = make_ds(
        {
            "name": "prefill",
            "spec": {"replicas": 9, "leaderWorkerTemplate": {"workerTemplate": WORKER}},
        }
    )
    leaderworkerset(ds, ds.roles[0], 0, "r", 1)
    assert ds.roles[0].spec is not None and ds.roles[0].spec.replicas == 9
    assert "metadata" not in WORKER


def test_service_manager_service_is_headless_portless_and_named_prv() -> None:
    ds = make_ds({"name": "prefill"})
    lws_obj = {
        "metadata": {
            "name": "test-deploy-0-rev1-prefill",
            "labels": lws_labels("test-deploy", 0, "rev1", "prefill"),
        }
    }
    svc = service(ds, lws_obj)
    assert svc["metadata"]["name"] == "test-deploy-0-rev1-prefill-prv"
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": {
            "disaggregatedset.x-k8s.io/name": "test-deploy",
            "disaggregatedset.x-k8s.io/role": "prefill",
            "disaggregatedset.x-k8s.io/revision": "rev1",
            "disaggregatedset.x-k8s.io/slice": "0",
        },
    }
    assert svc["metadata"]["labels"] == svc["spec"]["selector"]
    assert svc["metadata"]["ownerReferences"] == [OWNER]


def test_role_scaler_is_owned_and_blocks_owner_deletion() -> None:
    ds = make_ds({"name": "prefill"})
    scaler = role_scaler(ds, "prefill", 1)
    assert scaler["metadata"]["name"] == "test-deploy-prefill"
    assert scaler["metadata"]["labels"] == {
        "disaggregatedset.x-k8s.io/name": "test-deploy",
        "disaggregatedset.x-k8s.io/role": "prefill",
    }
    assert scaler["metadata"]["ownerReferences"] == [{**OWNER, "blockOwnerDeletion": True}]
    assert scaler["spec"] == {"replicas": 1}
