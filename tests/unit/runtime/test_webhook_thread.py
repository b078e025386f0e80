"""The webhook server on its own thread: reviews answered while the loop that started it
is blocked, handlers placed on that loop, shutdown with a review in flight, and
certificates changed on the server's thread."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.runtime import keypair_files, webhook
from leaderworkerset.runtime.pki import KeyPairs
from leaderworkerset.runtime.webhook import AdmissionResponse, RunsOn, WebhookServer, allow
from leaderworkerset.webhooks.admission import POD_MUTATING_PATH, register_webhooks
from leaderworkerset.webhooks.leaderworkerset import VALIDATING_PATH
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import defaulted_json, leaderworkerset
from tests.toolkit.pods import unadmitted_leader
from tests.toolkit.waiting import eventually
from tests.toolkit.webhook_client import (
    blocking_connection,
    new_pairs,
    post,
    post_blocking,
    post_over,
    presented_certificate,
    review,
    write_pairs,
)


def webhook_threads() -> set[threading.Thread]:
    """The webhook server threads alive now, but those left by earlier tests of this
    process (the whole suite runs in one): each test checks its own server's."""
    return {t for t in threading.enumerate() if t.name == "webhook-server"} - _EARLIER


_EARLIER: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def _earlier_servers() -> None:
    _EARLIER.clear()
    _EARLIER.update(t for t in threading.enumerate() if t.name == "webhook-server")


@pytest_asyncio.fixture
async def started(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, KeyPairs, dict[str, Any]]]:
    """A server whose handlers record the thread they ran on and what they awaited."""
    pairs = new_pairs()
    write_pairs(tmp_path, pairs)
    seen: dict[str, Any] = {}
    srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, reload_interval=0.05)

    async def on_manager(name: str) -> str:
        seen["helper thread"] = threading.current_thread()
        return f"hello {name}"

    hello = srv.on_manager_loop(on_manager)

    async def fast(request: dict[str, Any]) -> AdmissionResponse:
        seen["fast thread"] = threading.current_thread()
        return allow()

    async def helped(request: dict[str, Any]) -> AdmissionResponse:
        seen["helped thread"] = threading.current_thread()
        return allow(await hello("pod"))

    async def on_loop(request: dict[str, Any]) -> AdmissionResponse:
        seen["manager-loop thread"] = threading.current_thread()
        return allow()

    srv.register("/fast", fast)
    srv.register("/helped", helped)
    srv.register("/on-loop", on_loop, runs_on=RunsOn.MANAGER_LOOP)
    await srv.start()
    try:
        yield srv, pairs, seen
    finally:
        await srv.stop(5)


async def test_reviews_are_answered_while_the_starting_loop_is_blocked(
    started: tuple[WebhookServer, KeyPairs, dict[str, Any]],
) -> None:
    srv, pairs, seen = started
    answers: list[dict[str, Any]] = []
    client = threading.Thread(target=lambda: answers.append(post_blocking(srv, pairs, "/fast")))
    began = time.monotonic()
    client.start()
    # The loop is held in a synchronous, CPU-bound call, as a long reconcile holds it;
    # the review (handshake included) must finish while it lasts. Generous: this
    # thread holds the GIL, so every step of the handshake waits for a switch.
    block_ends = began + 10.0
    while not answers and time.monotonic() < block_ends:
        pass
    client.join(5)
    assert answers, "no answer while the loop was blocked"
    assert answers[0]["response"]["allowed"] is True
    assert seen["fast thread"].name == "webhook-server"


async def test_handlers_reach_the_starting_loop(
    started: tuple[WebhookServer, KeyPairs, dict[str, Any]],
) -> None:
    srv, pairs, seen = started
    status, body = await post(srv, pairs, "/helped", review({}))
    assert status == 200 and body["response"]["status"]["message"] == "hello pod"
    assert seen["helped thread"].name == "webhook-server"
    assert seen["helper thread"] is threading.current_thread()
    status, body = await post(srv, pairs, "/on-loop", review({}))
    assert status == 200 and body["response"]["allowed"] is True
    assert seen["manager-loop thread"] is threading.current_thread()


async def test_stop_lets_a_review_in_flight_finish(tmp_path: Path) -> None:
    pairs = new_pairs()
    write_pairs(tmp_path, pairs)
    release = asyncio.Event()
    entered = threading.Event()
    srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0)

    async def wait_for_release() -> None:
        await release.wait()

    held = srv.on_manager_loop(wait_for_release)

    async def slow(request: dict[str, Any]) -> AdmissionResponse:
        entered.set()
        await held()  # on the loop that is stopping the server
        return allow("released")

    srv.register("/slow", slow)
    await srv.start()
    in_flight = asyncio.create_task(post(srv, pairs, "/slow", review({})))
    assert await asyncio.to_thread(entered.wait, 10)
    stopping = asyncio.create_task(srv.stop(10))
    deadline = time.monotonic() + 5
    while srv.is_serving():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert not stopping.done()
    release.set()
    status, body = await asyncio.wait_for(in_flight, 10)
    assert status == 200 and body["response"]["status"]["message"] == "released"
    await asyncio.wait_for(stopping, 10)
    assert not webhook_threads()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()


async def test_start_errors_raise_from_start(tmp_path: Path) -> None:
    write_pairs(tmp_path, new_pairs())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=taken.getsockname()[1])
        with pytest.raises(OSError):
            await srv.start()
    assert not srv.is_serving()
    await srv.stop(1)
    assert not webhook_threads()


