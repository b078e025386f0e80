"""Ordinal mode, creation: names, labels, env vars, services, status."""

from __future__ import annotations

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, SERVICES
from leaderworkerset.group.names import ordinal_group_key
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import env_of, labels, live_pods, name_of, statefulsets, wait_ready
from tests.toolkit.lws import lws_manifest

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_create_three_groups_of_four(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, lws_manifest("web", namespace, replicas=3, size=4))
    lws = await wait_ready(api, namespace, "web", 3)
    status = lws["status"]
    assert status["updatedReplicas"] == 3
    assert status["hpaPodSelector"] == (f"{c.LABEL_SET_NAME}=web,{c.LABEL_WORKER_INDEX}=0")

    pods = {name_of(p): p for p in await live_pods(api, namespace, "web")}
    expected = {f"web-{i}" for i in range(3)} | {
        f"web-{i}-{j}" for i in range(3) for j in (1, 2, 3)
    }
    assert set(pods) == expected

    sets = {name_of(s): s for s in await statefulsets(api, namespace, "web")}
    assert set(sets) == {"web", "web-0", "web-1", "web-2"}
    assert sets["web-1"]["spec"]["replicas"] == 3
    assert sets["web-1"]["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert sets["web"]["metadata"]["ownerReferences"][0]["kind"] == c.KIND

    for i in range(3):
        leader = pods[f"web-{i}"]
        key = ordinal_group_key(namespace, f"web-{i}")
        assert labels(leader)[c.LABEL_GROUP_INDEX] == str(i)
        assert labels(leader)[c.LABEL_GROUP_KEY] == key
        assert labels(leader)[c.LABEL_WORKER_INDEX] == "0"
        for j in range(4):
            pod = pods[f"web-{i}" if j == 0 else f"web-{i}-{j}"]
            env = env_of(pod)
            assert list(env)[:3] == [c.ENV_LEADER_ADDRESS, c.ENV_GROUP_SIZE, c.ENV_WORKER_INDEX]
            assert env[c.ENV_LEADER_ADDRESS] == f"web-{i}.web.{namespace}"
            assert env[c.ENV_GROUP_SIZE] == "4"
            assert env[c.ENV_WORKER_INDEX] == str(j)
            assert labels(pod)[c.LABEL_GROUP_KEY] == key

    service = await api.get(SERVICES, "web", namespace)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True


async def test_a_template_string_yaml_forbids_still_reconciles(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """JSON carries U+007F and the C1 controls as they are, YAML does not; the leader
    StatefulSet goes out as an apply patch, which the API server parses as YAML."""
    api = nodesim_api
    body = lws_manifest("odd", namespace, replicas=1, size=2)
    odd = "a\x7fb\x80c"
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "ODD", "value": odd}
    ]
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "odd", 1)
    leader = next(p for p in await live_pods(api, namespace, "odd") if name_of(p) == "odd-0")
    assert env_of(leader)["ODD"] == odd
