"""`kubectl lws` against the real control plane, simulated nodes and the in-process
controller: the plugin runs as its own process (`python -m leaderworkerset.kubectl`,
what the `kubectl-lws` console script runs) with the test cluster's kubeconfig,
and through kubectl's plugin mechanism when kubectl is at hand.

Hash LeaderWorkerSets in each state: Ready, NotReady (a worker's readiness fault),
Gated and TearingDown (a PostTermination replacement while the old group terminates
slowly), Updating (a template change whose new groups cannot start while an old
group is not ready); an Ordinal one; and a DisaggregatedSet with an Ordinal and a Hash
role."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import (
    group_pods,
    is_leader,
    key_of,
    leaders,
    name_of,
    release_all,
    wait_ready,
)
from tests.toolkit.disaggregatedset import (
    DISAGGREGATEDSETS,
    manifest,
    revision_of,
    rolling_role,
    settled,
)
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Cluster:
    """What each test here drives: the API and the nodes, its namespace, and the
    kubeconfig the plugin reads; the in-process controller runs."""

    api: ApiClient
    sim: NodeSimulator
    namespace: str
    kubeconfig: Path

    async def ready_lws(self, body: JSON, replicas: int) -> None:
        await self.api.create(LEADERWORKERSETS, body)
        await wait_ready(self.api, self.namespace, body["metadata"]["name"], replicas)


@pytest.fixture
def cluster(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    kubeconfig: Path,
) -> Cluster:
    return Cluster(nodesim_api, node_simulator, namespace, kubeconfig)


def plugin_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env.pop("KUBECONFIG", None)
    return env


async def run(*argv: str) -> tuple[int, str, str]:
    """A command as its own process, without blocking the loop the controller runs in."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=plugin_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def plugin(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    return await run(
        sys.executable, "-m", "leaderworkerset.kubectl", *args, "--kubeconfig", str(kubeconfig)
    )


