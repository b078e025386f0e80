"""The mutating LeaderWorkerSet webhook reads the object once, whether it defaults it
or refuses it; the pod webhook reads its LeaderWorkerSet's view from the cache, and
asks the API server only when the cache does not have it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.webhooks.admission import mutate_leaderworkerset, pod_mutator
from tests.toolkit.caches import seeded_caches
from tests.toolkit.decodes import count_lws_decodes
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.pods import unadmitted_leader


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    return count_lws_decodes(monkeypatch)


@pytest.mark.parametrize("replicas", [3, "three"], ids=["defaulted", "refused"])
def test_the_mutating_webhook_decodes_the_object_once(decodes: list[object], replicas: Any) -> None:
    obj = leaderworkerset("a", "ns")
    obj["spec"]["replicas"] = replicas
    response = asyncio.run(mutate_leaderworkerset({"uid": "u", "object": obj})).to_json("u")
    assert response["allowed"] is (replicas == 3)
    assert decodes == [obj]


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "fetched"])
async def test_the_pod_webhook_reads_the_lws_from_the_cache_else_the_api_server(
    cached: bool,
) -> None:
    lws = leaderworkerset("lws", "ns", groupIdentity=c.GROUP_IDENTITY_HASH)
    fetched: list[tuple[str, str]] = []

    async def fetch(namespace: str, name: str) -> JSON | None:
        fetched.append((namespace, name))
        return lws

    async with seeded_caches(*([lws] if cached else [])) as caches:
        mutate = pod_mutator(caches, ControllerOptions(), fetch, new_group_key=lambda ns: "k1")
        response = await mutate({"object": unadmitted_leader(), "namespace": "ns"})
    assert response.allowed, response.result
    # A Hash leader draws its group key: the LeaderWorkerSet was read either way.
    assert any(op["path"] == "/spec/hostname" for op in response.patch or [])
    assert fetched == ([] if cached else [("ns", "lws")])
