"""The local control plane behaves like a real cluster where our tests rely on it."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from lightkube import ApiError, AsyncClient, Client, KubeConfig, codecs
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod
from lws_localcluster.controlplane import ControlPlane

from leaderworkerset.runtime import pki
from tests.fixtures.controlplane import ExternalCluster, create_namespace, make_client
from tests.toolkit.waiting import eventually_blocking

pytestmark = pytest.mark.cluster

T = TypeVar("T")


def own_control_plane(cluster: ControlPlane | ExternalCluster) -> ControlPlane:
    if not isinstance(cluster, ControlPlane):
        pytest.skip("needs the control plane this session started, not LWS_TEST_KUBECONFIG")
    return cluster


def test_version_is_the_built_one(control_plane: ControlPlane | ExternalCluster) -> None:
    cp = own_control_plane(control_plane)
    version = json.loads(cp.api_get("/version"))
    assert version["gitVersion"] == "v1.37.2"
    assert (version["major"], version["minor"]) == ("1", "37")


def test_statefulset_pods_and_garbage_collection(kube_client: Client, namespace: str) -> None:
    owner = kube_client.create(
        ConfigMap(metadata=ObjectMeta(name="owner", namespace=namespace), data={})
    )
    assert owner.metadata is not None and owner.metadata.uid is not None
    sts = codecs.from_dict(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                # OrderedReady would wait for web-0 to run, which never happens here.
                "podManagementPolicy": "Parallel",
                "serviceName": "web",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        # Keeps the pods Pending whatever nodes other tests add.
                        "nodeSelector": {"leaderworkerset.test/no-such-node": "true"},
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    },
                },
            },
        }
    )
    assert isinstance(sts, StatefulSet) and sts.metadata is not None
    sts.metadata.ownerReferences = [
        OwnerReference(apiVersion="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    ]
    kube_client.create(sts, namespace=namespace)

    def pods() -> list[Pod]:
        return list(kube_client.list(Pod, namespace=namespace, labels={"app": "web"}))

    def pod_names() -> set[str]:
        return {p.metadata.name for p in pods() if p.metadata and p.metadata.name}

    eventually_blocking(
        lambda: pod_names() == {"web-0", "web-1", "web-2"}, "ordinal pods", within=30.0
    )
    assert all(p.status and p.status.phase == "Pending" for p in pods())

    kube_client.delete(ConfigMap, "owner", namespace=namespace)

    def statefulset_gone() -> bool:
        try:
            kube_client.get(StatefulSet, "web", namespace=namespace)
        except ApiError as e:
            return e.status.code == 404
        return False

    eventually_blocking(statefulset_gone, "garbage collection of the StatefulSet", within=30.0)
    eventually_blocking(lambda: not pods(), "garbage collection of the pods", within=30.0)


def _tls_server_context(tmp_path: Path) -> tuple[ssl.SSLContext, bytes]:
    ca = pki.make_ca("webhook-test-ca")
    leaf = pki.issue_cert(
        ca, "webhook", dns_names=["localhost"], ip_addresses=["127.0.0.1"], server=True
    )
    crt, key = leaf.write(tmp_path, "webhook")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    return ctx, ca.cert_pem


async def test_mutating_webhook_served_by_the_test_process(
    kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    calls: list[str] = []

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        calls.append(req["name"])
        patch = [{"op": "add", "path": "/data/mutated-by", "value": "test-webhook"}]
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": req["uid"],
                    "allowed": True,
                    "patchType": "JSONPatch",
                    "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
                },
            }
        )

    ssl_ctx, ca_pem = _tls_server_context(tmp_path)
    app = web.Application()
    app.router.add_post("/mutate", mutate)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock, ssl_context=ssl_ctx).start()

    webhook_name = f"{namespace}.webhook.test"
    config: Any = codecs.from_dict(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": webhook_name},
            "webhooks": [
                {
                    "name": "configmaps.test.leaderworkerset.x-k8s.io",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/mutate",
                        "caBundle": base64.b64encode(ca_pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 5,
                }
            ],
        }
    )
    # Async: a blocking call would stall the loop the webhook is served from.
    client = AsyncClient(config=KubeConfig.from_file(kubeconfig))
    try:
        await client.create(config)
        try:
            i = await _create_until_mutated(client, namespace)
        finally:
            await client.delete(MutatingWebhookConfiguration, webhook_name)
        assert f"cm-{i}" in calls
    finally:
        await client.close()
        await runner.cleanup()


async def _create_until_mutated(client: AsyncClient, namespace: str) -> int:
    """Create ConfigMaps until one comes back patched; return its index.

    The API server picks up webhook configurations asynchronously, so the
    first ConfigMaps may pass unpatched.
    """
    deadline = time.monotonic() + 30
    for i in itertools.count():
        cm = await client.create(
            ConfigMap(metadata=ObjectMeta(name=f"cm-{i}", namespace=namespace), data={"k": "v"})
        )
        if cm.data and cm.data.get("mutated-by") == "test-webhook":
            return i
        assert time.monotonic() < deadline, "webhook never applied"
        await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


def test_restart_apiserver(control_plane: ControlPlane | ExternalCluster, tmp_path: Path) -> None:
    shared = own_control_plane(control_plane)
    # Its own control plane: a restart would disturb the session's shared one (and the
    # controller other tests run on it) for a while after.
    with ControlPlane(tmp_path / "restart", name="restart", binaries=shared.binaries) as cp:
        before = cp.pids
        cp.restart_apiserver()
        after = cp.pids
        assert after["kube-apiserver"] != before["kube-apiserver"]
        assert {k: v for k, v in after.items() if k != "kube-apiserver"} == {
            k: v for k, v in before.items() if k != "kube-apiserver"
        }
        assert cp.is_healthy()
        # The state survived in etcd, and kcm's watches reconnected: a new
        # namespace gets its default ServiceAccount from the controller manager.
        with make_client(cp.kubeconfig) as c:
            assert c.get(Namespace, "default").metadata is not None
            create_namespace(c, "after-restart")
        # Probes with a 2 s timeout, just after a restart: polled, not sampled once.
        eventually_blocking(
            lambda: all(cp.component_health().values()) or None, "all healthy", within=60
        )


def test_revive_starts_exited_components_again(
    control_plane: ControlPlane | ExternalCluster, tmp_path: Path
) -> None:
    shared = own_control_plane(control_plane)
    with ControlPlane(tmp_path / "revive", name="revive", binaries=shared.binaries) as cp:
        assert cp.revive() == []  # nothing exited: nothing started
        before = cp.pids
        for name in ("kube-scheduler", "kube-controller-manager"):
            os.kill(before[name], signal.SIGKILL)
        eventually_blocking(
            lambda: (
                all(n not in cp.pids for n in ("kube-scheduler", "kube-controller-manager")) or None
            ),
            "both gone",
            within=10,
        )
        revived = cp.revive()
        assert sorted((r.component, r.exit_code) for r in revived) == [
            ("kube-controller-manager", -signal.SIGKILL),
            ("kube-scheduler", -signal.SIGKILL),
        ]
        assert all(r.last_line for r in revived)  # what each said last, for the report
        after = cp.pids
        for name in ("kube-scheduler", "kube-controller-manager"):
            assert after[name] != before[name]
        assert after["kube-apiserver"] == before["kube-apiserver"]
        # The state file names the new processes: another process attaching finds them.
        attached = ControlPlane.attach(tmp_path / "revive")
        assert attached is not None and attached.pids == after
        eventually_blocking(
            lambda: all(cp.component_health().values()) or None, "all healthy", within=60
        )
        assert cp.revive() == []
    # Stopped: nothing is started again, whatever has exited.
    assert cp.revive() == []


def _processes_mentioning(workdir: Path) -> list[int]:
    found = []
    needle = str(workdir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def test_stop_leaves_no_processes(tmp_path: Path, kubeconfig: Path) -> None:
    # A second cluster beside the session's: ports must not clash.
    workdir = tmp_path / "second"
    with ControlPlane(workdir, name="second") as cp:
        assert cp.server not in kubeconfig.read_text()
        pids = cp.pids
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
        attached = ControlPlane.attach(workdir)
        assert attached is not None and attached.pids == pids
    assert not _processes_mentioning(workdir)
    assert ControlPlane.attach(workdir) is None


def test_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    workdir = tmp_path / "orphaned"
    script = f"""
import pathlib, time
from lws_localcluster.controlplane import ControlPlane
ControlPlane(pathlib.Path({str(workdir)!r})).start()
print("ready", flush=True)
time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        # The Python parent's own command line names the work dir too.
        assert len(set(_processes_mentioning(workdir)) - {proc.pid}) == 4
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    eventually_blocking(lambda: not _processes_mentioning(workdir), "children to die", within=10)