async def groups_json(kubeconfig: Path, name: str, namespace: str) -> list[JSON]:
    code, out, err = await plugin(kubeconfig, "groups", name, "-n", namespace, "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["leaderWorkerSet"] == name and document["namespace"] == namespace
    groups: list[JSON] = document["groups"]
    return groups


async def states_become(
    kubeconfig: Path, name: str, namespace: str, wanted: dict[str, int], what: str
) -> list[JSON]:
    """Poll the plugin until the groups are in exactly these states (name -> count)."""

    async def probe() -> list[JSON] | None:
        groups = await groups_json(kubeconfig, name, namespace)
        counts: dict[str, int] = {}
        for group in groups:
            counts[group["state"]] = counts.get(group["state"], 0) + 1
        return groups if counts == wanted else None

    return await eventually(probe, within=90, interval=0.5, what=what)


async def table(kubeconfig: Path, name: str, namespace: str, *extra: str) -> str:
    code, out, err = await plugin(kubeconfig, "groups", name, "-n", namespace, *extra)
    assert code == 0, err
    return out


# --- Hash -----------------------------------------------------------------------------


async def test_hash_ready_then_not_ready(cluster: Cluster) -> None:
    api, sim = cluster.api, cluster.sim
    namespace, kubeconfig = cluster.namespace, cluster.kubeconfig
    await cluster.ready_lws(hash_lws("web", namespace, replicas=2, size=3), 2)
    groups = await states_become(kubeconfig, "web", namespace, {"Ready": 2}, "both Ready")
    live = {key_of(p): p for p in await leaders(api, namespace, "web")}
    assert {g["groupIndex"] for g in groups} == set(live)
    for group in groups:
        leader = live[group["groupIndex"]]
        assert group["group"] == group["groupIndex"][:8]
        assert (group["readyPods"], group["size"], group["currentRevision"]) == (3, 3, True)
        assert group["leaderNode"] == leader["spec"]["nodeName"]
        assert group["leaderPod"] == name_of(leader)
        assert group["workerStatefulSet"] == name_of(leader)
        assert group["waitingFor"] is None
    assert sorted(g["scaleDownRank"] for g in groups) == [1, 2]

    victim = groups[0]["groupIndex"]
    worker = next(p for p in await group_pods(api, namespace, "web", victim) if not is_leader(p))
    await sim.set_container_ready(namespace, name_of(worker), False)
    groups = await states_become(
        kubeconfig, "web", namespace, {"Ready": 1, "NotReady": 1}, "one group NotReady"
    )
    sick = next(g for g in groups if g["state"] == "NotReady")
    assert sick["groupIndex"] == victim and sick["readyPods"] < 3
    # A not-ready leader goes before a ready one when the Deployment scales down.
    assert sick["scaleDownRank"] == 1

    code, out, err = await plugin(kubeconfig, "describe", "web", victim[:6], "-n", namespace)
    assert code == 0, err
    assert f"not ready: 1 worker(s) not ready: {name_of(worker)}." in out
    assert name_of(worker) in out and "Worker StatefulSet:" in out

    text = await table(kubeconfig, "web", namespace, "-o", "wide")
    header = text.splitlines()[0]
    assert header.split("   ")[0] == "GROUP" and "LEADER POD" in header
    assert len(text.splitlines()) == 3


async def test_hash_gated_replacement_waits_for_the_tearing_down_group(cluster: Cluster) -> None:
    api, sim = cluster.api, cluster.sim
    namespace, kubeconfig = cluster.namespace, cluster.kubeconfig
    await cluster.ready_lws(hash_lws("serve", namespace, replicas=3, size=2), 3)
    victim = (await leaders(api, namespace, "serve"))[0]
    old_group = await group_pods(api, namespace, "serve", key_of(victim))
    for pod in old_group:
        await sim.stall_termination(namespace, name_of(pod))
    await api.delete(PODS, name_of(victim), namespace)

    groups = await states_become(
        kubeconfig,
        "serve",
        namespace,
        {"Ready": 2, "Gated": 1, "TearingDown": 1},
        "a gated replacement and the group it waits for",
    )
    gated = next(g for g in groups if g["state"] == "Gated")
    tearing = next(g for g in groups if g["state"] == "TearingDown")
    assert tearing["groupIndex"] == key_of(victim)
    assert gated["waitingFor"] == key_of(victim)[:8]
    assert gated["leaderNode"] is None and gated["readyPods"] == 0
    assert gated["scaleDownRank"] == 1 and tearing["scaleDownRank"] is None

    text = await table(kubeconfig, "serve", namespace)
    print(f"\n$ kubectl lws groups serve\n{text}")
    line = next(row for row in text.splitlines() if "Gated" in row)
    assert line.split()[-1] == key_of(victim)[:8]

    code, out, err = await plugin(kubeconfig, "describe", "serve", gated["group"], "-n", namespace)
    assert code == 0, err
    print(f"\n$ kubectl lws describe serve {gated['group']}\n{out}")
    sentence = f"gated: waiting for group {key_of(victim)[:8]} to finish tearing down (T=1, G=1)."
    assert sentence in out
    code, out, err = await plugin(
        kubeconfig, "describe", "serve", tearing["group"], "-n", namespace
    )
    assert code == 0, err
    assert f"gated leader {gated['leaderPod']} waits for it" in out
    # deletionTimestamp is the end of the grace period, not when the deletion began.
    assert f"its leader {tearing['leaderPod']} is terminating (grace period end" in out
    assert "<invalid>" not in out

    await release_all(sim, old_group)
    await states_become(kubeconfig, "serve", namespace, {"Ready": 3}, "all Ready again")


async def test_hash_updating(cluster: Cluster) -> None:
    """A template change whose new group cannot be scheduled holds the rollout (surge 1,
    unavailable 0); an old group that then loses readiness is Updating: not ready and
    on an old revision."""
    api, sim = cluster.api, cluster.sim
    namespace, kubeconfig = cluster.namespace, cluster.kubeconfig
    rollout = {"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}
    body = hash_lws("roll", namespace, replicas=2, size=2, rolloutStrategy=rollout)
    await cluster.ready_lws(body, 2)
    before = await leaders(api, namespace, "roll")
    patch = {
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"nodeSelector": {"kubectl-lws-test": "nowhere"}}}
            }
        }
    }
    await api.patch(LEADERWORKERSETS, "roll", patch, namespace=namespace)
    groups = await states_become(
        kubeconfig, "roll", namespace, {"Ready": 2, "NotReady": 1}, "a new group that cannot start"
    )
    old_keys = {key_of(p) for p in before}
    assert {g["groupIndex"] for g in groups if not g["currentRevision"]} == old_keys
    fresh = next(g for g in groups if g["state"] == "NotReady")
    assert fresh["currentRevision"] is True and fresh["leaderNode"] is None

    victim = before[0]
    worker = next(
        p for p in await group_pods(api, namespace, "roll", key_of(victim)) if not is_leader(p)
    )
    await sim.set_container_ready(namespace, name_of(worker), False)
    groups = await states_become(
        kubeconfig,
        "roll",
        namespace,
        {"Ready": 1, "NotReady": 1, "Updating": 1},
        "an old group Updating",
    )
    updating = next(g for g in groups if g["state"] == "Updating")
    assert updating["groupIndex"] == key_of(victim) and updating["currentRevision"] is False
    text = await table(kubeconfig, "roll", namespace)
    assert "Updating" in text and " old " in text
    code, out, err = await plugin(
        kubeconfig, "describe", "roll", updating["group"], "-n", namespace
    )
    assert code == 0, err
    assert "updating: the group runs revision" in out


# --- Ordinal ----------------------------------------------------------------------------


