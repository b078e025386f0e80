"""The watch cache against a real API server: outages, expired versions, scoping, indexes.

ConfigMaps stand in for pods: they need no nodes and are as cheap as objects get.
While the API server restarts, the cache's retry sleep is held shut (a "gate"),
so the test decides when the cache reconnects and knows what it missed.

The restart tests run on a control plane of their own: every restart pushes the
controller manager's reflectors further into their backoff (up to a minute), and
compaction expires every watch in the cluster, which would slow down or break
whichever test of the shared session cluster came next.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from lws_localcluster.controlplane import ControlPlane

from leaderworkerset.api.resources import CONFIGMAPS, NAMESPACES
from leaderworkerset.runtime.cache import Backoff, DeletedFinalStateUnknown, Informer
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError
from leaderworkerset.runtime.indexes import (
    OWNER_UID_INDEX,
    label_index_name,
    label_index_value,
    object_key,
)
from tests.fixtures.controlplane import TEST_NAMESPACE_LABEL
from tests.toolkit.waiting import eventually, retrying

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(600),
    # The client fixture's connections belong to the loop that opened them (the
    # session's, where async fixtures run): run the tests on that loop too.
    pytest.mark.asyncio(loop_scope="session"),
]

JSON = dict[str, Any]
LABEL = "leaderworkerset.sigs.k8s.io/name"


class Gate:
    """The cache's retry sleep; while shut, the cache's watch stays down."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.opened.set()
        self.parked = 0

    async def sleep(self, delay: float) -> None:
        self.parked += 1
        try:
            await self.opened.wait()
        finally:
            self.parked -= 1
        await asyncio.sleep(delay)


class Recorder:
    """Every event the cache delivers, and the resourceVersions it last saw per key."""

    def __init__(self, informer: Informer) -> None:
        self.events: list[tuple[str, str]] = []
        self.seen: dict[str, str] = {}
        self.tombstones = 0
        informer.add_handler(self.on_add, self.on_update, self.on_delete)

    def on_add(self, obj: JSON) -> None:
        self._record("add", obj)

    def on_update(self, old: JSON, new: JSON) -> None:
        self._record("update", new)

    def on_delete(self, obj: JSON) -> None:
        self.tombstones += isinstance(obj, DeletedFinalStateUnknown)
        self._record("delete", obj)

    def _record(self, kind: str, obj: JSON) -> None:
        key = object_key(obj)
        self.events.append((kind, key))
        self.seen[key] = obj["metadata"]["resourceVersion"]

    def of(self, kind: str) -> set[str]:
        return {key for k, key in self.events if k == kind}


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("cache-controlplane"), name="cache-tests") as cp:
        yield cp


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    api = ApiClient.from_kubeconfig(kubeconfig)
    yield api
    await api.close()


@pytest.fixture
async def private(
    private_cluster: ControlPlane, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[ControlPlane, ApiClient, str]]:
    """The private control plane, a client of it and a fresh namespace in it."""
    api = ApiClient.from_kubeconfig(private_cluster.kubeconfig)
    namespace = f"{request.node.name[:40].replace('_', '-')}-{secrets.token_hex(3)}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    await retrying(lambda: api.create(NAMESPACES, body))
    yield private_cluster, api, namespace
    with contextlib.suppress(ApiError, *TRANSPORT_ERRORS):
        await api.delete(NAMESPACES, namespace)
    await api.close()


def configmap(namespace: str, name: str, labels: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": {"v": "0"},
    }


async def create(api: ApiClient, namespace: str, name: str, **kwargs: Any) -> JSON:
    return await retrying(lambda: api.create(CONFIGMAPS, configmap(namespace, name, **kwargs)))


async def bump(api: ApiClient, namespace: str, name: str, value: str) -> JSON:
    return await retrying(
        lambda: api.patch(CONFIGMAPS, name, {"data": {"v": value}}, namespace=namespace)
    )


async def remove(api: ApiClient, namespace: str, name: str) -> None:
    await retrying(lambda: api.delete(CONFIGMAPS, name, namespace))


async def listed(api: ApiClient, namespace: str, **selectors: Any) -> dict[str, str]:
    page = await retrying(lambda: api.list(CONFIGMAPS, namespace, **selectors))
    return {object_key(o): o["metadata"]["resourceVersion"] for o in page["items"]}


