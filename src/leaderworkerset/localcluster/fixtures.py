"""Pytest fixtures for tests against a real control plane.

Load with ``pytest_plugins = ["leaderworkerset.localcluster.fixtures"]``. One
control plane is started per test session; set ``LWS_TEST_KUBECONFIG`` to run
against an existing cluster (e.g. one from ``lws dev up``) instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, ServiceAccount

from leaderworkerset.localcluster.binaries import ensure_binaries
from leaderworkerset.localcluster.controlplane import ControlPlane

TEST_NAMESPACE_LABEL = "leaderworkerset.test/namespace"


@dataclass(frozen=True)
class ExternalCluster:
    """A cluster this test session did not start and must not stop."""

    kubeconfig: Path


@pytest.fixture(scope="session")
def control_plane(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[ControlPlane | ExternalCluster]:
    external = os.environ.get("LWS_TEST_KUBECONFIG")
    if external:
        yield ExternalCluster(Path(external))
        return
    # A cold build takes minutes; its progress should reach the terminal
    # rather than pytest's capture.
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        binaries = ensure_binaries()
    # Under pytest's temp root the logs of the last few runs stay for
    # post-mortems, and parallel sessions never share a work dir.
    cp = ControlPlane(tmp_path_factory.mktemp("controlplane"), name="pytest", binaries=binaries)
    with cp:
        yield cp


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane | ExternalCluster) -> Path:
    return control_plane.kubeconfig


def make_client(kubeconfig: Path) -> Client:
    return Client(config=KubeConfig.from_file(kubeconfig), field_manager="lws-tests")


@pytest.fixture(scope="session")
def kube_client(kubeconfig: Path) -> Iterator[Client]:
    """A synchronous lightkube client with cluster-admin rights."""
    c = make_client(kubeconfig)
    yield c
    c.close()


def wait_for_default_service_account(c: Client, namespace: str, timeout: float = 30.0) -> None:
    """Pods are refused until the service-account controller creates ``default``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.get(ServiceAccount, "default", namespace=namespace)
            return
        except ApiError as e:
            if e.status.code != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def create_namespace(c: Client, prefix: str = "lws-test") -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:50] or "lws-test"
    name = f"{base}-{secrets.token_hex(3)}"
    c.create(Namespace(metadata=ObjectMeta(name=name, labels={TEST_NAMESPACE_LABEL: "true"})))
    wait_for_default_service_account(c, name)
    return name


@pytest.fixture
def namespace(kube_client: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, deleted (not awaited) afterwards."""
    name = create_namespace(kube_client, request.node.name)
    yield name
    try:
        kube_client.delete(Namespace, name)
    except ApiError as e:
        if e.status.code != 404:
            raise
