"""One Kubernetes release of the matrix (`make compat-k8s`, docs/testing.md): the session's
control plane is of the release LWS_K8S_VERSION names, and on it

- cluster up: the control plane starts, and its API server reports that release;
- install: the chart and the kustomize default pass a server-side dry run, then
  config/default is applied for real (CRDs, RBAC, webhook configurations pointed at a
  local port, the certificate Secret) and `lws controller` runs as a process whose only
  credential is the `lws-controller-manager` ServiceAccount's token, with leader
  election and internal certificates (the CA injected into both webhooks);
- webhooks: a LeaderWorkerSet as a user writes it is stored defaulted and its pods are
  mutated; an invalid one is refused with the field's path;
- Hash group story: a Hash LeaderWorkerSet's leader is deleted; the replacement, a
  new group under a new key, waits behind its scheduling gate until every pod of the old
  group is gone, then comes up whole, and the other group keeps its key and its pods;
- gang story: where the cluster serves the scheduling.k8s.io/v1beta1 Workload API
  (v1.37 on), `lws demo --story gang`'s story; elsewhere a LeaderWorkerSet asking for
  `spec.scheduling` is refused with the reason, the controller keeps running, and the
  step is skipped saying why.

The manager serves `spec.scheduling` with the Kubernetes provider on every release, so a
release without the Workload API checks that the controller runs without it. Every
wait polls with a deadline; the steps run in order and share the install.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.deploy import free_port
from lws_localcluster.gang_story import gang_nodes, gang_story
from lws_localcluster.manager_process import ManagerProcess
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.resources import (
    CRDS,
    LEADERWORKERSETS,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    POD_GROUPS,
    PODS,
    SECRETS,
    VALIDATING_WEBHOOKS,
    WORKLOADS,
)
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.discovery import serves
from leaderworkerset.runtime.pki import CA_CERT
from tests.compat_k8s.conftest import RECORD, requested_version
from tests.fixtures.nodesim import unique_node_name
from tests.integration.installed import (
    MANAGER_SERVICE_ACCOUNT,
    OPERATOR_NAMESPACE,
    apply_all,
    default_install,
    owner_kind_resolvable,
    service_account_token,
    token_kubeconfig,
)
from tests.toolkit.cluster import (
    assert_pods_mutated,
    group_pods,
    is_leader,
    key_of,
    leaders,
    name_of,
    new_leader,
    release_all,
    scheduling_gated,
    wait_ready,
)
from tests.toolkit.install_tools import ensure_tools, helm_env, run_tool
from tests.toolkit.lws import defaulted_json, hash_lws, lws_manifest
from tests.toolkit.manager_process import STEADY_ELECTION
from tests.toolkit.paths import REPO
from tests.toolkit.render import TEST_REPOSITORY
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]

JSON = dict[str, Any]
# A refusal as the API server words it; writes into a namespace being deleted are
# refused too, by the namespace lifecycle, not RBAC.
DENIED = re.compile(r"forbidden|\s403\b", re.IGNORECASE)
TERMINATING = ("NamespaceTerminating", "being terminated")
PARTITION = "spec.rolloutStrategy.rollingUpdateConfiguration.partition"


@dataclass
class Installed:
    manager: ManagerProcess
    # The objects each rendering's dry run returned, by kind and name.
    chart: set[tuple[str, str]]
    kustomize: set[tuple[str, str]]

    def denials(self) -> list[str]:
        path = self.manager.log_path
        text = path.read_text(errors="replace") if path.exists() else ""
        return [
            line
            for line in text.splitlines()
            if DENIED.search(line) and not any(t in line for t in TERMINATING)
        ]


def _dry_run(
    folder: Path, kubeconfig: Path, helm_home: Path, manifests: str
) -> set[tuple[str, str]]:
    """What a server-side apply dry run of `manifests` returns, by kind and name."""
    env = helm_env(helm_home, KUBECONFIG=str(kubeconfig))
    out = run_tool(
        folder,
        "kubectl",
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=lws-compat-k8s",
        "-o",
        "name",
        "-f",
        "-",
        env=env,
        stdin=manifests,
    )
    # `kind.group/name`, e.g. deployment.apps/lws-controller-manager
    return {(line.split("/")[0].split(".")[0], line.split("/", 1)[1]) for line in out.split()}


async def _rendered_installs_accepted(
    pytestconfig: pytest.Config, kubeconfig: Path, helm_home: Path
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    folder = ensure_tools(pytestconfig)
    env = helm_env(helm_home, KUBECONFIG=str(kubeconfig))
    chart = run_tool(
        folder,
        "helm",
        "template",
        "lws",
        REPO / "charts" / "lws",
        "--namespace",
        OPERATOR_NAMESPACE,
        "--include-crds",
        # The committed chart names no image (a release fills it in); any will do here.
        "--set",
        f"image.manager.repository={TEST_REPOSITORY}",
        env=env,
    )
    kustomize = run_tool(folder, "kubectl", "kustomize", REPO / "config" / "default", env=env)
    return (
        _dry_run(folder, kubeconfig, helm_home, chart),
        _dry_run(folder, kubeconfig, helm_home, kustomize),
    )


async def _crd_established(admin: ApiClient) -> bool:
    crd = await admin.get(CRDS, c.CRD_NAME)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)


async def _ca_injected(admin: ApiClient) -> bool:
    secret = await admin.get_or_none(SECRETS, c.WEBHOOK_SECRET_NAME, OPERATOR_NAMESPACE)
    ca = ((secret or {}).get("data") or {}).get(CA_CERT)
    if not ca:
        return False
    for resource, name in (
        (MUTATING_WEBHOOKS, c.MUTATING_WEBHOOK_CONFIGURATION),
        (VALIDATING_WEBHOOKS, c.VALIDATING_WEBHOOK_CONFIGURATION),
    ):
        for webhook in (await admin.get(resource, name))["webhooks"]:
            if webhook["clientConfig"].get("caBundle") != ca:
                return False
    return True


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server_version(control_plane: ControlPlane, nodesim_api: ApiClient) -> str:
    answer = await nodesim_api.request("GET", "/version")
    RECORD["server"] = version = str(answer["gitVersion"])
    return version


# The install as a user's cluster gets it, step by step, each awaited: the rendered
# installs dry-run, config/default applied, a token for the ServiceAccount, the API
# server's owner-reference admission ready for the kind, the manager ready.
@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def installed(
    pytestconfig: pytest.Config,
    server_version: str,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Installed]:
    admin = nodesim_api
    workdir = tmp_path_factory.mktemp("compat-k8s")
    # Namespaced objects are dry-run only if their namespace really exists.
    namespace: JSON = {"apiVersion": "v1", "kind": "Namespace"}
    namespace["metadata"] = {"name": OPERATOR_NAMESPACE}
    await admin.apply(NAMESPACES, namespace, field_manager="lws-compat-k8s")
    chart, kustomize = await _rendered_installs_accepted(pytestconfig, kubeconfig, workdir / "helm")

    port = free_port()
    await apply_all(admin, default_install(port))
    await eventually(lambda: _crd_established(admin), within=60, what="CRD established")
    token = await service_account_token(admin, MANAGER_SERVICE_ACCOUNT)
    sa_kubeconfig = token_kubeconfig(kubeconfig, token, workdir / "sa.kubeconfig")
    as_sa = ApiClient.from_kubeconfig(sa_kubeconfig)
    try:
        await eventually(
            lambda: owner_kind_resolvable(as_sa, admin),
            within=90,
            interval=1.0,
            what="the API server to resolve LeaderWorkerSet owners",
        )
    finally:
        await as_sa.close()
    manager = ManagerProcess(
        "manager",
        workdir,
        sa_kubeconfig,
        operator_namespace=OPERATOR_NAMESPACE,
        election=dict(STEADY_ELECTION),
        secure_metrics=True,
        webhook_port=port,
        workload_scheduling=True,
    )
    try:
        manager.start()
        await manager.wait_ready()
        await eventually(lambda: _ca_injected(admin), within=60, what="the CA injected")
        yield Installed(manager, chart, kustomize)
    finally:
        manager.kill()
        print(f"===== {manager.log_path}\n{manager.log_tail(200)}")


async def test_server_is_the_release_asked_for(server_version: str) -> None:
    # The step's time is the control plane's start (fixtures are timed with their test).
    assert server_version == requested_version()


async def test_install(installed: Installed) -> None:
    for rendered in (installed.chart, installed.kustomize):
        assert ("deployment", "lws-controller-manager") in rendered
        assert ("customresourcedefinition", c.CRD_NAME) in rendered
        assert ("validatingwebhookconfiguration", c.VALIDATING_WEBHOOK_CONFIGURATION) in rendered
    installed.manager.check_alive()
    assert not installed.denials(), "\n".join(installed.denials()[:20])


def _causes(exc: ApiError) -> list[str]:
    return [str(x.get("field")) for x in (exc.body.get("details") or {}).get("causes") or []]


async def _refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        await call
    assert info.value.status == 422, info.value
    return info.value


async def test_webhooks(installed: Installed, nodesim_api: ApiClient, namespace: str) -> None:
    api = nodesim_api
    manifest = lws_manifest("defaulted", namespace, replicas=1, size=2)
    created = await api.create(LEADERWORKERSETS, manifest)
    expected = defaulted_json(manifest)["spec"]
    for member in ("rolloutStrategy", "startupPolicy", "networkConfig"):
        assert created["spec"].get(member) == expected[member], member
    restart = created["spec"]["leaderWorkerTemplate"].get("restartPolicy")
    assert restart == c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    await assert_pods_mutated(api, namespace, "defaulted", 2)
    await wait_ready(api, namespace, "defaulted", 1, within=180)

    partitioned = {"type": "RollingUpdate", "rollingUpdateConfiguration": {"partition": 1}}
    bad = hash_lws("refused", namespace, replicas=1, size=2, rolloutStrategy=partitioned)
    error = await _refused(api.create(LEADERWORKERSETS, bad))
    assert PARTITION in _causes(error), (_causes(error), error.message)
    assert PARTITION in error.message
    installed.manager.check_alive()


# The story in one function so that its steps read in order: the cluster's state is
# checked at each of them (see the module docstring).
async def test_hash_group_story(
    installed: Installed, node_simulator: NodeSimulator, nodesim_api: ApiClient, namespace: str
) -> None:
    api, sim, name = nodesim_api, node_simulator, "hash"
    await api.create(LEADERWORKERSETS, hash_lws(name, namespace, replicas=2, size=3))
    await wait_ready(api, namespace, name, 2, within=180)
    before = await leaders(api, namespace, name)
    victim, kept = before
    kept_pods = {p["metadata"]["uid"] for p in await group_pods(api, namespace, name, key_of(kept))}
    old_group = await group_pods(api, namespace, name, key_of(victim))
    assert len(old_group) == 3 and len(kept_pods) == 3
    for pod in old_group:
        await sim.stall_termination(namespace, name_of(pod))

    await api.delete(PODS, name_of(victim), namespace)
    replacement = await new_leader(api, namespace, name, {key_of(p) for p in before})

    async def held() -> bool:
        pod = await api.get_or_none(PODS, name_of(replacement), namespace)
        return pod is not None and scheduling_gated(pod)

    await eventually(held, within=60, what="the replacement held behind its gate")
    await release_all(sim, old_group)
    await wait_ready(api, namespace, name, 2, within=180)

    new_key = key_of(replacement)
    members = await group_pods(api, namespace, name, new_key)
    assert len(members) == 3 and sum(is_leader(p) for p in members) == 1
    assert await group_pods(api, namespace, name, key_of(victim)) == []
    now_kept = {p["metadata"]["uid"] for p in await group_pods(api, namespace, name, key_of(kept))}
    assert now_kept == kept_pods, "the other group lost pods"
    assert {key_of(p) for p in await leaders(api, namespace, name)} == {key_of(kept), new_key}
    installed.manager.check_alive()
    assert not installed.denials(), "\n".join(installed.denials()[:20])


async def test_gang_story(
    installed: Installed,
    server_version: str,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api = nodesim_api
    if not await serves(api, WORKLOADS, POD_GROUPS):
        body = lws_manifest("gang", namespace, replicas=1, size=2, scheduling={})
        error = await _refused(api.create(LEADERWORKERSETS, body))
        assert "spec.scheduling" in _causes(error), (_causes(error), error.message)
        assert "is not available" in error.message
        installed.manager.check_alive()
        refusal = error.message[error.message.index("spec.scheduling: ") :]
        pytest.skip(
            f"no {s.SCHEDULING_API_VERSION} Workload and PodGroup before v1.37: the "
            f"controller runs without them and refuses spec.scheduling at admission "
            f"({refusal[:120]}...)"
        )
    pool = unique_node_name("gang-story")
    try:
        await gang_story(api, node_simulator, namespace, pool=pool)
    finally:
        for spec in gang_nodes(pool):
            if spec.name in node_simulator.fleet.nodes:
                await node_simulator.remove_node(spec.name)
    installed.manager.check_alive()
    assert not installed.denials(), "\n".join(installed.denials()[:20])