def cached(informer: Informer) -> dict[str, str]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}


async def matches_a_fresh_list(api: ApiClient, informer: Informer, namespace: str) -> bool:
    return cached(informer) == await listed(api, namespace)


async def restart_apiserver(cp: ControlPlane, gate: Gate) -> None:
    await asyncio.to_thread(cp.restart_apiserver)
    await eventually(lambda: gate.parked > 0, "the cache to retry its broken watch", within=60)


async def change_during_outage(
    api: ApiClient, namespace: str, created: int, names: list[str]
) -> tuple[set[str], dict[str, str], set[str]]:
    """Create ``created`` objects, update half of ``names`` and delete the other half."""
    new = {f"{namespace}/outage-{i}" for i in range(created)}
    for key in sorted(new):
        await create(api, namespace, key.split("/")[1])
    half = len(names) // 2
    updated = {}
    for name in names[:half]:
        obj = await bump(api, namespace, name, "outage")
        updated[f"{namespace}/{name}"] = obj["metadata"]["resourceVersion"]
    deleted = {f"{namespace}/{name}" for name in names[half:]}
    for name in names[half:]:
        await remove(api, namespace, name)
    return new, updated, deleted


def assert_all_seen(
    recorder: Recorder, new: set[str], updated: dict[str, str], deleted: set[str]
) -> None:
    assert new <= recorder.of("add"), f"adds missed: {new - recorder.of('add')}"
    assert set(updated) <= recorder.of("update"), "updates missed"
    for key, version in updated.items():
        assert recorder.seen[key] == version
    assert deleted <= recorder.of("delete"), f"deletes missed: {deleted - recorder.of('delete')}"


async def test_cache_catches_up_after_an_api_server_restart(
    private: tuple[ControlPlane, ApiClient, str],
) -> None:
    cp, client, namespace = private
    names = [f"cm-{i}" for i in range(20)]
    for name in names:
        await create(client, namespace, name)
    gate = Gate()
    informer = Informer(
        client, CONFIGMAPS, namespace=namespace, sleep=gate.sleep, backoff=Backoff(0.05, 1.0)
    )
    recorder = Recorder(informer)
    informer.start()
    try:
        assert await informer.wait_synced(30)
        assert {f"{namespace}/{n}" for n in names} <= recorder.of("add")
        live = await bump(client, namespace, names[0], "live")
        await eventually(
            lambda: (
                recorder.seen.get(f"{namespace}/{names[0]}") == live["metadata"]["resourceVersion"]
            ),
            "a live update",
            within=60,
        )

        gate.opened.clear()
        await restart_apiserver(cp, gate)
        new, updated, deleted = await change_during_outage(client, namespace, 10, names[1:])
        recorder.events.clear()
        gate.opened.set()

        await eventually(
            lambda: matches_a_fresh_list(client, informer, namespace),
            "the cache to catch up",
            within=60,
        )
        assert_all_seen(recorder, new, updated, deleted)
        # And the watch runs again afterwards.
        after = await create(client, namespace, "after-restart")
        await eventually(
            lambda: informer.get(namespace, "after-restart") is not None, "a new add", within=60
        )
        assert recorder.seen[f"{namespace}/after-restart"] == after["metadata"]["resourceVersion"]
    finally:
        await informer.stop()


async def etcd_compact(endpoint: str) -> int:
    """Compact etcd to its current revision, so every older version is gone."""
    async with httpx.AsyncClient(base_url=endpoint, timeout=10) as etcd:
        response = await etcd.post("/v3/kv/range", json={"key": "AA=="})
        response.raise_for_status()
        revision = int(response.json()["header"]["revision"])
        compacted = await etcd.post(
            "/v3/kv/compaction", json={"revision": str(revision), "physical": True}
        )
        compacted.raise_for_status()
    return revision


