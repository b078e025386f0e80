"""Upstream's DisaggregatedSet e2e suite (the Go package
sigs.k8s.io/lws/test/e2e/disaggregatedset at the version hack/upstream-lws/go.mod pins,
compiled by hack/build-upstream-e2e.sh disaggregatedset) against our controller, run as its own
process beside the local control plane with simulated nodes.

The suite shells out to kubectl for everything (KUBECONFIG set, kubectl on PATH). It
first checks that a Deployment `lws-controller-manager` in `lws-system` is available
and that a pod labelled `control-plane=controller-manager` runs: the controller runs
here as a process, not a pod, so a stand-in Deployment of pause pods answers those two
questions while our process serves the webhooks and reconciles. Its pods use
`registry.k8s.io/pause` images, which the simulated nodes "run" without pulling.

Every spec must pass except those in EXPECTED_SKIPS, which ginkgo is told to skip, each
with the reason it cannot run here. The per-spec table is printed (`pytest -s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lws_localcluster import manager_process

from leaderworkerset.api.resources import DEPLOYMENTS, NAMESPACES
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.ginkgo_report import SpecResult, read_report, table
from tests.toolkit.install_tools import ensure_tools, hack_build
from tests.toolkit.waiting import eventually

from .managers import Managers

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(3600)]

# Spec text (a regular expression) -> why it cannot pass here. Empty: every spec of
# the pinned release runs.
EXPECTED_SKIPS: dict[str, str] = {}
OPERATOR_NAMESPACE = "lws-system"
STAND_IN = "lws-controller-manager"
SUITE_TIMEOUT = 2700
PAUSE = "registry.k8s.io/pause:3.10"


@pytest.fixture(scope="module")
def suite_binary(pytestconfig: pytest.Config) -> Path:
    return hack_build(pytestconfig, "build-upstream-e2e.sh", "disaggregatedset")


def stand_in_deployment() -> dict[str, Any]:
    """What the suite looks for in place of upstream's manager Deployment."""
    labels = {"control-plane": "controller-manager"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": STAND_IN, "namespace": OPERATOR_NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": PAUSE}]},
            },
        },
    }


async def deploy_stand_in(api: ApiClient) -> None:
    with contextlib.suppress(Exception):
        await api.create(NAMESPACES, {"metadata": {"name": OPERATOR_NAMESPACE}})
    await api.apply(DEPLOYMENTS, stand_in_deployment(), field_manager="ds-e2e")

    async def available() -> bool:
        found = await api.get(DEPLOYMENTS, STAND_IN, OPERATOR_NAMESPACE)
        return bool((found.get("status") or {}).get("availableReplicas"))

    await eventually(available, within=120, what=f"{STAND_IN} available")


async def run_suite(binary: Path, tools: Path, kubeconfig: Path, workdir: Path) -> tuple[int, Path]:
    """The suite's exit code and its JSON report; its output goes to e2e.log. Run as a
    child process of the event loop, which keeps the simulated nodes going."""
    report, log = workdir / "report.json", workdir / "e2e.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    args = [
        f"--ginkgo.json-report={report}",
        "--ginkgo.no-color",
        "--ginkgo.v",
        f"--ginkgo.timeout={SUITE_TIMEOUT}s",
    ]
    if EXPECTED_SKIPS:
        args.append(f"--ginkgo.skip={'|'.join(EXPECTED_SKIPS)}")
    with log.open("w") as out:
        child = await asyncio.create_subprocess_exec(
            str(binary), *args, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            code = await asyncio.wait_for(child.wait(), SUITE_TIMEOUT + 300)
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
    return code, report


def expected_skip(spec: SpecResult) -> str | None:
    return next((why for text, why in EXPECTED_SKIPS.items() if re.search(text, spec.text)), None)


async def test_upstream_disaggregatedset_e2e_suite_passes_against_ours(
    managers: Managers,
    nodesim_api: ApiClient,
    suite_binary: Path,
    kubeconfig: Path,
    pytestconfig: pytest.Config,
    tmp_path: Path,
) -> None:
    tools = ensure_tools(pytestconfig)
    ours = managers.ours()
    await manager_process.route_webhooks(nodesim_api, ours.webhook_port, managers.tls.ca_pem)
    ours.start()
    await ours.wait_ready()
    await deploy_stand_in(nodesim_api)

    code, report = await run_suite(suite_binary, tools, kubeconfig, tmp_path)
    log = (tmp_path / "e2e.log").read_text()
    assert report.is_file(), f"no report (exit code {code}):\n{log[-5000:]}"
    results = read_report(report)
    print(f"\nupstream DisaggregatedSet e2e suite against ours:\n{table(results)}", flush=True)
    for spec in results:
        if spec.is_spec and expected_skip(spec):
            print(f"skipped as expected: {spec.text}: {expected_skip(spec)}")
    wrong = [
        f"{r.text}: {r.state}\n{r.failure}"
        for r in results
        if r.state != ("skipped" if expected_skip(r) else "passed")
    ]
    assert not wrong, "\n\n".join(wrong) + f"\n\n{log[-5000:]}"
    assert code == 0, log[-5000:]
    assert ours.running(), f"our controller exited:\n{ours.log_tail()}"
    # v0.9.0's suite has 19 specs (v0.10.0's adds the RoleScaler ones): a report with
    # fewer means ginkgo ran less than the suite, e.g. a focus left in place.
    specs = [r for r in results if r.is_spec]
    assert len(specs) >= 19, table(results)
