"""kubectl and helm as hack/build-tools.sh (`make tools`) builds them, for the tests of
the install manifests."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from tests.toolkit.paths import REPO


def hack_build(pytestconfig: pytest.Config, script: str, *args: str) -> Path:
    """Run a hack/build-*.sh script (a cold build takes minutes: its progress reaches the
    terminal) and return the path it prints last."""
    path = REPO / "hack" / script
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        proc = subprocess.run(
            ["bash", str(path), *args], stdout=subprocess.PIPE, text=True, check=False
        )
    if proc.returncode != 0:
        pytest.fail(f"{path} failed with exit code {proc.returncode} (see its output above)")
    return Path(proc.stdout.strip().splitlines()[-1])


def ensure_tools(pytestconfig: pytest.Config) -> Path:
    """The folder holding kubectl and helm."""
    return hack_build(pytestconfig, "build-tools.sh")


def helm_env(helm_home: Path, **extra: str) -> dict[str, str]:
    """The environment with helm's caches and repository list under `helm_home`: none
    of them belong in the developer's home."""
    env = {**os.environ, **extra}
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[var] = str(helm_home / var.lower())
    return env


def run_tool(
    folder: Path,
    tool: str,
    *args: str | Path,
    env: dict[str, str],
    stdin: str | None = None,
    timeout: float = 120,
) -> str:
    """The tool's stdout; the test fails with its stderr when it exits non-zero."""
    cmd = [str(folder / tool), *map(str, args)]
    proc = subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, env=env, check=False, timeout=timeout
    )
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout
