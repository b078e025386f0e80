"""The image's install, without a container engine: the pip commands of the image
recipe (hack/images/recipes.py, what `make image` and `make release` run) into a
fresh virtual environment, and `lws controller` from that environment serves,
becomes ready and reconciles against the local cluster.

The wheels are built from what the recipe copies (pyproject.toml, constraints.txt,
README.md, LICENSE, src), so nothing of the test environment leaks into them; the
process runs with PYTHONPATH dropped, so it imports only the installed package. The
test prints the environment's size and the start-to-ready time.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lws_localcluster.deploy import install

from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.manager_process import (
    Managers,
    managers_fixture,  # noqa: F401  (fixtures, registered by import)
    no_inprocess_controller_fixture,  # noqa: F401
    operator_namespace_fixture,  # noqa: F401
)

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "hack" / "images" / "recipes.py"
# What the recipe copies to build the wheels (its PACKAGE_FILES, and src).
CONTEXT = ("pyproject.toml", "README.md", "constraints.txt", "LICENSE", "src")
WHEELS = "/wheels"
# The recipe's pip commands, as pip command lines (checked below).
BUILD_WHEELS = f"pip wheel -c constraints.txt --wheel-dir {WHEELS} ."
INSTALL = f"pip install --no-index --find-links {WHEELS} leaderworkerset"
DROP_PIP = "pip uninstall -y setuptools wheel pip"
# Must not be in the runtime environment: the dev extra and the installers.
ABSENT = ("pytest", "hypothesis", "mypy", "ruff", "pip", "setuptools")
# What the image sets so that a read-only root filesystem works.
RUNTIME_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
CLEAN_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE")


def _run(argv: list[str], cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _pip(venv: Path, command: str, wheels: Path) -> list[str]:
    """A recipe's pip command as this venv's pip, with the wheel folder moved."""
    words = command.replace(WHEELS, str(wheels)).split()
    assert words[0] == "pip"
    return [str(venv / "bin" / "python"), "-m", "pip", *words[1:]]


def _disk_usage(root: Path) -> tuple[int, int]:
    """Bytes allocated on disk and the number of files, like `du -s`."""
    total, files = 0, 0
    for folder, _, names in os.walk(root):
        for name in names:
            total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            files += 1
    return total, files


def _tree_state(root: Path) -> dict[str, int]:
    return {
        os.path.join(folder, name): os.lstat(os.path.join(folder, name)).st_mtime_ns
        for folder, dirs, names in os.walk(root)
        for name in (*names, *dirs)
    }


def test_the_image_recipe_runs_these_commands() -> None:
    text = RECIPE.read_text()
    # The image runs pip from its wheel (`python3 PIP.whl/pip install ...`), so it never
    # has pip to drop; the venv here gets one from `python -m venv` and drops it.
    assert '"wheel", "-c", constraints, "-w", wheels, src' in text, "the wheels changed"
    install = '*("install", "--no-index", "--find-links", "/tmp/wheels")'
    assert install in text and '*("-c", "/tmp/wheels/constraints.txt"' in text, "install changed"
    files = re.search(r"^PACKAGE_FILES = \((.*)\)$", text, re.M)
    assert files and sorted(re.findall(r'"([^"]+)"', files.group(1))) == sorted(CONTEXT[:-1])
    assert 'entrypoint=["lws"]' in text and 'cmd=["controller"]' in text
    assert 'PYTHON_ENV = ["PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"]' in text
    assert RUNTIME_ENV == {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


def _install_like_the_image(tmp_path: Path) -> Path:
    """The builder and runtime stages' pip commands; the runtime virtual environment."""
    context, wheels, builder, venv = (tmp_path / n for n in ("ctx", "wheels", "build", "venv"))
    context.mkdir()
    for name in CONTEXT:
        source = REPO / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            shutil.copytree(source, context / name, ignore=ignore)
        else:
            shutil.copy2(source, context / name)
    _run([sys.executable, "-m", "venv", str(builder)], tmp_path)
    _run(_pip(builder, BUILD_WHEELS, wheels), context)
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    _run(_pip(venv, INSTALL, wheels), tmp_path)
    _run(_pip(venv, DROP_PIP, wheels), tmp_path)

    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    present = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe, *ABSENT],
        env={k: v for k, v in os.environ.items() if k not in CLEAN_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert present == "[]", f"the runtime environment has {present}"
    return venv


@pytest.mark.asyncio(loop_scope="session")
async def test_installed_controller_becomes_ready_and_reconciles(
    tmp_path: Path, managers: Managers, nodesim_api: ApiClient, namespace: str
) -> None:
    began = time.monotonic()
    # In a thread: the node simulator shares this event loop.
    venv = await asyncio.to_thread(_install_like_the_image, tmp_path)
    install_seconds = time.monotonic() - began
    size, files = _disk_usage(venv)

    scratch = tmp_path / "tmpfs"
    scratch.mkdir()
    manager = managers.new(
        "installed",
        executable=[str(venv / "bin" / "lws")],
        env={**RUNTIME_ENV, "TMPDIR": str(scratch)},
        drop_env=CLEAN_ENV,
    )
    before = _tree_state(venv)
    await install(nodesim_api, manager.webhook_port)
    started = time.monotonic()
    manager.start()
    await manager.wait_ready()
    ready_seconds = time.monotonic() - started

    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("installed", namespace, replicas=1))
    await wait_ready(nodesim_api, namespace, "installed", 1, within=180)
    reconciled_seconds = time.monotonic() - started
    assert manager.running()
    # A read-only root filesystem would have refused any write into the install.
    assert _tree_state(venv) == before, "the controller wrote into its installation"

    print(
        f"\ninstall (wheels + venv): {install_seconds:.1f}s; "
        f"venv on disk: {size / 2**20:.1f} MiB in {files} files; "
        f"start -> /readyz 200: {ready_seconds:.1f}s; "
        f"start -> LWS Ready: {reconciled_seconds:.1f}s"
    )
