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
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lws_localcluster.controlplane import STATE_FILE, pid_alive
from lws_localcluster.node_lifecycle import PLAYGROUND
from lws_localcluster.playground import STATE_FILE as PLAYGROUND_STATE
from lws_localcluster.playground import lws_command

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


GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
UNREACHABLE = "node.kubernetes.io/unreachable"
# One group of two pods on one node: Hash mode, each group owning a node.
LOST_NODE_LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {
        "name": "lost",
        "annotations": {"leaderworkerset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname"},
    },
    "spec": {
        "replicas": 1,
        "groupIdentity": "Hash",
        "groupReplacementPolicy": "PostTermination",
        "leaderWorkerTemplate": {
            "size": 2,
            "workerTemplate": {
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            },
        },
    },
}


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _group_pods(playground: Playground) -> dict[str, list[Any]]:
    pods = playground.get("pods", "-l", "leaderworkerset.sigs.k8s.io/name=lost")["items"]
    groups: dict[str, list[Any]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["labels"][GROUP_KEY], []).append(pod)
    return groups


def _ready_group(playground: Playground, avoid: str = "") -> list[Any] | None:
    """The two pods of a group Ready on one node that is not ``avoid``, if any."""
    for pods in _group_pods(playground).values():
        nodes = {p["spec"].get("nodeName") for p in pods}
        live = not any(p["metadata"].get("deletionTimestamp") for p in pods)
        ready = all(_ready(p) == "True" for p in pods)
        if len(pods) == 2 and live and ready and len(nodes) == 1 and avoid not in nodes:
            return pods
    return None


def _taints(playground: Playground, node: str) -> set[tuple[str, str]]:
    taints = playground.get("node", node)["spec"].get("taints") or []
    return {(t["key"], t["effect"]) for t in taints}


def test_a_lost_node_is_tainted_its_pods_evicted_and_its_group_replaced(
    playground: Playground, tmp_path: Path
) -> None:
    """`node-down` silences a node's kubelet; kube-controller-manager does the rest as
    in a real cluster: the node Unknown once its Lease lapses, tainted unreachable, its
    pods evicted when their (playground-short) toleration runs out, and the Hash group
    replaced on the other node. `node-up` brings the node back and the taints off."""
    manifest = tmp_path / "lost.json"
    manifest.write_text(json.dumps(LOST_NODE_LWS))
    playground.kubectl_run("apply", "-f", str(manifest))
    old = eventually_blocking(
        lambda: _ready_group(playground), "the group Ready on one node", within=120, interval=0.25
    )
    lost = old[0]["spec"]["nodeName"]
    old_names = {p["metadata"]["name"] for p in old}

    before_down = time.time()
    playground.fault("node-down", lost)
    # The kubelet is silent, so the node says nothing about itself...
    assert _ready(playground.get("node", lost)) == "True"
    # ... until the node lifecycle controller sees its Lease lapse.
    eventually_blocking(
        lambda: _ready(playground.get("node", lost)) == "Unknown",
        "node Unknown",
        within=90,
        interval=0.25,
    )
    unknown_after = time.time() - before_down
    assert unknown_after >= PLAYGROUND.grace_period - PLAYGROUND.lease_interval - 3
    wanted = {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    eventually_blocking(
        lambda: wanted <= _taints(playground, lost),
        "the unreachable taints",
        within=30,
        interval=0.25,
    )
    status = playground.lws("status", "--workdir", str(playground.workdir), check=False)
    assert "NotReady(Unknown)" in status and "node lifecycle: a node is Unknown 20s" in status

    old_key = old[0]["metadata"]["labels"][GROUP_KEY]

    def evicted() -> list[Any] | None:
        pods = _group_pods(playground).get(old_key, [])
        same = {p["metadata"]["name"] for p in pods} == old_names
        deleted = all(p["metadata"].get("deletionTimestamp") for p in pods)
        return pods if same and deleted else None

    stuck = eventually_blocking(evicted, "the group's pods evicted", within=90, interval=0.25)
    node = playground.get("node", lost)
    tainted_at = next(
        _timestamp(t["timeAdded"]) for t in node["spec"]["taints"] if t["effect"] == "NoExecute"
    )
    for pod in stuck:
        disruption = [
            c for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"
        ]
        assert disruption and disruption[0]["reason"] == "DeletionByTaintManager", pod["status"]
        grace = pod["metadata"]["deletionGracePeriodSeconds"]
        deleted_at = _timestamp(pod["metadata"]["deletionTimestamp"]) - grace
        # Not before the toleration ran out (timestamps have whole seconds).
        assert deleted_at >= tainted_at + PLAYGROUND.toleration_seconds - 1

    new = eventually_blocking(
        lambda: _ready_group(playground, avoid=lost),
        "a replacement group",
        within=90,
        interval=0.25,
    )
    assert {p["metadata"]["name"] for p in new}.isdisjoint(old_names)
    # Nothing finishes the old pods while their node is down.
    assert len(_group_pods(playground)) == 2

    playground.fault("node-up", lost)
    eventually_blocking(
        lambda: _ready(playground.get("node", lost)) == "True",
        "node Ready",
        within=30,
        interval=0.25,
    )
    eventually_blocking(
        lambda: not _taints(playground, lost),
        "the taints lifted by the controller",
        within=30,
        interval=0.25,
    )
    eventually_blocking(
        lambda: len(_group_pods(playground)) == 1, "the old pods finished", within=60, interval=0.25
    )
    assert _ready_group(playground, avoid=lost) is not None
    playground.kubectl_run("delete", "-f", str(manifest), "--wait=false")


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