async def test_cache_relists_after_its_version_is_compacted_away(
    private: tuple[ControlPlane, ApiClient, str],
) -> None:
    cp, client, namespace = private
    names = [f"cm-{i}" for i in range(30)]
    for name in names:
        await create(client, namespace, name)
    gate = Gate()
    informer = Informer(
        client, CONFIGMAPS, namespace=namespace, sleep=gate.sleep, backoff=Backoff(0.05, 1.0)
    )
    recorder = Recorder(informer)
    informer.start()
    try:
        assert await informer.wait_synced(30)
        stale_version = int(informer.resource_version)

        gate.opened.clear()
        await restart_apiserver(cp, gate)
        new, updated, deleted = await change_during_outage(client, namespace, 15, names)
        revision = await etcd_compact(cp.etcd_endpoint)
        assert revision > stale_version
        # A fresh API server has no watch cache to serve the old version from either.
        await restart_apiserver(cp, gate)
        recorder.events.clear()
        lists_before = informer.lists
        gate.opened.set()

        await eventually(
            lambda: matches_a_fresh_list(client, informer, namespace),
            "the cache to relist",
            within=60,
        )
        assert informer.lists > lists_before, "the expired version must force a relist"
        assert int(informer.resource_version) >= revision
        assert_all_seen(recorder, new, updated, deleted)
        # Deletions found by a relist come as tombstones: the final state is unknown.
        assert recorder.tombstones >= len(deleted)
    finally:
        await informer.stop()


async def test_label_scoped_cache_and_its_indexes(client: ApiClient, namespace: str) -> None:
    owner = await create(client, namespace, "owner")
    owner_ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    for i in range(3):
        await create(client, namespace, f"a-{i}", labels={LABEL: "lws-a"})
    for i in range(2):
        await create(client, namespace, f"b-{i}", labels={LABEL: "lws-b"})
    await create(client, namespace, "unlabelled")
    await retrying(
        lambda: client.patch(
            CONFIGMAPS, "a-0", {"metadata": {"ownerReferences": [owner_ref]}}, namespace=namespace
        )
    )

    informer = Informer(
        client, CONFIGMAPS, namespace=namespace, label_selector=LABEL, label_indexes=[LABEL]
    )
    namespaces = Informer(client, NAMESPACES, label_selector=f"{TEST_NAMESPACE_LABEL}=true")
    informer.start()
    namespaces.start()
    try:
        assert await informer.wait_synced(30) and await namespaces.wait_synced(30)
        assert sorted(informer.keys()) == sorted(
            f"{namespace}/{n}" for n in ("a-0", "a-1", "a-2", "b-0", "b-1")
        )
        assert namespace in namespaces  # cluster-scoped: keyed by bare name
        by_label = label_index_name(LABEL)
        assert informer.index_keys(by_label, label_index_value(namespace, "lws-a")) == [
            f"{namespace}/a-{i}" for i in range(3)
        ]
        owned = informer.by_index(OWNER_UID_INDEX, owner["metadata"]["uid"])
        assert [o["metadata"]["name"] for o in owned] == ["a-0"]

        # Objects move into and out of the selector's scope, and between index values.
        await retrying(
            lambda: client.patch(
                CONFIGMAPS,
                "unlabelled",
                {"metadata": {"labels": {LABEL: "lws-b"}}},
                namespace=namespace,
            )
        )
        await retrying(
            lambda: client.patch(
                CONFIGMAPS, "a-2", {"metadata": {"labels": {LABEL: None}}}, namespace=namespace
            )
        )
        await retrying(
            lambda: client.patch(
                CONFIGMAPS, "a-1", {"metadata": {"labels": {LABEL: "lws-b"}}}, namespace=namespace
            )
        )
        expected_b = [f"{namespace}/{n}" for n in ("a-1", "b-0", "b-1", "unlabelled")]
        await eventually(
            lambda: (
                informer.index_keys(by_label, label_index_value(namespace, "lws-b")) == expected_b
            ),
            "the label index to follow the relabels",
            within=60,
        )
        assert informer.index_keys(by_label, label_index_value(namespace, "lws-a")) == [
            f"{namespace}/a-0"
        ]
        assert informer.get(namespace, "a-2") is None
        assert cached(informer) == await listed(client, namespace, label_selector=LABEL)
    finally:
        await informer.stop()
        await namespaces.stop()


async def test_field_selector_scopes_the_cache(client: ApiClient, namespace: str) -> None:
    for name in ("keep-me", "skip-me"):
        await create(client, namespace, name)
    informer = Informer(
        client, CONFIGMAPS, namespace=namespace, field_selector="metadata.name=keep-me"
    )
    informer.start()
    try:
        assert await informer.wait_synced(30)
        assert informer.keys() == [f"{namespace}/keep-me"]
    finally:
        await informer.stop()
