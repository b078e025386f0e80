"""The objects the controllers write: the Ordinal leader StatefulSet, the Hash leader
Deployment, worker StatefulSets, Services, claim templates, and the event catalogue."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.leader_template import leader_pod_template
from leaderworkerset.controllers.lws.leader_deployment import leader_deployment
from leaderworkerset.controllers.lws.leader_statefulset import leader_statefulset
from leaderworkerset.controllers.lws.shared_service import shared_service, wants_shared_service
from leaderworkerset.controllers.pod.group_service import group_service, group_service_name
from leaderworkerset.controllers.pod.worker_statefulset import build_worker_statefulset
from leaderworkerset.controllers.revisions import apply_revision, new_revision
from leaderworkerset.runtime.events import object_reference
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import leader_pod

JSON = dict[str, Any]
NAME = "lws"
LWS_OWNER = {
    "apiVersion": c.API_VERSION,
    "kind": c.KIND,
    "name": NAME,
    "uid": f"uid-{NAME}",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _lws(**kw: Any) -> JSON:
    return lws_object(name=NAME, **kw)


def _lwt(lws: JSON) -> JSON:
    result: JSON = lws["spec"]["leaderWorkerTemplate"]
    return result


def _meta(obj: JSON) -> JSON:
    result: JSON = obj["spec"]["template"]["metadata"]
    return result


CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data", "labels": {"dropped": "yes"}},
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "fast",
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}},
        "selector": {"matchLabels": {"dropped": "yes"}},
        "dataSource": {"kind": "VolumeSnapshot", "name": "snap"},
    },
}
EXPECTED_CLAIM = {
    "metadata": {"name": "data", "namespace": "default"},
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "fast",
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}},
    },
}


# --- Ordinal leader StatefulSet ----------------------------------------------------------
def test_leader_statefulset_body() -> None:
    lws = _lws(replicas=3, max_unavailable=2, max_surge=1)
    lws["metadata"]["labels"] = {"team": "a", c.LABEL_SET_NAME: "spoofed"}
    lws["metadata"]["annotations"] = {"note": "x", c.ANNOTATION_REPLICAS: "99"}
    sts = leader_statefulset(view_of(lws), "key1", partition=2, replicas=4)
    assert sts["apiVersion"] == "apps/v1" and sts["kind"] == "StatefulSet"
    assert sts["metadata"] == {
        "name": NAME,
        "namespace": "default",
        "labels": {"team": "a", c.LABEL_SET_NAME: NAME, c.LABEL_TEMPLATE_REVISION_HASH: "key1"},
        "annotations": {"note": "x", c.ANNOTATION_REPLICAS: "3"},
        "ownerReferences": [LWS_OWNER],
    }
    spec = sts["spec"]
    assert spec["serviceName"] == NAME
    assert spec["replicas"] == 4
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["selector"] == {"matchLabels": {c.LABEL_SET_NAME: NAME, c.LABEL_WORKER_INDEX: "0"}}
    assert spec["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 3, "partition": 2},
    }
    assert _meta(sts) == {
        "labels": {
            c.LABEL_WORKER_INDEX: "0",
            c.LABEL_SET_NAME: NAME,
            c.LABEL_TEMPLATE_REVISION_HASH: "key1",
        },
        "annotations": {c.ANNOTATION_SIZE: "2"},
    }
    assert spec["template"]["spec"] == _lwt(lws)["workerTemplate"]["spec"]
    assert "volumeClaimTemplates" not in spec
    assert "persistentVolumeClaimRetentionPolicy" not in spec


def test_leader_template_is_used_when_present_and_user_metadata_is_kept() -> None:
    """User labels and annotations survive under the controller's own."""
    lws = _lws(size=4)
    _lwt(lws)["leaderTemplate"] = {
        "metadata": {
            "labels": {"role": "leader", c.LABEL_WORKER_INDEX: "9"},
            "annotations": {"keep": "me", c.ANNOTATION_SIZE: "1"},
        },
        "spec": {"containers": [{"name": "leader", "image": "l:1"}]},
    }
    original = copy.deepcopy(lws)
    template = leader_statefulset(view_of(lws), "k", 0, 2)["spec"]["template"]
    assert template["spec"]["containers"][0]["name"] == "leader"
    assert template["metadata"]["labels"]["role"] == "leader"
    assert template["metadata"]["labels"][c.LABEL_WORKER_INDEX] == "0"
    assert template["metadata"]["annotations"] == {"keep": "me", c.ANNOTATION_SIZE: "4"}
    assert lws == original, "the LWS is not modified"


