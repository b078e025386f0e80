"""The shipped RBAC is enough, and no more than the code asks for.

`config/default` (all but the manager's Deployment) is applied with an admin client,
then `lws controller` runs as a real process whose kubeconfig holds nothing but a
TokenRequest token of the `lws-controller-manager` ServiceAccount, with leader
election, webhooks, internal certificates and authorized metrics. The tests drive
every path that talks to the API server (Ordinal create, rolling update, group
restart and exclusive placement; Hash create, PostTermination replacement and
scale-down; Lease, certificate Secret and CA injection; events; metrics
authentication; Workload scheduling; DisaggregatedSets) and fail on any object not
made or any 403 in the manager's log.

The last test reads the API server's audit log of the manager's ServiceAccount (the
session's control plane keeps one, tests/fixtures/controlplane.py) and checks that
every (apiGroup, resource, verb) the ClusterRole and Roles grant was used by those
requests, or is listed with its reason in tests/data/rbac_unused.yaml: nothing is
granted that the code does not use.

The API server runs OwnerReferencesPermissionEnforcement, so the `finalizers`
rules that blockOwnerDeletion needs are proven too. The session's in-process
controller is paused meanwhile: it would reconcile too, as cluster admin.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from lws_localcluster.deploy import free_port
from lws_localcluster.manager_process import http_get
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.disaggregatedset import constants as ds_c
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    CONFIGMAPS,
    CRDS,
    DISAGGREGATEDSETS,
    EVENTS,
    LEADERWORKERSETS,
    LEASES,
    MUTATING_WEBHOOKS,
    POD_GROUPS,
    PODS,
    ROLE_SCALERS,
    SECRETS,
    SERVICES,
    VALIDATING_WEBHOOKS,
    WORKLOADS,
)
from leaderworkerset.runtime.certs import CA_CERT
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.lws import paused_lws_controller
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import (
    assert_pods_mutated,
    key_of,
    labels,
    leaders,
    live_pods,
    lws_pods,
    name_of,
    revisions,
    wait_ready,
)
from tests.toolkit.disaggregatedset import manifest as ds_manifest
from tests.toolkit.disaggregatedset import rolling_role
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.manager_process import STEADY_ELECTION, ManagerProcess
from tests.toolkit.waiting import eventually

from .installed import (
    CLUSTER_ROLE_BINDINGS,
    MANAGER_SERVICE_ACCOUNT,
    OPERATOR_NAMESPACE,
    SERVICE_ACCOUNTS,
    apply_all,
    default_install,
    owner_kind_resolvable,
    service_account_token,
    token_kubeconfig,
)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]

JSON = dict[str, Any]
LEASE = c.LEADER_ELECTION_LEASE_NAME
SCRAPER = "lws-rbac-test-scraper"
HOSTNAME = "kubernetes.io/hostname"
# A refusal as the API server words it (reason Forbidden, HTTP 403).
DENIED = re.compile(r"forbidden|\s403\b", re.IGNORECASE)
# Writes into a test namespace being deleted are refused with 403 too; that is
# the namespace lifecycle, not RBAC.
TERMINATING = ("NamespaceTerminating", "being terminated")


class ServiceAccountManager(ManagerProcess):
    """`lws controller` as deployed (built with ``secure_metrics=True``): metrics behind
    TokenReview and SubjectAccessReview."""

    def denials(self) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [
            line
            for line in text.splitlines()
            if DENIED.search(line) and not any(t in line for t in TERMINATING)
        ]

    def assert_never_denied(self) -> None:
        denied = self.denials()
        assert not denied, "the manager was refused:\n" + "\n".join(denied[:20])
        self.check_alive()


async def _crd_established(admin: ApiClient) -> bool:
    crd = await admin.get(CRDS, c.CRD_NAME)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)


# --- fixtures ------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def manager(
    request: pytest.FixtureRequest,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ServiceAccountManager]:
    admin = nodesim_api
    async with paused_lws_controller(request.session):
        workdir = tmp_path_factory.mktemp("rbac")
        port = free_port()
        # A fresh install: the certificate Secret as config/webhook ships it, empty.
        if await admin.get_or_none(SECRETS, c.WEBHOOK_SECRET_NAME, OPERATOR_NAMESPACE):
            await admin.delete(SECRETS, c.WEBHOOK_SECRET_NAME, OPERATOR_NAMESPACE)
        await apply_all(admin, default_install(port))
        await eventually(lambda: _crd_established(admin), within=60, what="CRD established")
        token = await service_account_token(admin, MANAGER_SERVICE_ACCOUNT)
        sa_kubeconfig = token_kubeconfig(kubeconfig, token, workdir / "sa.kubeconfig")
        # Not RBAC, and it heals by itself, but it would be a 403 in the log.
        as_sa = ApiClient.from_kubeconfig(sa_kubeconfig)
        try:
            for api_version, kind in ((c.API_VERSION, c.KIND), (ds_c.API_VERSION, ds_c.KIND)):
                await eventually(
                    lambda v=api_version, k=kind: owner_kind_resolvable(as_sa, admin, v, k),
                    within=90,
                    interval=1.0,
                    what=f"the API server to resolve {kind} owners",
                )
        finally:
            await as_sa.close()
        process = ServiceAccountManager(
            "sa-manager",
            workdir,
            sa_kubeconfig,
            operator_namespace=OPERATOR_NAMESPACE,
            election=dict(STEADY_ELECTION),
            secure_metrics=True,
            webhook_port=port,
            # The opt-in deletion path reads and deletes beside the collector too.
            teardown={"leaderWorkerSetDeletion": "Parallel"},
            # spec.scheduling by Workloads and PodGroups, to use their rules.
            workload_scheduling=True,
        )
        try:
            process.start()
            await process.wait_ready()
            yield process
            # Graceful stop releases the Lease: one more write to check.
            process.signal(signal.SIGTERM)
            assert await process.wait_exit(within=45) == 0
            assert not process.denials(), "\n".join(process.denials()[:20])
        finally:
            process.kill()
            print(f"===== {process.log_path}\n{process.log_tail(200)}")


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def as_manager(manager: ServiceAccountManager) -> AsyncIterator[ApiClient]:
    """A client with the manager's identity, for probing what it may not do."""
    client = ApiClient.from_kubeconfig(manager.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


# --- helpers ---------------------------------------------------------------------------


async def secret_ca(api: ApiClient) -> str | None:
    secret = await api.get_or_none(SECRETS, c.WEBHOOK_SECRET_NAME, OPERATOR_NAMESPACE)
    data = (secret or {}).get("data") or {}
    return data.get(CA_CERT) if all(data.get(k) for k in (CA_CERT, "tls.crt", "tls.key")) else None


async def ca_bundles(api: ApiClient) -> set[str]:
    out = set()
    for resource, name in (
        (MUTATING_WEBHOOKS, c.MUTATING_WEBHOOK_CONFIGURATION),
        (VALIDATING_WEBHOOKS, c.VALIDATING_WEBHOOK_CONFIGURATION),
    ):
        for webhook in (await api.get(resource, name))["webhooks"]:
            out.add(str(webhook["clientConfig"].get("caBundle", "")))
    return out


async def injected(api: ApiClient, manager: ManagerProcess, old: str | None = None) -> str | None:
    """The Secret's CA once it is in every webhook and in the serving files."""
    ca = await secret_ca(api)
    if ca is None or ca == old or await ca_bundles(api) != {ca}:
        return None
    try:
        on_disk = (manager.cert_dir / CA_CERT).read_bytes()
    except OSError:
        return None
    return ca if base64.b64decode(ca) == on_disk else None


async def controller_events(api: ApiClient, namespace: str) -> set[str]:
    items = (await api.list(EVENTS, namespace)).get("items") or []
    return {
        str(e.get("reason"))
        for e in items
        if e.get("reportingController") == c.EVENT_REPORTING_CONTROLLER
    }


async def refused(call: Any) -> bool:
    try:
        await call
    except ApiError as exc:
        return exc.status == 403
    return False


# --- tests -----------------------------------------------------------------------------


async def test_identity_holds_no_more_than_the_shipped_roles(as_manager: ApiClient) -> None:
    api = as_manager
    # Secrets and Leases only by name in the operator namespace, nothing elsewhere.
    assert await refused(api.list(SECRETS))
    assert await refused(api.list(SECRETS, OPERATOR_NAMESPACE))
    assert await refused(api.get(SECRETS, "other", OPERATOR_NAMESPACE))
    assert await refused(api.list(LEASES, OPERATOR_NAMESPACE))
    assert await refused(api.list(CONFIGMAPS, OPERATOR_NAMESPACE))
    # LeaderWorkerSets it writes only as a DisaggregatedSet's parts (created, patched,
    # deleted; a user's spec is never replaced), and CRDs are the installer's.
    assert await refused(api.replace(LEADERWORKERSETS, lws_manifest("x", OPERATOR_NAMESPACE)))
    assert await refused(api.get(CRDS, c.CRD_NAME))
    # Its own objects it may read.
    assert await api.get(SECRETS, c.WEBHOOK_SECRET_NAME, OPERATOR_NAMESPACE)


async def test_lease_certificates_and_rotation(
    manager: ServiceAccountManager, nodesim_api: ApiClient
) -> None:
    api = nodesim_api

    async def held() -> str | None:
        lease = await api.get_or_none(LEASES, LEASE, OPERATOR_NAMESPACE)
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "") or None

    await eventually(held, within=30, what="the Lease acquired")
    first = await eventually(lambda: injected(api, manager), within=60, what="CA injected")

    # A lost Secret: the manager sees it go, makes new certificates, injects them.
    await api.delete(SECRETS, c.WEBHOOK_SECRET_NAME, OPERATOR_NAMESPACE)
    second = await eventually(
        lambda: injected(api, manager, first), within=60, what="new CA injected"
    )
    assert second != first
    assert await held()
    manager.assert_never_denied()


