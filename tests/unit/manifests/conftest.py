"""Fixtures of the install-manifest tests: the tools that render them (helm and kubectl,
built by hack/build-tools.sh, as `make tools` does), and upstream's install files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.toolkit import upstream_module
from tests.toolkit.install_tools import ensure_tools
from tests.toolkit.render import Renderer


@pytest.fixture(scope="session")
def renderer(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Renderer:
    return Renderer(ensure_tools(pytestconfig), tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Upstream's module (the version hack/upstream-lws/go.mod pins) with its chart,
    config/ and test/e2e/config, extracted at run time; skipped without the proxy."""
    folder = tmp_path_factory.mktemp("upstream")
    try:
        for part in ("charts/lws", "config", "test/e2e/config"):
            upstream_module.extract(part, folder)
    except upstream_module.ProxyUnreachableError as exc:
        pytest.skip(f"upstream's install files cannot be fetched: {exc}")
    return folder
