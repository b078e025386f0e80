"""Upstream's own e2e suite (the Go package sigs.k8s.io/lws/test/e2e at the version
hack/upstream-lws/go.mod pins, compiled by hack/build-upstream-e2e.sh) against our
controller, installed by Helm from the image built here on the real node.

The suite runs as upstream's CI runs it on kind: KUBECONFIG set, kubectl on PATH (it
shells out to kubectl for the metrics spec), every other spec through its own client.
Its pods use images no registry here can serve; stand-ins are built under the same
names (hack/images/e2e_images.py). Every spec must pass except those in
EXPECTED_SKIPS, which ginkgo is told to skip, each with the reason it cannot run here.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.realnode import NAMESPACE, RealCluster, install_local_chart
from tests.toolkit.ginkgo_report import SpecResult, read_report, table
from tests.toolkit.install_tools import hack_build
from tests.toolkit.installs import (
    Steps,
    controller_pods_ready,
    import_images,
    no_lws_pods_left,
    remove_any_controller,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(4800)]

# Spec text (a regular expression) -> why it cannot pass here.
EXPECTED_SKIPS = {
    "gang scheduling": "needs Volcano (SCHEDULER_PROVIDER=volcano); none is installed here",
}
METRICS_SPEC = "should ensure the metrics endpoint is serving metrics"
# Upstream's config/default (what its CI installs) binds its metrics reader role to the
# manager's own ServiceAccount, and the metrics spec scrapes with that account's token;
# neither chart (ours or upstream's) creates the binding, so it is added here, as
# upstream's kustomize install has it.
METRICS_BINDING = "lws-metrics-reader-rolebinding"
SUITE_TIMEOUT = 3600


@pytest.fixture(scope="module")
def suite_binary(pytestconfig: pytest.Config) -> Path:
    return hack_build(pytestconfig, "build-upstream-e2e.sh")


@pytest.fixture(scope="module")
async def our_release(real_cluster: RealCluster) -> AsyncIterator[Steps]:
    """Our chart installed as tests/realnode installs it, after whatever install an
    earlier module left is removed; removed again at the end."""
    steps = Steps("upstream e2e")
    tools = real_cluster.tools
    api = ApiClient.from_kubeconfig(real_cluster.kubeconfig)
    try:
        with steps.step("remove any controller install"):
            print(f"removed: {remove_any_controller(tools) or 'nothing'}")
            await no_lws_pods_left(api)
        with steps.step("import the stand-in images"):
            import_images(real_cluster, "nginx-standin", "curl-standin")
        with steps.step("helm install our chart"):
            install_local_chart(real_cluster)
            await controller_pods_ready(api, 2, real_cluster.images["controller"].ref)
        account = f"--serviceaccount={NAMESPACE}:lws-controller-manager"
        tools.run(
            "kubectl", "create", "clusterrolebinding", METRICS_BINDING,
            "--clusterrole=lws-metrics-reader", account,
        )  # fmt: skip
        yield steps
    finally:
        tools.run("kubectl", "delete", "clusterrolebinding", METRICS_BINDING, "--ignore-not-found")
        remove_any_controller(tools)
        await api.close()


def run_suite(binary: Path, cluster: RealCluster, workdir: Path) -> tuple[int, Path, Path]:
    """The suite's exit code, its JSON report and its output."""
    report, log = workdir / "report.json", workdir / "e2e.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{cluster.tools.folder}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    args = [
        str(binary),
        f"--ginkgo.skip={'|'.join(EXPECTED_SKIPS)}",
        f"--ginkgo.json-report={report}",
        "--ginkgo.no-color",
        "--ginkgo.v",
        f"--ginkgo.timeout={SUITE_TIMEOUT}s",
    ]
    with log.open("w") as out:
        done = subprocess.run(
            args, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
            timeout=SUITE_TIMEOUT + 300, check=False,
        )  # fmt: skip
    return done.returncode, report, log


def expected_skip(spec: SpecResult) -> str | None:
    return next((why for text, why in EXPECTED_SKIPS.items() if re.search(text, spec.text)), None)


def test_upstream_e2e_suite_passes_against_our_installed_controller(
    suite_binary: Path, our_release: Steps, real_cluster: RealCluster, tmp_path: Path
) -> None:
    with our_release.step("upstream's e2e suite"):
        code, report, log = run_suite(suite_binary, real_cluster, tmp_path)
    assert report.is_file(), f"no report (exit code {code}):\n{log.read_text()[-5000:]}"
    results = read_report(report)
    print(f"\n{table(results)}\n\n{our_release.summary()}", flush=True)
    for spec in results:
        if spec.is_spec and expected_skip(spec):
            print(f"skipped as expected: {spec.text}: {expected_skip(spec)}")
    specs = [r for r in results if r.is_spec]
    wrong = [
        f"{r.text}: {r.state}\n{r.failure}"
        for r in results
        if r.state != ("skipped" if expected_skip(r) else "passed")
    ]
    assert not wrong, "\n\n".join(wrong) + f"\n\n{log.read_text()[-5000:]}"
    assert code == 0, log.read_text()[-5000:]
    assert any(METRICS_SPEC in r.text and r.state == "passed" for r in specs)
    assert sum(r.state == "passed" for r in specs) >= 17, table(results)
