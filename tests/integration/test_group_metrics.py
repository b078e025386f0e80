"""The group lifecycle metrics as a scraper sees them: one `lws controller` process
against the session's control plane and node simulator, its plain-HTTP /metrics
read while LeaderWorkerSets are created, have a group restarted (and timed until it
is back), lose a Hash leader under PostTermination, scale down and are deleted.

Every assertion is on a series of this test's own namespace, so what the process
counted for anything else does not matter.
"""

from __future__ import annotations

import pytest
from lws_localcluster.deploy import install
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import is_leader, key_of, leaders, lws_pods, name_of, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.manager_process import (
    ManagerProcess,
    Managers,
    managers_fixture,  # noqa: F401  (fixtures, registered by import)
    no_inprocess_controller_fixture,  # noqa: F401
    operator_namespace_fixture,  # noqa: F401
    sample,
)
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]


def series(name: str, namespace: str, lws: str, mode: str, **extra: str) -> str:
    """The exposition line prefix of one series (the client sorts labels by name)."""
    labels = {"namespace": namespace, "leaderworkerset": lws, "group_identity": mode, **extra}
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


class Scraper:
    def __init__(self, manager: ManagerProcess, namespace: str) -> None:
        self.manager = manager
        self.namespace = namespace

    async def value(self, name: str, lws: str, mode: str, **extra: str) -> float:
        text = await self.manager.metrics()
        return sample(text, series(name, self.namespace, lws, mode, **extra)) or 0.0

    async def present(self, name: str, lws: str, mode: str, **extra: str) -> bool:
        text = await self.manager.metrics()
        return sample(text, series(name, self.namespace, lws, mode, **extra)) is not None

    async def wait(
        self, name: str, lws: str, mode: str, want: float, within: float = 60, **extra: str
    ) -> None:
        async def reached() -> bool:
            return await self.value(name, lws, mode, **extra) == want

        what = f"{series(name, self.namespace, lws, mode, **extra)} == {want}"
        try:
            await eventually(reached, within=within, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{what}; scraped:\n{await self.lines()}") from exc

    async def lines(self) -> str:
        """This namespace's group series, buckets left out."""
        return "\n".join(
            line
            for line in (await self.manager.metrics()).splitlines()
            if line.startswith("lws_")
            and f'namespace="{self.namespace}"' in line
            and "_bucket" not in line
        )


async def started(managers: Managers, api: ApiClient) -> ManagerProcess:
    manager = managers.new("metrics")
    await install(api, manager.webhook_port)
    manager.start()
    await manager.wait_ready()

    async def leading() -> bool:
        return await manager.is_master()

    await eventually(leading, within=60, what="the process leads")
    return manager


async def test_group_metrics_follow_the_scenarios(
    namespace: str, managers: Managers, nodesim_api: ApiClient, node_simulator: NodeSimulator
) -> None:
    api, sim = nodesim_api, node_simulator
    manager = await started(managers, api)
    scrape = Scraper(manager, namespace)
    ordinal, hashed = c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH

    # -- create: one ready-time observation per group, all groups Ready ------------------
    template = {"restartPolicy": c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART}
    body = lws_manifest("grp", namespace, replicas=3, size=2)
    body["spec"]["leaderWorkerTemplate"].update(template)
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "grp", 3, within=180)
    await scrape.wait("lws_group_ready_seconds_count", "grp", ordinal, 3)
    await scrape.wait("lws_groups", "grp", ordinal, 3, state="ready")
    assert await scrape.value("lws_groups", "grp", ordinal, state="not_ready") == 0
    assert await scrape.value("lws_group_ready_seconds_sum", "grp", ordinal) > 0

    # -- a worker's container restarts: its group is recreated and Ready again ----------
    await sim.restart_container(namespace, "grp-1-1")
    await scrape.wait("lws_group_recreations_total", "grp", ordinal, 1, cause="container_restart")
    await scrape.wait("lws_group_ready_seconds_count", "grp", ordinal, 4, within=120)
    await wait_ready(api, namespace, "grp", 3)
    await scrape.wait("lws_groups", "grp", ordinal, 3, state="ready")
    for other in ("leader_deleted", "pod_failed", "scale_down", "rollout"):
        assert await scrape.value("lws_group_recreations_total", "grp", ordinal, cause=other) == 0
    # ... and timed from the crash until it was whole and Ready again, once.
    await scrape.wait("lws_group_recovery_seconds_count", "grp", ordinal, 1,
                      cause="container_restart")  # fmt: skip
    recovery = await scrape.value("lws_group_recovery_seconds_sum", "grp", ordinal,
                                  cause="container_restart")  # fmt: skip
    assert 0 < recovery < 120

    # -- scale down: the highest group goes, counted as such ----------------------------
    await api.patch(LEADERWORKERSETS, "grp", {"spec": {"replicas": 1}}, namespace=namespace)
    await scrape.wait("lws_group_recreations_total", "grp", ordinal, 2, cause="scale_down")
    await wait_ready(api, namespace, "grp", 1)
    await scrape.wait("lws_groups", "grp", ordinal, 1, state="ready")
    assert await scrape.value("lws_group_ready_seconds_count", "grp", ordinal) == 4

    # -- Hash, PostTermination: the replacement waits gated for the old group -----------
    await api.create(LEADERWORKERSETS, lws_manifest("rep", namespace, replicas=2, size=2,
                                                    groupIdentity=hashed))  # fmt: skip
    await wait_ready(api, namespace, "rep", 2, within=180)
    await scrape.wait("lws_groups", "rep", hashed, 2, state="ready")
    await scrape.wait("lws_group_ready_seconds_count", "rep", hashed, 2)
    # Every Hash leader is created behind the gate; with nothing tearing down, the
    # first two were released at once.
    await scrape.wait("lws_scheduling_gate_admissions_total", "rep", hashed, 2)
    await scrape.wait("lws_replacement_gated_seconds_count", "rep", hashed, 2)
    victim = (await leaders(api, namespace, "rep"))[0]
    old_group = [p for p in await lws_pods(api, namespace, "rep") if key_of(p) == key_of(victim)]
    for pod in old_group:
        await sim.stall_termination(namespace, name_of(pod))
    await api.delete(PODS, name_of(victim), namespace)

    await scrape.wait("lws_group_recreations_total", "rep", hashed, 1, cause="leader_deleted")
    await scrape.wait("lws_groups", "rep", hashed, 1, state="gated")
    await scrape.wait("lws_groups", "rep", hashed, 1, state="tearing_down")
    assert await scrape.value("lws_groups", "rep", hashed, state="ready") == 1
    assert await scrape.value("lws_scheduling_gate_admissions_total", "rep", hashed) == 2

    for pod in sorted(old_group, key=lambda p: not is_leader(p)):
        await sim.release_termination(namespace, name_of(pod))
    await scrape.wait("lws_scheduling_gate_admissions_total", "rep", hashed, 3)
    await scrape.wait("lws_replacement_gated_seconds_count", "rep", hashed, 3)
    await wait_ready(api, namespace, "rep", 2)
    await scrape.wait("lws_groups", "rep", hashed, 2, state="ready")
    await scrape.wait("lws_groups", "rep", hashed, 0, state="gated")
    await scrape.wait("lws_group_ready_seconds_count", "rep", hashed, 3)
    assert await scrape.value("lws_group_recreations_total", "rep", hashed, cause="scale_down") == 0

    # -- Hash scale-down: the ReplicaSet removes one leader, counted as a scale-down -------
    await api.patch(LEADERWORKERSETS, "rep", {"spec": {"replicas": 1}}, namespace=namespace)
    await scrape.wait("lws_group_recreations_total", "rep", hashed, 1, cause="scale_down")
    await scrape.wait("lws_groups", "rep", hashed, 1, state="ready")
    assert (
        await scrape.value("lws_group_recreations_total", "rep", hashed, cause="leader_deleted")
        == 1
    )

    # -- deletion: the group series of a LeaderWorkerSet go with it ------------------------
    await api.delete(LEADERWORKERSETS, "grp", namespace)

    async def series_gone() -> bool:
        return not await scrape.present("lws_groups", "grp", ordinal, state="ready")

    await eventually(series_gone, within=60, what="lws_groups of grp removed")
    assert await scrape.present("lws_groups", "rep", hashed, state="ready")
    # Counters and histograms stay: a scraper computes rates across the deletion.
    assert await scrape.value("lws_group_ready_seconds_count", "grp", ordinal) == 4
    print("\n" + await scrape.lines())