async def test_metrics_are_authenticated_and_authorized(
    manager: ServiceAccountManager, nodesim_api: ApiClient
) -> None:
    api = nodesim_api
    account = {"apiVersion": "v1", "kind": "ServiceAccount"}
    account["metadata"] = {"name": SCRAPER, "namespace": OPERATOR_NAMESPACE}
    await api.apply(SERVICE_ACCOUNTS, account, field_manager="lws-rbac-test")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": SCRAPER},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "lws-metrics-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": OPERATOR_NAMESPACE}],
    }
    await api.apply(CLUSTER_ROLE_BINDINGS, binding, field_manager="lws-rbac-test")
    token = await service_account_token(api, SCRAPER)
    url = f"https://127.0.0.1:{manager.metrics_port}/metrics"
    try:
        status, _ = await asyncio.to_thread(http_get, url, None)
        assert status == 401

        async def scraped() -> str | None:
            status, body = await asyncio.to_thread(http_get, url, token)
            return body if status == 200 else None

        # RBAC caches in the API server take a moment to see the new binding.
        body = await eventually(scraped, within=30, what="an authorized scrape")
        assert f'leader_election_master_status{{name="{LEASE}"}} 1' in body
    finally:
        await api.delete(CLUSTER_ROLE_BINDINGS, SCRAPER)
        await api.delete(SERVICE_ACCOUNTS, SCRAPER, OPERATOR_NAMESPACE)
    manager.assert_never_denied()


