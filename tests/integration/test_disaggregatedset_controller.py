"""The DisaggregatedSet controller on the local cluster (simulated nodes): one
LeaderWorkerSet per slice, revision and role with upstream's names; the Services once a
revision is ready in every role; rollouts that drain the old revision; scaling; the
RoleScaler of an External role; garbage collection; webhook refusals."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.resources import DISAGGREGATEDSETS, ROLE_SCALERS, SERVICES
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.toolkit.disaggregatedset import (
    manifest,
    revision_of,
    rolling_role,
    set_lwss,
    set_services,
    settled,
)
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_create_rollout_scale_and_delete(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    body = manifest("llm", namespace, rolling_role("prefill", 2), rolling_role("decode", 1))
    created = await api.create(DISAGGREGATEDSETS, body)
    lwss = await settled(api, namespace, "llm", {"prefill": 2, "decode": 1})
    first = await revision_of(api, namespace, "llm")
    prefill = lwss[f"llm-0-{first}-prefill"]
    assert prefill["metadata"]["labels"] == {
        "app": "llm-0-prefill",
        c.LABEL_SET_NAME: "llm",
        c.LABEL_ROLE: "prefill",
        c.LABEL_SLICE: "0",
        c.LABEL_REVISION: first,
    }
    owner = prefill["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        c.KIND,
        created["metadata"]["uid"],
        True,
    )
    pod_labels = prefill["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert pod_labels[c.LABEL_REVISION] == first
    service = await api.get(SERVICES, f"llm-0-{first}-decode-prv", namespace)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {
        c.LABEL_SET_NAME: "llm",
        c.LABEL_ROLE: "decode",
        c.LABEL_REVISION: first,
        c.LABEL_SLICE: "0",
    }

    # A new image: a new revision; both roles roll and the old one is drained.
    stored = await api.get(DISAGGREGATEDSETS, "llm", namespace)
    for spec_role in stored["spec"]["roles"]:
        template = spec_role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        template["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"
    await api.replace(DISAGGREGATEDSETS, stored)
    await settled(api, namespace, "llm", {"prefill": 2, "decode": 1})
    second = await revision_of(api, namespace, "llm")
    assert second != first
    assert not {x for x in await set_services(api, namespace, "llm") if first in x}

    # Replicas are not part of the revision: scaling a role starts no rollout.
    patch = {"spec": {"roles": [rolling_role("prefill", 3), rolling_role("decode", 1)]}}
    patch["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"] = copy.deepcopy(
        stored["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    )
    patch["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"] = copy.deepcopy(
        stored["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    )
    await api.patch(DISAGGREGATEDSETS, "llm", patch, namespace=namespace)
    await settled(api, namespace, "llm", {"prefill": 3, "decode": 1})
    assert await revision_of(api, namespace, "llm") == second

    async def status_written() -> dict[str, Any] | None:
        status = (await api.get(DISAGGREGATEDSETS, "llm", namespace)).get("status") or {}
        roles = {x["name"]: x for x in status.get("roleStatuses") or ()}
        if roles.get("prefill", {}).get("readyReplicas") != 3:
            return None
        return status

    status = await eventually(status_written, within=60, what="the set's status")
    conditions = {x["type"]: x["status"] for x in status["conditions"]}
    assert conditions == {"Available": "True", "Progressing": "False"}

    await api.delete(DISAGGREGATEDSETS, "llm", namespace, propagation_policy="Foreground")

    async def all_gone() -> bool:
        return not await set_lwss(api, namespace, "llm") and not await set_services(
            api, namespace, "llm"
        )

    # Generous: the garbage collector discovers a new kind's dependents on its resync.
    await eventually(all_gone, within=120, what="the set's objects garbage collected")


async def test_external_role_scaler_scales_that_role_only(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    external = rolling_role("decode", 1, scaling={"mode": "External"})
    await api.create(
        DISAGGREGATEDSETS, manifest("hpa", namespace, rolling_role("prefill", 2), external)
    )

    scaler = await eventually(
        lambda: api.get_or_none(ROLE_SCALERS, "hpa-decode", namespace),
        within=60,
        what="the decode RoleScaler",
    )
    # A role with no LeaderWorkerSet yet starts at 1.
    assert scaler["spec"]["replicas"] == 1
    assert scaler["metadata"]["labels"] == {c.LABEL_SET_NAME: "hpa", c.LABEL_ROLE: "decode"}
    assert scaler["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True
    await settled(api, namespace, "hpa", {"prefill": 2, "decode": 1})

    await api.patch(
        ROLE_SCALERS,
        "hpa-decode",
        {"spec": {"replicas": 3}},
        namespace=namespace,
        subresource="scale",
    )
    await settled(api, namespace, "hpa", {"prefill": 2, "decode": 3})

    async def scaler_status() -> dict[str, Any] | None:
        found = await api.get(ROLE_SCALERS, "hpa-decode", namespace)
        status = found.get("status") or {}
        return status if status.get("replicas") == 3 else None

    status = await eventually(scaler_status, within=60, what="the scaler's status")
    assert status["selector"] == (
        f"{c.LABEL_SET_NAME}=hpa,{c.LABEL_ROLE}=decode,{lws_c.LABEL_WORKER_INDEX}=0"
    )
    assert [(x["type"], x["status"], x["reason"]) for x in status["conditions"]] == [
        ("Ready", "True", "Bound")
    ]
    scale = await api.request(
        "GET",
        ROLE_SCALERS.path(namespace, "hpa-decode", "scale"),
    )
    assert scale["spec"]["replicas"] == 3


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"slices": 2}, "spec.slices"),
        ({"placementPolicy": {"type": "ExclusiveSlice"}}, "spec.placementPolicy.topology"),
    ],
)
async def test_webhook_refusals_name_the_field(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    spec: dict[str, Any],
    field: str,
) -> None:
    external = rolling_role("decode", 1, scaling={"mode": "External"})
    body = manifest("bad", namespace, rolling_role("prefill", 1), external, **spec)
    with pytest.raises(ApiError) as refused:
        await nodesim_api.create(DISAGGREGATEDSETS, body)
    message = str(refused.value)
    assert "vdisaggregatedset.kb.io" in message
    assert field in message