def test_leader_template_annotations_for_features() -> None:
    lws = _lws(networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA})
    lws["metadata"]["annotations"] = {
        c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "rack",
        c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: "host",
    }
    _lwt(lws)["subGroupPolicy"] = {"subGroupSize": 2}
    sts = leader_statefulset(view_of(lws), "k", 0, 2)
    assert _meta(sts)["annotations"] == {
        c.ANNOTATION_SIZE: "2",
        c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "rack",
        c.ANNOTATION_SUBGROUP_POLICY_TYPE: c.SUBGROUP_POLICY_LEADER_WORKER,
        c.ANNOTATION_SUBGROUP_SIZE: "2",
        c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: "host",
        c.ANNOTATION_SUBDOMAIN_POLICY: c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA,
    }
    assert sts["spec"]["serviceName"] == NAME, "also under UniquePerReplica"


def test_empty_topology_annotations_are_not_copied_to_the_template() -> None:
    lws = _lws()
    lws["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: ""}
    sts = leader_statefulset(view_of(lws), "k", 0, 2)
    assert c.ANNOTATION_EXCLUSIVE_TOPOLOGY not in _meta(sts)["annotations"]
    assert sts["metadata"]["annotations"][c.ANNOTATION_EXCLUSIVE_TOPOLOGY] == ""


def test_leader_statefulset_claims_and_retention() -> None:
    lws = _lws()
    _lwt(lws)["volumeClaimTemplates"] = [CLAIM]
    _lwt(lws)["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Delete"}
    spec = leader_statefulset(view_of(lws), "k", 0, 2)["spec"]
    assert spec["volumeClaimTemplates"] == [EXPECTED_CLAIM]
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete"}


def test_minimal_claim_keeps_only_its_name() -> None:
    lws = _lws()
    _lwt(lws)["volumeClaimTemplates"] = [{"metadata": {"name": "d"}}]
    (claim,) = leader_statefulset(view_of(lws), "k", 0, 2)["spec"]["volumeClaimTemplates"]
    assert claim == {"metadata": {"name": "d", "namespace": "default"}, "spec": {}}


# --- Hash leader Deployment --------------------------------------------------------
def _hash_lws(**kw: Any) -> JSON:
    return _lws(groupIdentity=c.GROUP_IDENTITY_HASH, **kw)


def test_leader_deployment_body() -> None:
    lws = _hash_lws(replicas=3, max_unavailable="25%", max_surge=2)
    lws["metadata"]["labels"] = {"team": "a"}
    lws["metadata"]["annotations"] = {"note": "x"}
    deploy = leader_deployment(view_of(lws), "key1")
    assert deploy["apiVersion"] == "apps/v1" and deploy["kind"] == "Deployment"
    assert deploy["metadata"] == {
        "name": NAME,
        "namespace": "default",
        "labels": {"team": "a", c.LABEL_SET_NAME: NAME, c.LABEL_TEMPLATE_REVISION_HASH: "key1"},
        "annotations": {"note": "x"},
        "ownerReferences": [LWS_OWNER],
    }
    spec = deploy["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {c.LABEL_SET_NAME: NAME, c.LABEL_WORKER_INDEX: "0"}}
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"},
    }
    assert spec["template"] == leader_pod_template(view_of(lws), "key1")


def test_ordinal_and_hash_leaders_share_the_template_decoration() -> None:
    lws = _hash_lws()
    lws["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "rack"}
    _lwt(lws)["subGroupPolicy"] = {"subGroupSize": 1, "subGroupPolicyType": "LeaderExcluded"}
    deploy_template = leader_deployment(view_of(lws), "k")["spec"]["template"]
    sts_template = leader_statefulset(view_of(lws), "k", 0, 2)["spec"]["template"]
    assert (
        deploy_template["metadata"]
        == sts_template["metadata"]
        == (leader_pod_template(view_of(lws), "k")["metadata"])
    )
    assert deploy_template == sts_template


@pytest.mark.parametrize(
    ("unavailable", "surge", "expected"),
    [
        (1, 0, {"maxSurge": 0, "maxUnavailable": 1}),
        ("50%", "10%", {"maxSurge": "10%", "maxUnavailable": "50%"}),
        (0, 0, {"maxSurge": 0, "maxUnavailable": 1}),
        ("0%", "0%", {"maxSurge": "0%", "maxUnavailable": 1}),
        ("25%", 0, {"maxSurge": 0, "maxUnavailable": "25%"}),
        # A leading zero is still five percent, not zero (Go's Atoi reads "05" as 5).
        ("0%", "05%", {"maxSurge": "05%", "maxUnavailable": "0%"}),
    ],
)
def test_deployment_strategy_mapping(unavailable: Any, surge: Any, expected: JSON) -> None:
    lws = _hash_lws(replicas=0, max_unavailable=unavailable, max_surge=surge)
    assert leader_deployment(view_of(lws), "k")["spec"]["strategy"]["rollingUpdate"] == expected


def test_deployment_defaults_without_a_rolling_configuration() -> None:
    lws = _hash_lws()
    del lws["spec"]["rolloutStrategy"]
    rolling = leader_deployment(view_of(lws), "k")["spec"]["strategy"]["rollingUpdate"]
    assert rolling == {"maxSurge": 0, "maxUnavailable": 1}


# --- Worker StatefulSet -----------------------------------------------------------------
def _worker_sts(lws: JSON, pod: JSON, revision_of: JSON | None = None, **kw: Any) -> JSON:
    revision = new_revision(revision_of or lws, 1)
    return build_worker_statefulset(pod, view_of(lws), view_of(apply_revision(lws, revision)), **kw)


def test_worker_statefulset_body() -> None:
    lws = _lws(size=3)
    lws["metadata"]["labels"] = {"team": "a"}
    lws["metadata"]["annotations"] = {"note": "x"}
    pod = leader_pod(NAME, 1, "key1")
    sts = _worker_sts(lws, pod)
    group = {
        c.LABEL_GROUP_INDEX: "1",
        c.LABEL_SET_NAME: NAME,
        c.LABEL_GROUP_KEY: f"gk-{NAME}-1",
    }
    assert sts["metadata"] == {
        "name": f"{NAME}-1",
        "namespace": "default",
        "labels": {"team": "a", **group, c.LABEL_TEMPLATE_REVISION_HASH: "key1"},
        "annotations": {"note": "x"},
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": f"{NAME}-1",
                "uid": f"uid-{NAME}-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    spec = sts["spec"]
    assert spec["serviceName"] == NAME
    assert spec["replicas"] == 2
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["ordinals"] == {"start": 1}
    assert spec["selector"] == {"matchLabels": group}
    assert "updateStrategy" not in spec
    assert _meta(sts) == {
        "labels": {**group, c.LABEL_TEMPLATE_REVISION_HASH: "key1"},
        "annotations": {c.ANNOTATION_SIZE: "3", c.ANNOTATION_LEADER_NAME: f"{NAME}-1"},
    }
    assert spec["template"]["spec"] == _lwt(lws)["workerTemplate"]["spec"]


def test_worker_statefulset_comes_from_the_leaders_revision() -> None:
    """An old group is rebuilt with the old template, size and network."""
    old = _lws(size=3, networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA})
    _lwt(old)["volumeClaimTemplates"] = [CLAIM]
    live = _lws(size=5)
    _lwt(live)["workerTemplate"]["spec"]["containers"][0]["image"] = "pause:2"
    live["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "rack"}
    sts = _worker_sts(live, leader_pod(NAME, 0, "oldkey"), revision_of=old)
    spec = sts["spec"]
    assert spec["replicas"] == 2
    assert spec["serviceName"] == f"{NAME}-0"
    assert spec["template"]["spec"]["containers"][0]["image"] == "pause:1"
    assert spec["volumeClaimTemplates"] == [EXPECTED_CLAIM]
    assert _meta(sts)["annotations"][c.ANNOTATION_SIZE] == "3"
    assert _meta(sts)["annotations"][c.ANNOTATION_EXCLUSIVE_TOPOLOGY] == "rack", "live"
    assert sts["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] == "oldkey"


def test_worker_subgroup_annotations_follow_the_revision() -> None:
    lws = _lws(size=4)
    lws["metadata"]["annotations"] = {c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: "host"}
    _lwt(lws)["subGroupPolicy"] = {"subGroupSize": 2}
    annotations = _meta(_worker_sts(lws, leader_pod(NAME, 0, "k")))["annotations"]
    assert annotations[c.ANNOTATION_SUBGROUP_SIZE] == "2"
    assert annotations[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] == "host"
    assert c.ANNOTATION_SUBGROUP_POLICY_TYPE not in annotations, "only when the type is set"
    _lwt(lws)["subGroupPolicy"]["subGroupPolicyType"] = c.SUBGROUP_POLICY_LEADER_EXCLUDED
    annotations = _meta(_worker_sts(lws, leader_pod(NAME, 0, "k")))["annotations"]
    assert annotations[c.ANNOTATION_SUBGROUP_POLICY_TYPE] == c.SUBGROUP_POLICY_LEADER_EXCLUDED


def test_workers_of_a_tpu_leader_are_told_so() -> None:
    lws = _lws()
    pod = leader_pod(NAME, 0, "k")
    pod["spec"]["containers"][0]["resources"] = {"limits": {c.TPU_RESOURCE_NAME: "4"}}
    annotations = _meta(_worker_sts(lws, pod))["annotations"]
    assert annotations[c.ANNOTATION_LEADER_REQUESTS_TPUS] == "true"


def test_exclusive_placement_merges_the_node_selector() -> None:
    lws = _lws()
    _lwt(lws)["workerTemplate"]["spec"]["nodeSelector"] = {"pool": "gpu", "rack": "user"}
    sts = _worker_sts(lws, leader_pod(NAME, 0, "k"), node_selector={"rack": "r7"})
    assert sts["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu", "rack": "r7"}
    assert _lwt(lws)["workerTemplate"]["spec"]["nodeSelector"]["rack"] == "user"


def test_hash_mode_worker_statefulset_copies_the_group_key_as_index() -> None:
    lws = _hash_lws(networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA})
    key = "0123456789abcdef0123456789abcdef01234567"
    pod = leader_pod(NAME, key, "k", name=f"{NAME}-6d4c5b-x7k2p")
    pod["metadata"]["labels"][c.LABEL_GROUP_KEY] = key
    sts = _worker_sts(lws, pod)
    assert sts["metadata"]["name"] == f"{NAME}-6d4c5b-x7k2p"
    assert sts["spec"]["selector"]["matchLabels"][c.LABEL_GROUP_INDEX] == key
    assert sts["spec"]["selector"]["matchLabels"][c.LABEL_GROUP_KEY] == key
    assert sts["spec"]["serviceName"] == f"{NAME}-01234567"


# --- Services -----------------------------------------------------------------------
def test_shared_service() -> None:
    assert shared_service(view_of(_lws())) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": "default",
            "labels": {c.LABEL_SET_NAME: NAME},
            "ownerReferences": [LWS_OWNER],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {c.LABEL_SET_NAME: NAME},
            "publishNotReadyAddresses": True,
        },
    }


def test_which_policy_wants_the_shared_service() -> None:
    lws = _lws()
    assert wants_shared_service(view_of(lws))
    del lws["spec"]["networkConfig"]
    assert wants_shared_service(view_of(lws))
    lws["spec"]["networkConfig"] = {"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA}
    assert not wants_shared_service(view_of(lws))


@pytest.mark.parametrize(
    ("mode", "leader", "index", "service"),
    [
        (c.GROUP_IDENTITY_ORDINAL, f"{NAME}-2", "2", f"{NAME}-2"),
        (c.GROUP_IDENTITY_HASH, f"{NAME}-xyz", "abcdef0123", f"{NAME}-abcdef01"),
    ],
    ids=[c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH],
)
def test_group_service(mode: str, leader: str, index: str, service: str) -> None:
    """Named after the leader (Ordinal) or by the group key's first 8 characters (Hash,
    whose group index is the key), owned by the leader, selecting the group."""
    lws = _lws(networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA})
    pod = leader_pod(NAME, index, "k", name=leader)
    if mode == c.GROUP_IDENTITY_HASH:
        lws["spec"]["groupIdentity"] = mode
        pod["metadata"]["labels"][c.LABEL_GROUP_KEY] = index
    assert group_service_name(view_of(lws), pod) == service
    svc = group_service(view_of(lws), pod)
    assert svc["metadata"]["name"] == service
    assert svc["metadata"]["labels"] == {c.LABEL_SET_NAME: NAME}
    assert svc["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert svc["metadata"]["ownerReferences"][0]["name"] == leader
    assert svc["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {c.LABEL_SET_NAME: NAME, c.LABEL_GROUP_INDEX: index},
    }


# --- Event catalogue ---------------------------------------------------------------
def test_event_catalogue_notes() -> None:
    assert ev.leader_create_failed(NAME, "boom").note == (
        f"Failed to create leader statefulset {NAME}: boom"
    )
    assert ev.leader_update_failed(NAME, "boom").reason == c.EVENT_REASON_FAILED_UPDATE
    assert ev.leader_created(NAME).note == f"Created leader statefulset {NAME}"
    assert ev.service_create_failed("boom").note == (
        "Failed to create headless service for error: boom"
    )
    assert ev.revision_for_update("k").note == "Creating revision with key k for updated LWS"
    assert ev.worker_statefulset_created("p").note == "Created worker statefulset for leader pod p"
    failed = ev.worker_statefulset_create_failed("p", "boom")
    assert (failed.type, failed.note) == (
        "Warning",
        "Failed to create worker statefulset for leader pod p: boom",
    )
    assert ev.misclassified_leader("ns", "p").note.startswith(
        f"leader pod ns/p contains mistake annotation '{c.ANNOTATION_LEADER_NAME}'"
    )


@pytest.mark.parametrize(
    ("mode", "kind"),
    [(c.GROUP_IDENTITY_ORDINAL, "statefulset"), (c.GROUP_IDENTITY_HASH, "deployment")],
    ids=[c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH],
)
def test_leader_workload_events_name_its_kind(mode: str, kind: str) -> None:
    """The leader workload is a StatefulSet (Ordinal, the default) or a Deployment (Hash)."""
    hashed: Any = {"hash_mode": True} if mode == c.GROUP_IDENTITY_HASH else {}
    assert ev.leader_created("lws", **hashed).note == f"Created leader {kind} lws"
    created = ev.leader_create_failed("lws", "boom", **hashed)
    updated = ev.leader_update_failed("lws", "boom", **hashed)
    assert created.note == f"Failed to create leader {kind} lws: boom"
    assert updated.note == f"Failed to update leader {kind} lws: boom"


def test_group_recreated_names_the_kind_of_pod() -> None:
    """Unlike upstream, a restarted leader is called one (see
    docs/upstream-deviations.md#leader-restart-event)."""
    worker = ev.group_recreated("lws-1-1", "lws-1", "1", pod_is_leader=False)
    assert worker.note == "Worker pod lws-1-1 failed, deleted leader pod lws-1 to recreate group 1"
    leader = ev.group_recreated("lws-1", "lws-1", "1", pod_is_leader=True)
    assert leader.note.startswith("Leader pod lws-1 failed")
    assert (leader.reason, leader.action) == (c.EVENT_REASON_RECREATE_GROUP, "Delete")


def test_object_reference() -> None:
    ref = object_reference(new_revision(_lws(), 1))
    assert ref["kind"] == "ControllerRevision" and ref["namespace"] == "default"
    assert "uid" not in ref, "unknown before creation"