async def test_ordinal_create_update_and_restart(
    manager: ServiceAccountManager,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
) -> None:
    api, name = nodesim_api, "ord"
    body = lws_manifest(name, namespace, replicas=2, size=2)
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
        c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    )
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 2, within=180)
    await assert_pods_mutated(api, namespace, name, 4)

    # Rolling update: a template change moves every group to a new revision.
    patch = {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"metadata": {}}}}}
    patch["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"rbac-test": "v2"}
    }
    await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace)

    async def updated() -> bool:
        pods = await live_pods(api, namespace, name)
        return len(pods) == 4 and all(
            labels(p).get("rbac-test") == "v2" and is_ready(p) for p in pods
        )

    await eventually(updated, within=240, what="all groups on the new template")
    await wait_ready(api, namespace, name, 2, within=120)

    async def old_revision_deleted() -> bool:
        return len(await revisions(api, namespace, name)) == 1

    await eventually(old_revision_deleted, within=60, what="the old revision deleted")

    # A worker's container restarts: the manager deletes the leader to recreate the group.
    leader = await api.get(PODS, f"{name}-0", namespace)
    await node_simulator.restart_container(namespace, f"{name}-0-1")

    async def recreated() -> bool:
        pod = await api.get_or_none(PODS, f"{name}-0", namespace)
        return pod is not None and pod["metadata"]["uid"] != leader["metadata"]["uid"]

    await eventually(recreated, within=120, what="group 0 recreated")
    await wait_ready(api, namespace, name, 2, within=180)

    # `kubectl delete pod` of a leader: its workers are deleted beside it, after the
    # leader StatefulSet is read from the server.
    old = {
        p["metadata"]["uid"]
        for p in await live_pods(api, namespace, name)
        if labels(p).get(c.LABEL_GROUP_INDEX) == "1"
    }
    await api.delete(PODS, f"{name}-1", namespace)

    async def rebuilt() -> bool:
        pods = await live_pods(api, namespace, name)
        group = [p for p in pods if labels(p).get(c.LABEL_GROUP_INDEX) == "1"]
        return len(group) == 2 and all(
            p["metadata"]["uid"] not in old and is_ready(p) for p in group
        )

    await eventually(rebuilt, within=180, what="group 1 rebuilt")

    wanted = {c.EVENT_REASON_CREATING_REVISION, c.EVENT_REASON_RECREATE_GROUP}

    async def recorded() -> bool:
        return wanted <= await controller_events(api, namespace)

    await eventually(recorded, within=60, what=f"events {sorted(wanted)}")

    # Deleted with the opt-in parallel deletion: every level read and deleted.
    await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")

    async def gone() -> bool:
        return not await lws_pods(api, namespace, name)

    await eventually(gone, within=120, what="every pod gone")
    manager.assert_never_denied()


