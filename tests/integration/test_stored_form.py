"""A manifest created through the real API server and our defaulting webhook is stored
as upstream's webhook stores it (template metadata and container resources present),
and its template revision hash is upstream's."""

from __future__ import annotations

import copy

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import CONTROLLER_REVISIONS, LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.upstream_revision import (
    LEADER_WORKER_MANIFEST,
    PAUSE_MANIFEST,
    PAUSE_PATCH,
    upstream_hash,
)
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_omitted_struct_members_are_stored(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    manifest = copy.deepcopy(LEADER_WORKER_MANIFEST)
    manifest["metadata"] = {"name": "stored-form", "namespace": namespace}
    manifest["spec"]["replicas"] = 0  # only the stored object matters here
    # An ephemeral claim without a storage request is refused at admission now (the
    # StatefulSet API would refuse it); the unit tests cover its `resources: {}`.
    volume = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["volumes"][0]
    volume["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"] = {
        "requests": {"storage": "1Gi"}
    }
    await nodesim_api.create(LEADERWORKERSETS, manifest)
    stored = await nodesim_api.get(LEADERWORKERSETS, "stored-form", namespace)

    lwt = stored["spec"]["leaderWorkerTemplate"]
    worker, leader = lwt["workerTemplate"], lwt["leaderTemplate"]
    assert worker["metadata"] == {}
    assert worker["spec"]["containers"][0]["resources"] == {}
    assert leader["metadata"] == {"labels": {"role": "leader"}}
    assert leader["spec"]["containers"][0]["resources"] == {}
    assert leader["spec"]["initContainers"][0]["resources"] == {}
    ref = leader["spec"]["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]
    assert ref["divisor"] == "0"
    claim = worker["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]
    assert claim["metadata"] == {}


async def test_revision_hash_is_upstreams(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    manifest = copy.deepcopy(PAUSE_MANIFEST)
    manifest["metadata"] = {"name": "upstream-hash", "namespace": namespace}
    await nodesim_api.create(LEADERWORKERSETS, manifest)

    async def revision_key() -> str | None:
        answer = await nodesim_api.list(
            CONTROLLER_REVISIONS, namespace, label_selector=f"{c.LABEL_SET_NAME}=upstream-hash"
        )
        keys = [
            item["metadata"]["labels"].get(c.LABEL_TEMPLATE_REVISION_HASH)
            for item in answer.get("items", [])
        ]
        return keys[0] if keys else None

    key = await eventually(revision_key, within=60, what="the ControllerRevision")
    assert key == upstream_hash(PAUSE_PATCH) == "7b45f4f98c"
