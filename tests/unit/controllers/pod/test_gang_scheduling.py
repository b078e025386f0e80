"""Volcano PodGroups for gang scheduling."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers.pod.gang_scheduling import ensure_pod_group, pod_group
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.fake_client import FakeApiClient


def lws(size: int, *, startup: str = "LeaderCreated", leader: bool = True) -> dict[str, Any]:
    def template(cpu: str, memory: str) -> dict[str, Any]:
        return {
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": cpu, "memory": memory}}},
                    {"name": "b", "resources": {"requests": {"cpu": "100m"}}},
                ]
            }
        }

    lwt: dict[str, Any] = {"size": size, "workerTemplate": template("500m", "1Gi")}
    if leader:
        lwt["leaderTemplate"] = template("1", "512Mi")
    return {
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "annotations": {
                c.ANNOTATION_VOLCANO_QUEUE_NAME: "q1",
                "volcano.sh/extra": "x",
                "other.io/ignored": "y",
            },
        },
        "spec": {"replicas": 1, "startupPolicy": startup, "leaderWorkerTemplate": lwt},
    }


LEADER = {
    "metadata": {
        "name": "g-0",
        "namespace": "ns",
        "uid": "u-0",
        "labels": {
            c.LABEL_SET_NAME: "g",
            c.LABEL_GROUP_INDEX: "0",
            c.LABEL_TEMPLATE_REVISION_HASH: "abc",
            c.LABEL_WORKER_INDEX: "0",
        },
        "annotations": {c.ANNOTATION_POD_GROUP_NAME: "g-0-abc"},
    }
}


def test_pod_group_counts_the_whole_group() -> None:
    body = pod_group(view_of(lws(4)), LEADER)
    assert body is not None
    assert body["metadata"]["name"] == "g-0-abc"
    assert body["spec"]["minMember"] == 4
    # leader 1.1 cpu + 3 workers x 0.6 cpu; 512Mi + 3 x 1Gi
    assert body["spec"]["minResources"] == {"cpu": "2900m", "memory": str(3584 * 2**20)}
    assert body["spec"]["queue"] == "q1"
    assert body["metadata"]["annotations"] == {"volcano.sh/extra": "x"}
    assert body["metadata"]["labels"] == {
        c.LABEL_SET_NAME: "g",
        c.LABEL_GROUP_INDEX: "0",
        c.LABEL_TEMPLATE_REVISION_HASH: "abc",
    }
    owner = body["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "g-0", True)


def test_leader_ready_gangs_the_leader_alone_and_worker_template_serves_leaders() -> None:
    body = pod_group(view_of(lws(2, startup="LeaderReady", leader=False)), LEADER)
    assert body is not None
    assert body["spec"]["minMember"] == 1
    assert body["spec"]["minResources"]["cpu"] == "1200m"


def test_no_pod_group_without_the_annotation() -> None:
    leader = {"metadata": {**LEADER["metadata"], "annotations": {}}}
    assert pod_group(view_of(lws(2)), leader) is None


# --- creating it ----------------------------------------------------------------------------------
async def test_the_pod_group_is_created_once_as_a_volcano_object() -> None:
    client = FakeApiClient()
    await ensure_pod_group(client, view_of(lws(4)), LEADER)
    (get, create) = client.calls
    assert (get.verb, get.name, get.namespace) == ("get", "g-0-abc", "ns")
    assert (create.verb, create.plural, create.namespace) == ("create", "podgroups", "ns")
    body = create.body
    assert (body["apiVersion"], body["kind"]) == ("scheduling.volcano.sh/v1beta1", "PodGroup")
    assert body["metadata"]["namespace"] == "ns"
    # It exists now: looked up, not created again.
    await ensure_pod_group(client, view_of(lws(4)), LEADER)
    assert [call.verb for call in client.calls] == ["get", "create", "get"]


async def test_a_pod_group_created_meanwhile_is_no_error_but_a_refusal_is() -> None:
    client = FakeApiClient()
    client.fail[("create", "podgroups")] = ApiError(409, {"reason": "AlreadyExists"})
    await ensure_pod_group(client, view_of(lws(4)), LEADER)
    client.fail[("create", "podgroups")] = ApiError(403, {"message": "quota"})
    with pytest.raises(ApiError):
        await ensure_pod_group(client, view_of(lws(4)), LEADER)


async def test_no_pod_group_is_looked_up_for_a_leader_without_one() -> None:
    client = FakeApiClient()
    leader = {**LEADER, "metadata": {**LEADER["metadata"], "annotations": {}}}
    await ensure_pod_group(client, view_of(lws(4)), leader)
    assert client.calls == []
