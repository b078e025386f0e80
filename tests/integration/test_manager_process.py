"""`lws controller` as a deployment runs it: real processes with a Configuration file,
leader election, internal certificates and webhooks, against the session's control
plane and node simulator.

The session's in-process controller (`lws_controller`, created lazily by earlier
modules) would reconcile too and answer the webhooks, so it is stopped for this
module and started again after it (see `manager_process`).

Each test has an operator namespace of its own, so a fresh Lease and a fresh
certificate Secret; the webhook configurations are installed with a `url` client
config pointing at one manager's webhook port.
"""

from __future__ import annotations

import asyncio
import base64
import signal
import time

import pytest
from lws_localcluster.deploy import install

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import (
    LEADERWORKERSETS,
    LEASES,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
)
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.runtime.pki import CA_CERT
from tests.toolkit.cluster import assert_pods_mutated, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.manager_process import (
    FAST_ELECTION,
    LEASE,
    ManagerProcess,
    Managers,
    managers_fixture,  # noqa: F401  (fixtures, registered by import)
    no_inprocess_controller_fixture,  # noqa: F401
    operator_namespace_fixture,  # noqa: F401
)
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(600)]

# A dead leader's lease is free this long after its last renewal, at most; the rest
# is slack for a busy machine (two cores shared with the control plane).
TAKEOVER_WITHIN = 4.0 + 11.0
GRACEFUL_SHUTDOWN = 30.0  # ManagerOptions.graceful_shutdown_timeout


# --- helpers ---------------------------------------------------------------------------


async def lease_holder(api: ApiClient, namespace: str) -> str | None:
    lease = await api.get_or_none(LEASES, LEASE, namespace)
    if lease is None:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def webhook_configurations(api: ApiClient) -> list[JSON]:
    return [
        await api.get(MUTATING_WEBHOOKS, c.MUTATING_WEBHOOK_CONFIGURATION),
        await api.get(VALIDATING_WEBHOOKS, c.VALIDATING_WEBHOOK_CONFIGURATION),
    ]


async def client_configs(api: ApiClient) -> list[JSON]:
    return [w["clientConfig"] for cfg in await webhook_configurations(api) for w in cfg["webhooks"]]


async def leader_among(candidates: list[ManagerProcess]) -> ManagerProcess | None:
    masters = [m for m in candidates if m.running() and await m.is_master()]
    assert len(masters) <= 1, f"more than one leader: {[m.name for m in masters]}"
    return masters[0] if masters else None


# --- tests -----------------------------------------------------------------------------


async def test_controller_process_serves_reconciles_and_reports(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    manager = managers.new("solo")
    await install(nodesim_api, manager.webhook_port)
    manager.start()
    await manager.wait_ready()

    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("proc", namespace))
    await wait_ready(nodesim_api, namespace, "proc", 2, within=180)
    await assert_pods_mutated(nodesim_api, namespace, "proc", 4)

    assert await lease_holder(nodesim_api, managers.operator_namespace)
    assert await manager.is_master()
    metrics = await manager.metrics()
    for name in ("controller_runtime_reconcile_total", "controller_runtime_webhook_requests_total"):
        assert f"\n{name}{{" in metrics, f"{name} missing from /metrics"
    # The injected CA is the one the process wrote for its server.
    ca = (manager.cert_dir / CA_CERT).read_bytes()
    for config in await client_configs(nodesim_api):
        assert config["url"].startswith(f"https://127.0.0.1:{manager.webhook_port}/")
        assert config.get("caBundle"), "the manager did not inject its CA"
        assert _b64decode(config["caBundle"]) == ca


