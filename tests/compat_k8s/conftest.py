"""The Kubernetes matrix (`make compat-k8s`; not part of the default run): the session's
control plane is of the release ``LWS_K8S_VERSION`` names (tests/fixtures/controlplane),
and each step's outcome and time go to the JSON file ``LWS_COMPAT_RESULTS`` names, for
the table hack/compat-k8s.sh prints (tests/compat_k8s/results.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from lws_localcluster.binaries import K8S_VERSION_ENV

from tests.compat_k8s.results import step_of
from tests.toolkit.paths import REPO

RESULTS_ENV = "LWS_COMPAT_RESULTS"
# What hack/compat-k8s.sh measured of the build: `cached` or its seconds.
BUILD_ENV = "LWS_COMPAT_BUILD"
# What the session saw: the release its API server reported (`server`, set by the test
# module) and each step's outcome, time and reason (`steps`).
RECORD: dict[str, Any] = {"server": None, "steps": {}}
# A pytest outcome outranks another that a later phase of the same test reports.
_RANK = {"passed": 0, "skipped": 1, "failed": 2}


def requested_version() -> str:
    """The release under test: LWS_K8S_VERSION, else what hack/controlplane/go.mod requires."""
    given = os.environ.get(K8S_VERSION_ENV)
    if given:
        return given
    go_mod = (REPO / "hack" / "controlplane" / "go.mod").read_text()
    found = re.search(r"^\s*k8s\.io/kubernetes (v\S+)", go_mod, re.MULTILINE)
    assert found, "hack/controlplane/go.mod requires no k8s.io/kubernetes"
    return found[1]


def _reason(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = report.longreprtext.strip()
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return " ".join(errors[:3]) if errors else text.splitlines()[-1] if text else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    step = step_of(report.nodeid.rsplit("::", 1)[-1])
    if step is None:
        return
    entry = RECORD["steps"].setdefault(step, {"outcome": "passed", "seconds": 0.0, "reason": ""})
    entry["seconds"] += report.duration
    outcome: str = report.outcome
    if report.when != "call" and report.failed:
        outcome = "error"
    if _RANK.get(outcome, 3) > _RANK.get(entry["outcome"], 3):
        entry["outcome"] = outcome
        entry["reason"] = _reason(report)[:600]


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(RESULTS_ENV)
    if not target:
        return
    build: object = os.environ.get(BUILD_ENV) or None
    if isinstance(build, str) and build.isdigit():
        build = int(build)
    result = {
        "version": requested_version(),
        "server": RECORD["server"],
        "build": build,
        "steps": RECORD["steps"],
    }
    Path(target).write_text(json.dumps(result, indent=2) + "\n")
