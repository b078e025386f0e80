"""The generated CRD installed into the real API server: objects round-trip, the
schema defaults match ours, malformed templates are rejected, /scale works."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.crd import build_crd
from leaderworkerset.api.leaderworkerset.defaults import apply_schema_defaults
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.resources import CRDS, LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.lws import paused_lws_controller
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
LWS_SAMPLES = sorted(
    p.name for p in SAMPLES.glob("*.yaml") if yaml.safe_load(p.read_text())["kind"] == c.KIND
)
POD_TEMPLATES = ("leaderTemplate", "workerTemplate")


@pytest_asyncio.fixture(loop_scope="session", scope="module", autouse=True)
async def _api_server_alone(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """These tests read what the API server stores on its own, so no webhook of the
    session's controller (if an earlier module started it) may default the objects."""
    async with paused_lws_controller(request.session, without_webhooks=True):
        yield


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def crd_client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    client = ApiClient.from_kubeconfig(kubeconfig)
    await client.apply(CRDS, build_crd(), field_manager="lws-tests")

    async def established() -> bool:
        crd = await client.get(CRDS, c.CRD_NAME)
        conditions = crd.get("status", {}).get("conditions") or []
        return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)

    await eventually(established, what="CRD established")
    # Discovery of a new resource lags a little behind Established.
    await eventually(lambda: _listable(client), what="leaderworkersets served")
    yield client
    await client.close()


async def _listable(client: ApiClient) -> bool:
    try:
        await client.list(LEADERWORKERSETS, "default")
    except ApiError:
        return False
    return True


def _sample(name: str, namespace: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    data["metadata"]["namespace"] = namespace
    return data


def _without_templates(spec: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    for name in POD_TEMPLATES:
        spec["leaderWorkerTemplate"].pop(name, None)
    return spec


@pytest.mark.parametrize("sample", LWS_SAMPLES)
async def test_samples_round_trip_through_the_api_server(
    crd_client: ApiClient, namespace: str, sample: str
) -> None:
    data = _sample(sample, namespace)
    stored = await crd_client.create(LEADERWORKERSETS, data)

    lws, errors = LeaderWorkerSet.from_json(stored)
    assert errors == []
    assert lws.to_json() == stored  # what the server returns decodes and re-encodes losslessly

    # Our replay of the schema defaults matches what the API server applied.
    expected, _ = LeaderWorkerSet.from_json(data)
    apply_schema_defaults(expected)
    assert _without_templates(stored["spec"]) == _without_templates(expected.to_json()["spec"])
    worker = stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"


async def test_pod_template_schema_defaults_apply(crd_client: ApiClient, namespace: str) -> None:
    stored = await crd_client.create(
        LEADERWORKERSETS, _sample("worker-template-only.yaml", namespace)
    )
    port = stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "ports"
    ][0]
    assert port == {"containerPort": 8080, "protocol": "TCP"}


async def test_unknown_members_are_pruned_by_the_server(
    crd_client: ApiClient, namespace: str
) -> None:
    data = _sample("worker-template-only.yaml", namespace)
    data["spec"]["notAField"] = 1
    data["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["notAPodField"] = True
    stored = await crd_client.create(LEADERWORKERSETS, data)
    assert "notAField" not in stored["spec"]
    assert "notAPodField" not in stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(
            lambda s: s["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(
                containers="nginx"
            ),
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers",
            id="containers-not-a-list",
        ),
        pytest.param(
            lambda s: s["leaderWorkerTemplate"]["workerTemplate"]["spec"].pop("containers"),
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers",
            id="containers-missing",
        ),
        pytest.param(
            lambda s: s["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].pop(
                "name"
            ),
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name",
            id="container-name-missing",
        ),
        pytest.param(lambda s: s.update(startupPolicy="Whenever"), "spec.startupPolicy", id="enum"),
        pytest.param(
            lambda s: s.update(groupIdentity="Random"), "spec.groupIdentity", id="identity-enum"
        ),
        pytest.param(lambda s: s.update(replicas=-1), "spec.replicas", id="replicas-minimum"),
        pytest.param(
            lambda s: s["leaderWorkerTemplate"].pop("workerTemplate"),
            "spec.leaderWorkerTemplate.workerTemplate",
            id="worker-template-required",
        ),
    ],
)
async def test_schema_rejects_malformed_objects(
    crd_client: ApiClient, namespace: str, mutate: Any, field: str
) -> None:
    data = _sample("worker-template-only.yaml", namespace)
    mutate(data["spec"])
    with pytest.raises(ApiError) as info:
        await crd_client.create(LEADERWORKERSETS, data)
    assert info.value.status == 422
    assert field in info.value.message


async def test_scale_subresource(crd_client: ApiClient, namespace: str) -> None:
    data = _sample("worker-template-only.yaml", namespace)
    await crd_client.create(LEADERWORKERSETS, data)
    name = data["metadata"]["name"]
    scale = await crd_client.request("GET", LEADERWORKERSETS.path(namespace, name, "scale"))
    assert scale["spec"]["replicas"] == 3
    scale["spec"]["replicas"] = 5
    await crd_client.request("PUT", LEADERWORKERSETS.path(namespace, name, "scale"), body=scale)
    stored = await crd_client.get(LEADERWORKERSETS, name, namespace)
    assert stored["spec"]["replicas"] == 5

    # The selector the HPA uses is whatever the controller publishes in status.
    stored["status"] = {"replicas": 5, "hpaPodSelector": f"{c.LABEL_SET_NAME}={name}"}
    await crd_client.replace(LEADERWORKERSETS, stored, subresource="status")
    scale = await crd_client.request("GET", LEADERWORKERSETS.path(namespace, name, "scale"))
    assert scale["status"] == {"replicas": 5, "selector": f"{c.LABEL_SET_NAME}={name}"}


async def test_explain_describes_pod_templates(crd_client: ApiClient) -> None:
    doc = await crd_client.request("GET", f"/openapi/v3/apis/{c.GROUP}/{c.VERSION}")
    schemas = doc["components"]["schemas"]
    (lws_schema,) = [v for k, v in schemas.items() if k.endswith(f".{c.KIND}")]
    worker = lws_schema["properties"]["spec"]["properties"]["leaderWorkerTemplate"]["properties"][
        "workerTemplate"
    ]
    containers = worker["properties"]["spec"]["properties"]["containers"]
    assert "image" in containers["items"]["properties"]
    assert containers["items"]["properties"]["image"]["description"]