async def test_leader_failover_between_two_processes(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    a, b = managers.new("replica-a", FAST_ELECTION), managers.new("replica-b", FAST_ELECTION)
    await install(nodesim_api, a.webhook_port)
    a.start()
    b.start()
    await asyncio.gather(a.wait_ready(), b.wait_ready())

    # Both share the certificate Secret of the operator namespace, so the same CA.
    assert (a.cert_dir / CA_CERT).read_bytes() == (b.cert_dir / CA_CERT).read_bytes()

    leader = await eventually(
        lambda: leader_among([a, b]), within=30, interval=0.25, what="one leader"
    )
    follower = b if leader is a else a
    holder = await lease_holder(nodesim_api, managers.operator_namespace)
    assert holder, "the Lease has no holder"
    # The follower stays a follower while the leader renews.
    for _ in range(4):
        assert await leader_among([a, b]) is leader
        assert await lease_holder(nodesim_api, managers.operator_namespace) == holder
        await asyncio.sleep(0.5)

    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("failover", namespace))
    await wait_ready(nodesim_api, namespace, "failover", 2, within=180)

    # Webhooks must survive the leader: send them to the follower. The apply only
    # owns the URLs, so the injected caBundle (the shared CA) stays.
    await install(nodesim_api, follower.webhook_port)
    ca = (follower.cert_dir / CA_CERT).read_bytes()
    for config in await client_configs(nodesim_api):
        assert config["url"].startswith(f"https://127.0.0.1:{follower.webhook_port}/")
        assert config.get("caBundle") and _b64decode(config["caBundle"]) == ca

    killed_at = time.monotonic()
    leader.signal(signal.SIGKILL)
    assert await leader.wait_exit(within=10) == -signal.SIGKILL

    async def taken_over() -> bool:
        new_holder = await lease_holder(nodesim_api, managers.operator_namespace)
        return bool(new_holder) and new_holder != holder and await follower.is_master()

    await eventually(
        taken_over, within=TAKEOVER_WITHIN, interval=0.2, what=f"{follower.name} to lead"
    )
    print(f"takeover after {time.monotonic() - killed_at:.1f}s")
    assert follower.running()

    await nodesim_api.patch(
        LEADERWORKERSETS, "failover", {"spec": {"replicas": 3}}, namespace=namespace
    )
    await wait_ready(nodesim_api, namespace, "failover", 3, within=180)
    await assert_pods_mutated(nodesim_api, namespace, "failover", 6)
    assert follower.running() and await follower.is_master()


async def test_sigterm_releases_the_lease(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    # A long lease: had it not been released, the next process would wait up to 120s.
    slow = {"leaseDuration": "120s", "renewDeadline": "60s", "retryPeriod": "500ms"}
    first = managers.new("first", slow)
    await install(nodesim_api, first.webhook_port)
    first.start()
    await first.wait_ready()
    await eventually(first.is_master, within=30, interval=0.25, what="first to lead")
    holder = await lease_holder(nodesim_api, managers.operator_namespace)
    assert holder

    stopping = time.monotonic()
    first.signal(signal.SIGTERM)
    assert await first.wait_exit(within=GRACEFUL_SHUTDOWN + 15) == 0
    print(f"first exited {time.monotonic() - stopping:.1f}s after SIGTERM")
    assert await lease_holder(nodesim_api, managers.operator_namespace) == ""
    assert "released leader lease" in first.log_path.read_text()

    second = managers.new("second", slow)
    await install(nodesim_api, second.webhook_port)
    started = time.monotonic()
    second.start()

    async def second_holds() -> bool:
        second.check_alive()
        new_holder = await lease_holder(nodesim_api, managers.operator_namespace)
        return bool(new_holder) and new_holder != holder

    await eventually(second_holds, within=60, interval=0.2, what="second to take the lease")
    print(f"second took the lease {time.monotonic() - started:.1f}s after starting")
    await second.wait_ready()
    assert await second.is_master()

    # And it reconciles.
    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("after", namespace, replicas=1))
    await wait_ready(nodesim_api, namespace, "after", 1, within=180)
    await assert_pods_mutated(nodesim_api, namespace, "after", 2)


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text)
