"""Gang scheduling with Volcano: every pod names its PodGroup; each leader's group gets one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from lws_localcluster.deploy import RunningController
from lws_localcluster.manager_process import stand_in_crd

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import CRDS, LEADERWORKERSETS, VOLCANO_PODGROUPS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import labels, live_pods, name_of, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Volcano is not installed here; a stand-in CRD that accepts any PodGroup is enough to
# see what the controller creates.
PODGROUP_CRD = stand_in_crd(
    VOLCANO_PODGROUPS.group, VOLCANO_PODGROUPS.version, "PodGroup", VOLCANO_PODGROUPS.plural
)


@pytest_asyncio.fixture(loop_scope="session")
async def gang_enabled(
    lws_controller: RunningController, nodesim_api: ApiClient
) -> AsyncIterator[None]:
    await nodesim_api.apply(CRDS, PODGROUP_CRD, field_manager="lws-tests")

    async def served() -> bool:
        try:
            await nodesim_api.list(VOLCANO_PODGROUPS, "default")
        except Exception:
            return False
        return True

    await eventually(served, what="PodGroup CRD served")
    assert lws_controller.controllers is not None
    options = lws_controller.controllers.options
    options.gang_scheduling = True
    try:
        yield
    finally:
        options.gang_scheduling = False


async def test_each_group_gets_a_pod_group(
    gang_enabled: None, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    body = lws_manifest("gang", namespace, replicas=2, size=3)
    body["metadata"]["annotations"] = {c.ANNOTATION_VOLCANO_QUEUE_NAME: "training"}
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "gang", 2)
    key = ""
    pods = await live_pods(api, namespace, "gang")
    assert len(pods) == 6
    for pod in pods:
        pod_labels = labels(pod)
        key = pod_labels[c.LABEL_TEMPLATE_REVISION_HASH]
        expected = f"gang-{pod_labels[c.LABEL_GROUP_INDEX]}-{key}"
        assert pod["metadata"]["annotations"][c.ANNOTATION_POD_GROUP_NAME] == expected, name_of(pod)

    async def groups() -> list[dict] | None:
        items = (await api.list(VOLCANO_PODGROUPS, namespace)).get("items", [])
        return items if len(items) == 2 else None

    found = {name_of(g): g for g in await eventually(groups, what="two PodGroups")}
    assert set(found) == {f"gang-0-{key}", f"gang-1-{key}"}
    group = found[f"gang-0-{key}"]
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"] == {"cpu": "30m"}
    assert group["spec"]["queue"] == "training"
    assert group["metadata"]["ownerReferences"][0]["name"] == "gang-0"
