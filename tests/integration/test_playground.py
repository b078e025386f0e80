"""The playground as a user drives it from a shell: `lws dev up` with nodes and the
controller in background processes, `kubectl apply` of a shipped sample, `lws dev
status`, each `lws dev fault`, `lws dev down` leaving nothing behind; and `lws demo
--story hash` telling its story to the end.

Everything runs as real processes; these tests start their own control planes and use
none of the session's fixtures.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from leaderworkerset.localcluster.controlplane import STATE_FILE, pid_alive
from leaderworkerset.localcluster.playground import STATE_FILE as PLAYGROUND_STATE
from leaderworkerset.localcluster.playground import lws_command
from tests.toolkit.waiting import eventually_blocking

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "config" / "samples" / "worker-template-only.yaml"
T = TypeVar("T")


@dataclass
class Playground:
    workdir: Path
    kubectl: Path
    up_output: str

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def lws(self, *args: str, check: bool = True, timeout: float = 300) -> str:
        done = subprocess.run(
            [*lws_command(), "dev", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"lws dev {args}: {done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def fault(self, *args: str) -> str:
        return self.lws("fault", "--workdir", str(self.workdir), *args)

    def kubectl_run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"kubectl {args}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl_run("get", "-o", "json", *args))

    def get_or_none(self, *args: str) -> Any:
        done = subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", "get", "-o", "json", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return json.loads(done.stdout) if done.returncode == 0 else None

    def pids(self) -> list[int]:
        """Every pid the work dir records: control plane, simulator, controller."""
        pids: list[int] = []
        with contextlib.suppress(OSError, ValueError):
            state = json.loads((self.workdir / STATE_FILE).read_text())
            pids += [state["owner_pid"], *state["pids"].values()]
        with contextlib.suppress(OSError, ValueError):
            state = json.loads((self.workdir / PLAYGROUND_STATE).read_text())
            pids += [entry["pid"] for entry in state.values()]
        return pids


def _tools() -> Path:
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "build-tools.sh")],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail("hack/build-tools.sh failed (see its output above)")
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Playground]:
    workdir = tmp_path_factory.mktemp("playground")
    pg = Playground(workdir, _tools() / "kubectl", "")
    try:
        pg.up_output = pg.lws(
            "up", "--workdir", str(workdir), "--nodes", "2", "--gpus", "1", "--zones", "2"
        )
        yield pg
    finally:
        recorded = pg.pids()
        pg.lws("down", "--workdir", str(workdir), check=False)
        for pid in recorded:  # only if `down` failed, which the test reports
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)


def test_up_prints_how_to_reach_the_cluster(playground: Playground) -> None:
    out = playground.up_output
    assert f"export KUBECONFIG={playground.kubeconfig}" in out
    assert f"kubectl:    {playground.kubectl}" in out
    assert "2 simulated, 1 nvidia.com/gpu each, over 2 zone(s)" in out


def test_nodes_have_the_asked_for_gpus_and_zones(playground: Playground) -> None:
    nodes = playground.get("nodes")["items"]
    assert len(nodes) == 2
    for node in nodes:
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "1"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
    assert zones == {"zone-a", "zone-b"}


def test_a_sample_applied_with_kubectl_becomes_ready(playground: Playground) -> None:
    playground.kubectl_run("apply", "-f", str(SAMPLE))

    def ready() -> bool:
        lws = playground.get("leaderworkerset", "workers-only")
        status = lws.get("status") or {}
        available = any(
            x["type"] == "Available" and x["status"] == "True"
            for x in status.get("conditions") or []
        )
        return available and status.get("readyReplicas") == lws["spec"]["replicas"]

    eventually_blocking(ready, "the sample's groups Ready", within=180, interval=0.25)
    playground.kubectl_run("delete", "-f", str(SAMPLE), "--wait=false")


def test_status_shows_nodes_and_controller_health(playground: Playground) -> None:
    # Each probe has a 2 s timeout: on a loaded machine one may miss it for a moment.
    def healthy() -> str | None:
        out = playground.lws("status", "--workdir", str(playground.workdir), check=False)
        return out if "UNHEALTHY" not in out and "ready (/readyz 200)" in out else None

    out = eventually_blocking(
        healthy, "lws dev status to report all healthy", within=60, interval=0.25
    )
    assert "kube-apiserver" in out
    assert "lws-node-0" in out and "lws-node-1" in out
    assert "node simulator: pid" in out and "answering" in out
    assert "controller: pid" in out and "ready (/readyz 200)" in out
    assert f"export KUBECONFIG={playground.kubeconfig}" in out


def _pod(playground: Playground, name: str) -> None:
    playground.kubectl_run("run", name, "--image=registry.k8s.io/pause:3.10", "--restart=Never")

    def running() -> bool:
        pod = playground.get("pod", name)
        return (pod.get("status") or {}).get("phase") == "Running"

    eventually_blocking(running, f"pod {name} Running", within=60, interval=0.25)


def _ready(pod: Any) -> str | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), None)


def test_faults_on_pods(playground: Playground) -> None:
    _pod(playground, "victim")
    playground.fault("crash", "victim")
    pod = playground.get("pod", "victim")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1

    playground.fault("unready", "victim")
    eventually_blocking(
        lambda: _ready(playground.get("pod", "victim")) == "False",
        "NotReady",
        within=30,
        interval=0.25,
    )
    playground.fault("ready", "victim")
    eventually_blocking(
        lambda: _ready(playground.get("pod", "victim")) == "True",
        "Ready again",
        within=30,
        interval=0.25,
    )

    playground.fault("stall", "victim")
    playground.kubectl_run("delete", "pod", "victim", "--wait=false")
    time.sleep(3)  # an observation window: the stalled pod must still be there after it
    stalled = playground.get_or_none("pod", "victim")
    assert stalled is not None and stalled["metadata"].get("deletionTimestamp")
    playground.fault("release", "victim")
    eventually_blocking(
        lambda: playground.get_or_none("pod", "victim") is None,
        "the pod gone",
        within=30,
        interval=0.25,
    )

    wd = str(playground.workdir)
    out = playground.lws("fault", "--workdir", wd, "crash", "nope", check=False)
    assert "not bound to a node of this simulator" in out


def test_node_down_and_up(playground: Playground) -> None:
    def node_ready() -> str:
        node = playground.get("node", "lws-node-1")
        return str(_ready(node))

    playground.fault("node-down", "lws-node-1")
    assert node_ready() == "False"
    taints = playground.get("node", "lws-node-1")["spec"].get("taints") or []
    assert any(t["key"] == "node.kubernetes.io/not-ready" for t in taints)
    out = playground.lws("status", "--workdir", str(playground.workdir))
    assert "NotReady(False)" in out

    playground.fault("node-down", "lws-node-1", "--unreachable")
    assert node_ready() == "Unknown"
    playground.fault("node-up", "lws-node-1")
    assert node_ready() == "True"


def test_down_leaves_no_process_behind(playground: Playground) -> None:
    recorded = playground.pids()
    assert len(recorded) >= 7  # owner, four components, simulator, controller
    out = playground.lws("down", "--workdir", str(playground.workdir))
    assert "stopped control plane" in out
    assert [pid for pid in recorded if pid_alive(pid)] == []
    assert not (playground.workdir / "nodesim.sock").exists()


def test_demo_tells_the_hash_story() -> None:
    done = subprocess.run(
        [*lws_command(), "demo", "--story", "hash", "--exit-when-ready", "--name", "story-test"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    print(done.stdout, done.stderr, file=sys.stderr)
    assert done.returncode == 0
    out = done.stdout
    assert "the replacement is Gated: it waits until the old group is gone" in out
    gated = out.index("the replacement is Gated")
    assert "TearingDown" in out[gated:] and "Gated" in out[gated:]
    assert out.rstrip().splitlines()[-1].endswith("all 3 groups Ready again")
