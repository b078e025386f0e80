"""A cluster whose one node is real (containerd, runc, a kubelet, kube-proxy and
CoreDNS; see leaderworkerset.localcluster.realnode), with the controller installed in
it by Helm from the image built here, as a platform engineer installs it.

Everything is session-scoped: the node and the install take about a minute, and the
tests share them as a user's workloads share one controller.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from tests.toolkit.install_tools import ensure_tools, helm_env, run_tool
from tests.toolkit.paths import REPO

from leaderworkerset.localcluster.binaries import ensure_binaries
from leaderworkerset.localcluster.controlplane import ControlPlane
from leaderworkerset.localcluster.node_lifecycle import UPSTREAM
from leaderworkerset.localcluster.realnode.images import BuiltImage, ensure_images
from leaderworkerset.localcluster.realnode.layout import HOST_IP
from leaderworkerset.localcluster.realnode.node import RealNode
from leaderworkerset.runtime.client import ApiClient

pytestmark = pytest.mark.cluster

RELEASE = "lws"
NAMESPACE = "lws-system"


@dataclass(frozen=True)
class Tools:
    """kubectl and helm against the real node's cluster."""

    folder: Path
    kubeconfig: Path
    helm_home: Path

    def run(
        self, tool: str, *args: str | Path, stdin: str | None = None, timeout: float = 120
    ) -> str:
        env = helm_env(self.helm_home, KUBECONFIG=str(self.kubeconfig))
        return run_tool(self.folder, tool, *args, env=env, stdin=stdin, timeout=timeout)


@dataclass(frozen=True)
class RealCluster:
    control_plane: ControlPlane
    node: RealNode
    images: dict[str, BuiltImage]
    tools: Tools

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig


@pytest.fixture(scope="session")
def real_cluster(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[RealCluster]:
    if os.geteuid() != 0:
        pytest.skip("a real node runs containers, which needs root")
    workdir = tmp_path_factory.mktemp("realnode")
    tools = ensure_tools(pytestconfig)
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    # Builds (minutes when cold) report to the terminal, not to pytest's capture.
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        binaries = ensure_binaries()
        node = RealNode(workdir)
        node.prepare()
        images = ensure_images("controller", "rendezvous")
    cp = ControlPlane(
        workdir, name="realnode", binaries=binaries, host_ip=HOST_IP, node_lifecycle=UPSTREAM
    )
    with cp:
        node.start(cp)
        try:
            node.import_images(list(images.values()))
            yield RealCluster(cp, node, images, Tools(tools, cp.kubeconfig, workdir / "helm"))
        finally:
            node.stop()


@pytest.fixture
async def real_api(real_cluster: RealCluster) -> AsyncIterator[ApiClient]:
    api = ApiClient.from_kubeconfig(real_cluster.kubeconfig)
    try:
        yield api
    finally:
        await api.close()


def chart_values(image: BuiltImage) -> dict[str, object]:
    repository, tag = image.ref.rsplit(":", 1)
    return {
        "image": {"manager": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}},
        "replicaCount": 2,
        # The chart asks for a core per replica; the node has two, and the groups run
        # beside the controller.
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }


@pytest.fixture(scope="session")
def helm_installed(real_cluster: RealCluster) -> float:
    """``helm install`` of charts/lws with the image built here; the seconds it took
    until both controller pods were Ready."""
    started = time.monotonic()
    values = yaml.safe_dump(chart_values(real_cluster.images["controller"]))
    real_cluster.tools.run(
        "helm",
        "install",
        RELEASE,
        REPO / "charts" / "lws",
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--values",
        "-",
        "--wait",
        "--timeout",
        "4m",
        stdin=values,
        timeout=300,
    )
    return time.monotonic() - started
