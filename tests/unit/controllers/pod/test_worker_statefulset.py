"""The worker StatefulSet of a group, read as the pods it makes: what its template
carries must be what the pod webhook needs to admit each worker right."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers.pod.worker_statefulset import build_worker_statefulset
from leaderworkerset.controllers.revisions import apply_revision, new_revision
from leaderworkerset.webhooks.pods import mutate_pod
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import leader_pod

JSON = dict[str, Any]
TPU = {"limits": {c.TPU_RESOURCE_NAME: "4"}}


def tpu_lws(size: int, policy: JSON) -> JSON:
    lws = lws_object("lws", replicas=1, size=size)
    lwt = lws["spec"]["leaderWorkerTemplate"]
    lwt["subGroupPolicy"] = policy
    lwt["workerTemplate"]["spec"]["containers"][0]["resources"] = copy.deepcopy(TPU)
    return lws


def worker_set(lws: JSON) -> JSON:
    """The worker StatefulSet of group 0, whose leader (like its workers) asks for TPUs."""
    leader = leader_pod("lws", 0, "key")
    leader["spec"]["containers"][0]["resources"] = copy.deepcopy(TPU)
    return build_worker_statefulset(
        leader, view_of(lws), view_of(apply_revision(lws, new_revision(lws, 1)))
    )


def worker_from(sts: JSON, ordinal: int) -> JSON:
    """Worker `ordinal` as the StatefulSet controller creates it from the template."""
    template = copy.deepcopy(sts["spec"]["template"])
    metadata = template["metadata"]
    metadata.update(name=f"{sts['metadata']['name']}-{ordinal}", namespace="default")
    template["spec"]["subdomain"] = sts["spec"]["serviceName"]
    return {"apiVersion": "v1", "kind": "Pod", **template}


def tpu_env(pod: JSON) -> dict[str, str]:
    return {v["name"]: v.get("value", "") for v in pod["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize(
    ("ordinal", "rank", "slice_members"),
    [(1, "0", [1, 2]), (2, "1", [1, 2]), (3, "0", [3, 4]), (4, "1", [3, 4])],
)
def test_leader_excluded_workers_slice_without_the_leader(
    ordinal: int, rank: str, slice_members: list[int]
) -> None:
    """LeaderExcluded: the workers form the slices among themselves even though the leader
    asks for TPUs. Only the policy type on the worker template tells the webhook so
    (upstream lws#945); without it worker 1 would share a slice with the leader."""
    sts = worker_set(tpu_lws(5, {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}))
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations[c.ANNOTATION_SUBGROUP_POLICY_TYPE] == c.SUBGROUP_POLICY_LEADER_EXCLUDED
    assert annotations[c.ANNOTATION_LEADER_REQUESTS_TPUS] == "true"
    env = tpu_env(mutate_pod(worker_from(sts, ordinal)))
    assert env[c.ENV_TPU_WORKER_ID] == rank
    assert env[c.ENV_TPU_WORKER_HOSTNAMES] == ",".join(f"lws-0-{m}.lws" for m in slice_members)


def test_worker_template_names_no_policy_type_the_user_left_out() -> None:
    """As upstream: workers carry the type only when the spec sets it (the leader always
    does); an unset type means LeaderWorker, so worker 1 shares the leader's slice."""
    sts = worker_set(tpu_lws(4, {"subGroupSize": 2}))
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert c.ANNOTATION_SUBGROUP_POLICY_TYPE not in annotations
    env = tpu_env(mutate_pod(worker_from(sts, 1)))
    assert env[c.ENV_TPU_WORKER_HOSTNAMES] == "lws-0.lws,lws-0-1.lws"


def test_the_body_is_an_apps_v1_statefulset_in_the_leaders_namespace() -> None:
    sts = worker_set(tpu_lws(2, {"subGroupSize": 1}))
    assert (sts["apiVersion"], sts["kind"]) == ("apps/v1", "StatefulSet")
    assert sts["metadata"]["namespace"] == "default"