async def test_ordinal_groups_describe_and_errors(cluster: Cluster) -> None:
    namespace, kubeconfig = cluster.namespace, cluster.kubeconfig
    await cluster.ready_lws(lws_manifest("ord", namespace, replicas=2, size=2), 2)
    groups = await states_become(kubeconfig, "ord", namespace, {"Ready": 2}, "Ordinal Ready")
    assert [g["group"] for g in groups] == ["0", "1"]
    assert all("scaleDownRank" not in g and g["currentRevision"] for g in groups)
    assert [g["leaderPod"] for g in groups] == ["ord-0", "ord-1"]

    text = await table(kubeconfig, "ord", namespace)
    assert "SCALE-DOWN RANK" not in text
    assert [line.split()[:3] for line in text.splitlines()[1:]] == [
        ["0", "Ready", "2/2"],
        ["1", "Ready", "2/2"],
    ]
    code, out, _ = await plugin(kubeconfig, "groups", "ord", "-n", namespace, "-o", "yaml")
    assert code == 0 and "groupIdentity: Ordinal" in out

    code, out, err = await plugin(kubeconfig, "describe", "ord", "1", "-n", namespace)
    assert code == 0, err
    assert "ready: leader ord-1 is Running and Ready" in out
    assert "ord-1-1" in out and "Services:" in out and "shared" in out

    code, out, err = await plugin(kubeconfig, "describe", "ord", "7", "-n", namespace)
    assert code == 1
    assert 'has no group "7"; its groups: 0, 1' in err

    code, out, err = await plugin(kubeconfig, "groups", "missing", "-n", namespace)
    assert code == 1
    assert f'leaderworkerset "missing" not found in namespace "{namespace}"' in err


# --- DisaggregatedSet ---------------------------------------------------------------------


async def test_disaggregatedset_roles_leaderworkersets_and_groups(cluster: Cluster) -> None:
    api, namespace, kubeconfig = cluster.api, cluster.namespace, cluster.kubeconfig
    hash_decode = rolling_role("decode", 2, groupIdentity="Hash")
    await api.create(
        DISAGGREGATEDSETS,
        manifest("llm", namespace, rolling_role("prefill", 1, size=2), hash_decode),
    )
    await settled(api, namespace, "llm", {"prefill": 1, "decode": 2})
    revision = await revision_of(api, namespace, "llm")

    code, out, err = await plugin(kubeconfig, "ds", "llm", "-n", namespace, "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    assert (document["disaggregatedSet"], document["revision"]) == ("llm", revision)
    assert [
        (r["name"], r["target"], r["readyReplicas"], r["groupIdentity"]) for r in document["roles"]
    ] == [("prefill", 1, 1, "Ordinal"), ("decode", 2, 2, "Hash")]
    lwss = {x["role"]: x for x in document["leaderWorkerSets"]}
    assert lwss["decode"]["name"] == f"llm-0-{revision}-decode"
    assert lwss["decode"]["service"] == f"llm-0-{revision}-decode-prv"
    assert all(x["currentRevision"] and x["slice"] == "0" for x in lwss.values())
    assert [g["state"] for g in lwss["decode"]["groups"]] == ["Ready", "Ready"]
    assert all("scaleDownRank" in g for g in lwss["decode"]["groups"])
    assert [(g["group"], g["readyPods"]) for g in lwss["prefill"]["groups"]] == [("0", 2)]

    code, text, err = await plugin(kubeconfig, "disaggregatedset", "llm", "-n", namespace)
    assert code == 0, err
    assert "Available:   True (AllRolesAvailable)" in text
    assert f"Groups of llm-0-{revision}-decode (Hash):" in text

    code, _, err = await plugin(kubeconfig, "ds", "missing", "-n", namespace)
    assert code == 1
    assert f'disaggregatedset "missing" not found in namespace "{namespace}"' in err


# --- through kubectl -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kubectl_dir() -> Iterator[Path]:
    proc = subprocess.run(
        ["bash", str(REPO / "hack" / "build-tools.sh")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=False,
    )
    folder = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    if proc.returncode != 0 or folder is None or not (folder / "kubectl").exists():
        pytest.skip("kubectl is not available (hack/build-tools.sh failed)")
    yield folder


async def test_through_kubectls_plugin_mechanism(
    cluster: Cluster, kubectl_dir: Path, tmp_path: Path
) -> None:
    """`kubectl lws` finds `kubectl-lws` on PATH: here a stand-in for the console
    script that runs this tree's package."""
    script = tmp_path / "kubectl-lws"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m leaderworkerset.kubectl "$@"\n')
    script.chmod(0o755)
    namespace, kubeconfig = cluster.namespace, cluster.kubeconfig
    await cluster.ready_lws(hash_lws("kc", namespace, replicas=1, size=2), 1)
    env_path = os.pathsep.join([str(tmp_path), str(kubectl_dir), os.environ.get("PATH", "")])
    argv = [str(kubectl_dir / "kubectl"), "lws", "groups", "kc", "-n", namespace]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**plugin_env(), "PATH": env_path},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0].startswith("GROUP") and "SCALE-DOWN RANK" in lines[0]
    assert len(lines) == 2