async def test_exclusive_placement_reads_the_leaders_node(
    manager: ServiceAccountManager, nodesim_api: ApiClient, namespace: str
) -> None:
    # A namespace of its own: the group's anti-affinity keeps other groups of the
    # namespace off its node.
    placed = lws_manifest("placed", namespace, replicas=1, size=2)
    placed["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: HOSTNAME}
    await nodesim_api.create(LEADERWORKERSETS, placed)
    await wait_ready(nodesim_api, namespace, "placed", 1, within=180)
    pods = await live_pods(nodesim_api, namespace, "placed")
    assert len({p["spec"]["nodeName"] for p in pods}) == 1
    manager.assert_never_denied()


async def test_hash_create_replacement_and_scale_down(
    manager: ServiceAccountManager, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "hash"
    await api.create(LEADERWORKERSETS, hash_lws(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2, within=180)
    await assert_pods_mutated(api, namespace, name, 4)
    before = await leaders(api, namespace, name)
    old_keys = {key_of(p) for p in before}
    assert len(before) == 2

    # PostTermination (the default): the replacement waits behind its gate until
    # the old group is gone, then the manager lifts the gate.
    await api.delete(PODS, name_of(before[0]), namespace)

    async def replaced() -> bool:
        now = await leaders(api, namespace, name)
        fresh = [p for p in now if key_of(p) not in old_keys]
        return len(now) == 2 and len(fresh) == 1 and is_ready(fresh[0])

    await eventually(replaced, within=180, what="the group replaced")
    await wait_ready(api, namespace, name, 2, within=120)

    await api.patch(LEADERWORKERSETS, name, {"spec": {"replicas": 1}}, namespace=namespace)

    async def scaled_down() -> bool:
        return len(await live_pods(api, namespace, name)) == 2

    await eventually(scaled_down, within=120, what="one group left")
    await wait_ready(api, namespace, name, 1, within=120)
    manager.assert_never_denied()


async def test_workload_scheduling_and_a_disaggregatedset(
    manager: ServiceAccountManager, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    # spec.scheduling: a Workload and PodGroups; a new size resizes the Workload.
    gang = lws_manifest("gang", namespace, replicas=1, size=2)
    gang["spec"]["scheduling"] = {}
    await api.create(LEADERWORKERSETS, gang)
    await wait_ready(api, namespace, "gang", 1, within=180)
    assert await api.get(WORKLOADS, "gang", namespace)
    first_groups = {name_of(g) for g in (await api.list(POD_GROUPS, namespace))["items"]}
    assert first_groups
    patch = {"spec": {"leaderWorkerTemplate": {"size": 3}}}
    await api.patch(LEADERWORKERSETS, "gang", patch, namespace=namespace)

    async def resized() -> bool:
        workload = await api.get(WORKLOADS, "gang", namespace)
        gangs = [t["schedulingPolicy"]["gang"] for t in workload["spec"]["podGroupTemplates"]]
        return [g.get("minCount") for g in gangs] == [3]

    await eventually(resized, within=120, what="the Workload resized")

    async def old_groups_deleted() -> bool:
        items = (await api.list(POD_GROUPS, namespace))["items"]
        names = {name_of(g) for g in items if not g["metadata"].get("deletionTimestamp")}
        return bool(names) and not names & first_groups

    # Unused PodGroups are deleted after a grace of 30 s (UNUSED_POD_GROUP_GRACE).
    await eventually(old_groups_deleted, within=180, what="the old revision's PodGroups deleted")
    await api.delete(LEADERWORKERSETS, "gang", namespace)

    # A DisaggregatedSet: its LeaderWorkerSets, Service and RoleScaler made; the role
    # no longer External (RoleScaler deleted); a new revision (the old LWSs drained and
    # deleted); then the set deleted.
    external = rolling_role("decode", 1, scaling={"mode": "External"})
    body = ds_manifest("llm", namespace, rolling_role("prefill", 1), external)
    await api.create(DISAGGREGATEDSETS, body)
    await eventually(
        lambda: api.get_or_none(ROLE_SCALERS, "llm-decode", namespace), within=60, what="scaler"
    )

    async def services() -> list[JSON] | None:
        items = (await api.list(SERVICES, namespace)).get("items") or []
        return [i for i in items if name_of(i).endswith("-prv")] or None

    first = await eventually(services, within=180, what="the set's revision Services")
    stored = await api.get(DISAGGREGATEDSETS, "llm", namespace)
    roles = stored["spec"]["roles"]
    for role in roles:
        role.pop("scaling", None)
        template = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        template.setdefault("metadata", {}).setdefault("labels", {})["rev"] = "2"
    await api.patch(DISAGGREGATEDSETS, "llm", {"spec": {"roles": roles}}, namespace=namespace)

    async def rolled() -> bool:
        scaler = await api.get_or_none(ROLE_SCALERS, "llm-decode", namespace)
        now = {name_of(s) for s in await services() or []}
        return scaler is None and bool(now) and not now & {name_of(s) for s in first}

    await eventually(rolled, within=300, what="the new revision serving, the old drained")
    await api.delete(DISAGGREGATEDSETS, "llm", namespace)

    async def gone() -> bool:
        return not (await api.list(LEADERWORKERSETS, namespace)).get("items")

    await eventually(gone, within=180, what="the set's LeaderWorkerSets gone")
    manager.assert_never_denied()


# --- every granted rule used (the audit log) -------------------------------------------

REPO = Path(__file__).resolve().parents[2]
ROLE_FILES = (
    REPO / "config" / "rbac" / "role.yaml",
    REPO / "config" / "rbac" / "leader_election_role.yaml",
    REPO / "config" / "internalcert" / "cert_secret_role.yaml",
)
UNUSED = REPO / "tests" / "data" / "rbac_unused.yaml"
MANAGER_USER = f"system:serviceaccount:{OPERATOR_NAMESPACE}:{MANAGER_SERVICE_ACCOUNT}"
# `lws controller` sends `lws/<version> (<os>/<arch>) <commit>`; the tests' clients "lws".
MANAGER_AGENT = "lws/"
Pair = tuple[str, str, str]  # apiGroup ("" for core), resource[/subresource], verb


def granted_pairs() -> set[Pair]:
    pairs = set()
    for path in ROLE_FILES:
        roles = [d for d in yaml.safe_load_all(path.read_text()) if d and "rules" in d]
        for rule in (rule for role in roles for rule in role["rules"]):
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    pairs |= {(group, resource, verb) for verb in rule["verbs"]}
    return pairs


def audited_calls(log: Path) -> dict[Pair, collections.Counter[str]]:
    """Each (apiGroup, resource, verb) the manager's requests used, with the request
    paths (query left out) that used it and how often."""
    used: dict[Pair, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef")
        if entry.get("user", {}).get("username") != MANAGER_USER or not ref:
            continue  # a non-resource request (discovery) needs no rule of ours
        if not entry.get("userAgent", "").startswith(MANAGER_AGENT):
            continue  # this module's own probes with the manager's token
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        path = entry.get("requestURI", "").partition("?")[0]
        # RBAC's refusals only: a 403 the authorizer allowed is another plugin's (a
        # namespace being deleted, an owner kind discovery has not caught up with).
        if entry.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
            path = "403 " + path
        used[(ref.get("apiGroup", ""), resource, entry["verb"])][path] += 1
    return used


async def test_every_granted_rule_is_used_or_explained(
    manager: ServiceAccountManager, control_plane: Any
) -> None:
    log = getattr(control_plane, "audit_log", None)
    if log is None:
        pytest.skip("the cluster keeps no audit log (LWS_TEST_KUBECONFIG)")
    used = audited_calls(log)
    denied = {pair: paths for pair, paths in used.items() if any(p[:3] == "403" for p in paths)}
    granted = granted_pairs()
    explained = {
        (u["apiGroup"], u["resource"], u["verb"]): u["reason"]
        for u in yaml.safe_load(UNUSED.read_text())
    }
    lines = [
        f"{'/'.join(p[:2])} {p[2]}: {sorted(used[p].items(), key=lambda i: -i[1])[:3]}"
        for p in sorted(granted)
        if p in used
    ]
    print("rules used, with the calls that used them:\n" + "\n".join(lines))
    unused = sorted(granted - set(used))
    assert not denied, f"refused: {denied}"
    assert not [p for p in unused if p not in explained], (
        "granted, never used, and not explained in tests/data/rbac_unused.yaml: "
        f"{[p for p in unused if p not in explained]}"
    )
    # A pair used only when a race goes one way is listed with `sometimes: true`.
    sometimes = {
        (u["apiGroup"], u["resource"], u["verb"])
        for u in yaml.safe_load(UNUSED.read_text())
        if u.get("sometimes")
    }
    assert not [p for p in explained if p in used and p not in sometimes], (
        f"listed as unused but used: {[p for p in explained if p in used]}"
    )
    assert not [p for p in explained if p not in granted], "listed but not granted"