async def test_a_reload_asked_from_the_starting_loop_runs_on_the_server_thread(
    started: tuple[WebhookServer, KeyPairs, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, _, _ = started
    threads: list[str] = []
    load = keypair_files.load_key_pair

    def recorded(ctx: Any, cert: bytes, key: bytes) -> None:
        threads.append(threading.current_thread().name)
        load(ctx, cert, key)

    monkeypatch.setattr(keypair_files, "load_key_pair", recorded)
    srv.reload_interval = 3600.0  # the watcher sleeps through this test
    new = new_pairs()
    write_pairs(tmp_path, new)
    loaded = srv.reload_certificates()
    # The watcher may have loaded it first, before its long sleep.
    assert loaded or srv.certificate() == new.cert
    assert srv.certificate() == new.cert
    assert (await presented_certificate(srv.port))[0] == new.cert
    assert threads and set(threads) == {"webhook-server"}


async def hold_the_server_thread(srv: WebhookServer) -> threading.Event:
    """Stop the server's own watch of the files (only a queued reload may load them
    now) and keep its thread busy until the returned event is set."""
    busy, free = threading.Event(), threading.Event()

    def hold() -> None:
        assert srv._watcher is not None
        srv._watcher.cancel()
        busy.set()
        free.wait(10)

    assert srv._loop is not None
    srv._loop.call_soon_threadsafe(hold)
    assert await asyncio.to_thread(busy.wait, 5)
    return free


async def test_an_awaited_reload_leaves_the_callers_loop_running(
    started: tuple[WebhookServer, KeyPairs, dict[str, Any]], tmp_path: Path
) -> None:
    """The manager awaits the reload: while the server's thread is busy, the manager's
    loop (lease renewals, reconciles) keeps running, and the reload lands once the
    thread is free."""
    srv, _, _ = started
    free = await hold_the_server_thread(srv)
    new = new_pairs()
    write_pairs(tmp_path, new)
    reload = asyncio.create_task(srv.reload_certificates_async())
    ticks = 0
    while ticks < 10:  # the caller's loop runs other work meanwhile
        await asyncio.sleep(0.01)
        ticks += 1
    assert not reload.done()
    free.set()
    assert await asyncio.wait_for(reload, 5) is True
    assert srv.certificate() == new.cert


async def test_an_awaited_reload_that_times_out_still_lands(
    started: tuple[WebhookServer, KeyPairs, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Giving up the wait does not change the live context from the wrong thread, nor
    withdraw the reload queued on the server's thread."""
    srv, old, _ = started
    monkeypatch.setattr(webhook, "RELOAD_WAIT", 0.2)
    free = await hold_the_server_thread(srv)
    new = new_pairs()
    write_pairs(tmp_path, new)
    try:
        assert await srv.reload_certificates_async() is False
        assert srv.certificate() == old.cert  # not loaded from this thread
    finally:
        free.set()
    await eventually(lambda: srv.certificate() == new.cert, "the queued reload to land")


def recording_client(threads: list[threading.Thread]) -> FakeApiClient:
    """The fake client, recording the thread of each call: the LeaderWorkerSet the
    cache does not hold yet is a Hash one."""
    client = FakeApiClient()

    async def on_call(call: Call) -> dict[str, Any] | None:
        threads.append(threading.current_thread())
        if call.verb != "get":
            return None
        assert call.namespace is not None  # a LeaderWorkerSet is namespaced
        return leaderworkerset(call.name, call.namespace, groupIdentity=c.GROUP_IDENTITY_HASH)

    client.on_call = on_call
    return client


async def test_registered_webhooks_call_the_api_on_the_starting_loop(tmp_path: Path) -> None:
    pairs = new_pairs()
    write_pairs(tmp_path, pairs)
    threads: list[threading.Thread] = []
    client = recording_client(threads)
    checked: list[threading.Thread] = []

    async def template_check(lws: dict[str, Any], old: dict[str, Any] | None) -> list[Any]:
        checked.append(threading.current_thread())
        return []

    srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0)
    async with seeded_caches() as caches:
        register_webhooks(srv, caches, ControllerOptions(), client, template_check)
        await srv.start()
        try:
            leader = unadmitted_leader()
            body = review(leader)
            body["request"]["namespace"] = "ns"
            status, answer = await post(srv, pairs, POD_MUTATING_PATH, body)
            assert status == 200 and answer["response"]["allowed"], answer
            patch = json.loads(base64.b64decode(answer["response"]["patch"]))
            # A Hash leader draws its group key: the fetched LWS was used.
            assert any(op["path"] == "/spec/hostname" for op in patch), patch
            assert threads == [threading.current_thread()]
            container = {"name": "c", "image": "i"}
            lws = leaderworkerset("lws", "ns", replicas=1, size=1, container=container)
            body = review(defaulted_json(lws))
            body["request"]["namespace"] = "ns"
            status, answer = await post(srv, pairs, VALIDATING_PATH, body)
            assert status == 200 and answer["response"]["allowed"], answer
            assert checked == [threading.current_thread()]
        finally:
            await srv.stop(5)


def _connections_counted(srv: WebhookServer) -> float:
    value = srv.metrics.registry.get_sample_value("lws_webhook_connections_total")
    return value or 0.0


async def test_connections_are_counted_once_each(
    started: tuple[WebhookServer, KeyPairs, dict[str, Any]],
) -> None:
    srv, pairs, _ = started
    before = _connections_counted(srv)

    def three_then_one() -> None:
        kept, fresh = blocking_connection(srv, pairs), blocking_connection(srv, pairs)
        try:
            for connection in (kept, kept, kept, fresh):
                assert post_over(connection, "/fast")["response"]["allowed"] is True
        finally:
            kept.close()
            fresh.close()

    await asyncio.to_thread(three_then_one)
    assert _connections_counted(srv) - before == 2
