"""Fixtures of the migration tests (`make compat`; not part of the default run).

The control plane and node simulator are the integration tests' fixtures
(`kubeconfig`, `node_simulator`, `nodesim_api`); this directory adds upstream's Go
manager, built once from the Go module proxy by hack/build-upstream-lws.sh.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from lws_localcluster.manager_process import WebhookTLS
from lws_localcluster.nodesim.simulator import NodeSimulator

from .managers import Managers

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-upstream-lws.sh"


@pytest.fixture(scope="session")
def upstream_manager(pytestconfig: pytest.Config) -> Path:
    """The Go manager's binary (a cold build takes minutes: its progress is shown)."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        built = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True
        )
    binary = Path(built.stdout.strip().splitlines()[-1])
    assert binary.is_file(), f"{BUILD_SCRIPT} printed {binary}, not a file"
    return binary


@pytest.fixture(scope="session")
def webhook_tls(tmp_path_factory: pytest.TempPathFactory) -> WebhookTLS:
    return WebhookTLS.create(tmp_path_factory.mktemp("webhook-tls"), "lws-compat-ca")


@pytest.fixture
def managers(
    node_simulator: NodeSimulator,
    kubeconfig: Path,
    webhook_tls: WebhookTLS,
    upstream_manager: Path,
    tmp_path: Path,
) -> Iterator[Managers]:
    group = Managers(tmp_path, kubeconfig, webhook_tls, upstream_manager)
    try:
        yield group
    finally:
        group.kill_all()
        # pytest shows captured output only for failing tests.
        print(group.report())
