"""The generated DisaggregatedSet and RoleScaler CRDs installed into the real API server:
it accepts them (structural schemas, the CEL rule compiles), stores what our defaulting
replays, refuses what our validation says the schema refuses, keeps a role's Group Identity
members without defaulting them, and serves the RoleScaler's /scale."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lws_localcluster.manager_process import install_upstream_needs

from leaderworkerset.api.disaggregatedset.crd import build_disaggregatedset_crd, build_scaler_crd
from leaderworkerset.api.disaggregatedset.validation import validate_create
from leaderworkerset.api.resources import CRDS, Resource
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.lws import paused_lws_controller
from tests.toolkit.disaggregatedset import EXTERNAL, decoded, manifest, role
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

DISAGGREGATEDSETS = Resource(
    "disaggregatedset.x-k8s.io", "v1", "disaggregatedsets", "DisaggregatedSet"
)
SCALERS = Resource(
    "disaggregatedset.x-k8s.io", "v1", "disaggregatedsetrolescalers", "DisaggregatedSetRoleScaler"
)


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def ds_client(kubeconfig: Path, request: pytest.FixtureRequest) -> AsyncIterator[ApiClient]:
    # The API server alone: the session's controller (if any) and its webhooks, the
    # DisaggregatedSet one included, are away while these tests run.
    async with paused_lws_controller(request.session, without_webhooks=True):
        async for client in _crd_client(kubeconfig):
            yield client


async def _crd_client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    client = ApiClient.from_kubeconfig(kubeconfig)
    for crd in (build_disaggregatedset_crd(), build_scaler_crd()):
        await client.apply(CRDS, crd, field_manager="lws-tests")

    async def served() -> bool:
        try:
            await client.list(DISAGGREGATEDSETS, "default")
            await client.list(SCALERS, "default")
        except ApiError:
            return False
        return True

    await eventually(served, what="DisaggregatedSet kinds served")
    yield client
    await client.close()


async def test_stored_object_is_what_our_defaulting_replays(
    ds_client: ApiClient, namespace: str
) -> None:
    doc = manifest(
        "llm",
        namespace,
        role("prefill", None, rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": 2}}),
        role("decode", 3, scaling={}),
        placementPolicy={"topology": "rack"},
    )
    stored = await ds_client.create(DISAGGREGATEDSETS, copy.deepcopy(doc))
    assert stored["spec"] == decoded(doc).to_json()["spec"]
    assert validate_create(decoded(stored)) == []


@pytest.mark.parametrize(
    "change,field",
    [
        pytest.param({"roles": [role("prefill")]}, "spec.roles", id="one role"),
        pytest.param(
            {"roles": [role("prefill"), role("prefill")]}, "spec.roles[1]", id="duplicate"
        ),
        pytest.param({"roles": [role("Prefill"), role("decode")]}, "spec.roles[0].name", id="name"),
        pytest.param({"slices": 0}, "spec.slices", id="slices"),
        pytest.param(
            {"roles": [role("prefill", 0), role("decode", 2)]}, "spec", id="replicas rule"
        ),
        pytest.param(
            {"placementPolicy": {"type": "Spread"}},
            "spec.placementPolicy.type",
            id="placement enum",
        ),
    ],
)
async def test_schema_refusals_match_our_validation(
    ds_client: ApiClient, namespace: str, change: dict[str, Any], field: str
) -> None:
    doc = manifest("llm", namespace)
    doc["spec"].update(change)
    assert field in [e.field for e in validate_create(decoded(doc))]
    with pytest.raises(ApiError) as refused:
        await ds_client.create(DISAGGREGATEDSETS, doc)
    assert refused.value.status == 422
    causes = (refused.value.body.get("details") or {}).get("causes") or []
    assert field in [cause.get("field") for cause in causes], refused.value.message


async def test_the_replicas_rule_speaks_upstreams_words(
    ds_client: ApiClient, namespace: str
) -> None:
    doc = manifest("llm", namespace, role("prefill", 0), role("decode", 2))
    with pytest.raises(ApiError) as refused:
        await ds_client.create(DISAGGREGATEDSETS, doc)
    assert "replicas must be zero for all non-External roles" in refused.value.message
    external = role("prefill", 0, scaling=EXTERNAL)
    await ds_client.create(
        DISAGGREGATEDSETS, manifest("llm", namespace, external, role("decode", 2))
    )


async def test_roles_keep_group_identity_and_get_no_default(
    ds_client: ApiClient, namespace: str
) -> None:
    doc = manifest("llm", namespace, role("prefill", groupIdentity="Hash"), role("decode"))
    stored = await ds_client.create(DISAGGREGATEDSETS, doc)
    prefill, decode = (r["spec"] for r in stored["spec"]["roles"])
    assert prefill["groupIdentity"] == "Hash" and "groupReplacementPolicy" not in prefill
    assert "groupIdentity" not in decode and "groupReplacementPolicy" not in decode
    doc = manifest("llm", namespace, role("prefill", groupIdentity="Sequential"), role("decode"))
    doc["metadata"]["name"] = "bad-identity"
    with pytest.raises(ApiError) as refused:
        await ds_client.create(DISAGGREGATEDSETS, doc)
    assert "spec.roles[0].spec.groupIdentity" in refused.value.message


async def test_role_scaler_defaults_and_scale_subresource(
    ds_client: ApiClient, namespace: str
) -> None:
    scaler = {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetRoleScaler",
        "metadata": {"name": "llm-prefill", "namespace": namespace},
    }
    stored = await ds_client.create(SCALERS, copy.deepcopy(scaler) | {"spec": {}})
    assert stored["spec"] == {"replicas": 0}
    status = {"status": {"replicas": 2, "selector": "disaggregatedset.x-k8s.io/role=prefill"}}
    await ds_client.patch(SCALERS, "llm-prefill", status, namespace=namespace, subresource="status")
    scale = await ds_client.request("GET", SCALERS.path(namespace, "llm-prefill", "scale"))
    assert scale["spec"].get("replicas", 0) == 0  # Scale leaves a 0 out
    assert scale["status"] == {
        "replicas": 2,
        "selector": "disaggregatedset.x-k8s.io/role=prefill",
    }
    await ds_client.patch(
        SCALERS, "llm-prefill", {"spec": {"replicas": 5}}, namespace=namespace, subresource="scale"
    )
    assert (await ds_client.get(SCALERS, "llm-prefill", namespace=namespace))["spec"] == {
        "replicas": 5
    }


async def test_upstream_manager_gets_the_real_crds(ds_client: ApiClient) -> None:
    """What the migration tests install for upstream's manager: these CRDs, served."""
    await install_upstream_needs(ds_client)
    for crd in (build_disaggregatedset_crd(), build_scaler_crd()):
        stored = await ds_client.get(CRDS, crd["metadata"]["name"])
        served = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert served == crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
