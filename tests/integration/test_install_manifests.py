"""The install manifests against a real API server: the Helm chart (default and
non-default values) and the kustomize overlays (config/default, config/certmanager)
are rendered with the real tools and applied with a server-side dry run, and the
objects the two install paths produce are compared after the server has defaulted
them.

kubectl and helm come from hack/build-tools.sh (``make tools``). The cert-manager
and Prometheus operator CRDs are stubs (tests/integration/stub_crds), so their
custom objects are checked for kind, name and scope only.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from leaderworkerset.controller_command import load_configuration
from leaderworkerset.runtime.health import DEFAULT_METRICS_CERT_DIR
from tests.toolkit.install_tools import ensure_tools, helm_env, run_tool
from tests.toolkit.render import TEST_REPOSITORY

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "lws"
STUB_CRDS = Path(__file__).resolve().parent / "stub_crds"
NAMESPACE = "lws-system"
RELEASE = "lws"
CONFIG_KEY = "controller_manager_config.yaml"

Obj = dict[str, Any]
Key = tuple[str, str]

# Values a user of the upstream chart might set, plus ours; every switch flipped.
CUSTOM_VALUES: Obj = {
    "image": {"manager": {"repository": "example.com/lws", "tag": "v9", "pullPolicy": "Always"}},
    "replicaCount": 3,
    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    # Helm merges maps with the defaults, so every default key is given here.
    "podSecurityContext": {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "seccompProfile": {"type": "Unconfined"},
    },
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": False,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    },
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "lws", "effect": "NoSchedule"}
    ],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ctl"]}]}
                ]
            }
        }
    },
    "priorityClassName": "system-cluster-critical",
    "enableCertManager": True,
    "enablePrometheus": True,
    "gangSchedulingManagement": {"schedulerProvider": "volcano"},
    # As upstream's chart: the metrics Service's type, the webhook server's port.
    "service": {"type": "NodePort", "port": 9444},
    "logLevel": "debug",
    "managerConfig": {
        "clientConnection": {"qps": 100, "burst": 200},
        "leaderElection": {"leaseDuration": "30s"},
    },
}


@dataclass(frozen=True)
class Tools:
    folder: Path
    kubeconfig: Path
    helm_home: Path

    def run(self, tool: str, *args: str | Path, stdin: str | None = None) -> str:
        env = helm_env(self.helm_home, KUBECONFIG=str(self.kubeconfig))
        return run_tool(self.folder, tool, *args, env=env, stdin=stdin)

    def dry_run(self, manifests: str) -> dict[Key, Obj]:
        """What the API server would store for these manifests, by (kind, name)."""
        manifests = _apart_from_live_webhooks(manifests)
        out = self.run(
            "kubectl",
            "apply",
            "--server-side",
            "--dry-run=server",
            "--force-conflicts",
            "--field-manager=lws-install-test",
            "-o",
            "json",
            "-f",
            "-",
            stdin=manifests,
        )
        objs = _json_stream(out)
        for o in objs:
            if o["kind"] in WEBHOOK_KINDS:
                o["metadata"]["name"] = o["metadata"]["name"].removesuffix(DRY_RUN_SUFFIX)
        return {(o["kind"], o["metadata"]["name"]): o for o in objs}

    def helm_template(self, values: Obj | None = None) -> str:
        args: list[str | Path] = ["template", RELEASE, CHART, "--namespace", NAMESPACE]
        args += ["--include-crds", "--values", "-"]
        # The committed chart names no image (a release fills one in); values may.
        values = {"image": {"manager": {"repository": TEST_REPOSITORY}}, **(values or {})}
        return self.run("helm", *args, stdin=yaml.safe_dump(values))

    def kustomize(self, overlay: str) -> str:
        return self.run("kubectl", "kustomize", REPO / "config" / overlay)


WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
DRY_RUN_SUFFIX = "-install-test"


def _apart_from_live_webhooks(manifests: str) -> str:
    """The same manifests with the webhook configurations renamed.

    The session's controller has registered configurations of these names that
    point at a URL on this machine; a server-side apply would merge the chart's
    service reference into that clientConfig, and the API server rightly refuses
    a webhook with both.
    """
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    for doc in docs:
        if doc.get("kind") in WEBHOOK_KINDS:
            doc["metadata"]["name"] += DRY_RUN_SUFFIX
    return yaml.safe_dump_all(docs)


def _json_stream(text: str) -> list[Obj]:
    """kubectl prints one List, or one JSON document per object."""
    decoder = json.JSONDecoder()
    objs: list[Obj] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return objs
        doc, pos = decoder.raw_decode(text, pos)
        objs.extend(doc["items"] if doc.get("kind") == "List" else [doc])


@pytest.fixture(scope="module")
def tools(
    kubeconfig: Path,
    kube_client: Client,
    pytestconfig: pytest.Config,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Tools]:
    t = Tools(ensure_tools(pytestconfig), kubeconfig, tmp_path_factory.mktemp("helm"))
    # Namespaced objects are dry-run only if their namespace really exists.
    created = False
    try:
        kube_client.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
        created = True
    except ApiError as e:
        if e.status.code != 409:
            raise
    # A cluster given through LWS_TEST_KUBECONFIG may have the real CRDs: those stay.
    stubs = [
        path
        for path in sorted(STUB_CRDS.glob("*.yaml"))
        if not t.run("kubectl", "get", "--ignore-not-found", "-o", "name", "-f", path).strip()
    ]
    for path in stubs:
        t.run("kubectl", "apply", "--server-side", "-f", path)
        t.run("kubectl", "wait", "--for=condition=Established", "--timeout=60s", "-f", path)
    yield t
    for path in stubs:
        t.run("kubectl", "delete", "--wait=false", "--ignore-not-found", "-f", path)
    if created:
        kube_client.delete(Namespace, NAMESPACE)


@pytest.fixture(scope="module")
def chart_default(tools: Tools) -> dict[Key, Obj]:
    return tools.dry_run(tools.helm_template())


@pytest.fixture(scope="module")
def chart_custom(tools: Tools) -> dict[Key, Obj]:
    return tools.dry_run(tools.helm_template(CUSTOM_VALUES))


@pytest.fixture(scope="module")
def kustomize_default(tools: Tools) -> dict[Key, Obj]:
    return tools.dry_run(tools.kustomize("default"))


@pytest.fixture(scope="module")
def kustomize_certmanager(tools: Tools) -> dict[Key, Obj]:
    return tools.dry_run(tools.kustomize("certmanager"))


def test_helm_lint(tools: Tools) -> None:
    # helm lint turns `fail` into a note (it checks a chart, not an install), so the
    # bare chart lints clean and says why its install would fail
    # (tests/unit/manifests/test_image_version.py fails the render).
    env = helm_env(tools.helm_home, KUBECONFIG=str(tools.kubeconfig))
    bare = subprocess.run(
        [str(tools.folder / "helm"), "lint", "--strict", str(CHART)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert "image.manager.repository is empty" in bare.stdout + bare.stderr
    image = f"image.manager.repository={TEST_REPOSITORY}"
    tools.run("helm", "lint", "--strict", CHART, "--set", image)
    tools.run(
        "helm", "lint", "--strict", CHART, "--values", "-", stdin=yaml.safe_dump(CUSTOM_VALUES)
    )


def test_tool_versions(tools: Tools) -> None:
    """kubectl is the control plane's Kubernetes version; helm carries its release."""
    go_mod = (REPO / "hack" / "controlplane" / "go.mod").read_text()
    (k8s,) = re.findall(r"^\s*k8s\.io/kubernetes (v\S+)", go_mod, re.MULTILINE)
    version = json.loads(tools.run("kubectl", "version", "--client", "-o", "json"))
    assert version["clientVersion"]["gitVersion"] == k8s
    (helm,) = re.findall(
        r"^\s*helm\.sh/helm/v4 (v\S+)", (REPO / "hack/helm/go.mod").read_text(), re.MULTILINE
    )
    assert tools.run("helm", "version", "--template", "{{.Version}}") == helm


# --- what each install contains -------------------------------------------------

COMMON = {
    ("CustomResourceDefinition", "leaderworkersets.leaderworkerset.x-k8s.io"),
    ("CustomResourceDefinition", "disaggregatedsets.disaggregatedset.x-k8s.io"),
    ("CustomResourceDefinition", "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"),
    ("ServiceAccount", "lws-controller-manager"),
    ("ClusterRole", "lws-manager-role"),
    ("ClusterRoleBinding", "lws-manager-rolebinding"),
    ("ClusterRole", "lws-metrics-reader"),
    ("Role", "lws-leader-election-role"),
    ("RoleBinding", "lws-leader-election-rolebinding"),
    ("ConfigMap", "lws-manager-config"),
    ("Deployment", "lws-controller-manager"),
    # The webhooks fail closed: a drain leaves a replica serving them.
    ("PodDisruptionBudget", "lws-controller-manager"),
    ("Service", "lws-controller-manager-metrics-service"),
    ("Service", "lws-webhook-service"),
    ("MutatingWebhookConfiguration", "lws-mutating-webhook-configuration"),
    ("ValidatingWebhookConfiguration", "lws-validating-webhook-configuration"),
    # Shipped with or without cert-manager, as upstream does: switching never deletes
    # the certificate the running pods serve.
    ("Secret", "lws-webhook-server-cert"),
}
# With cert-manager, the manager only mounts what cert-manager writes, so the Role
# that lets it write the Secret goes.
INTERNAL_CERT = {
    ("Role", "lws-cert-secret-role"),
    ("RoleBinding", "lws-cert-secret-rolebinding"),
}
CERT_MANAGER = {
    ("Issuer", "lws-selfsigned-issuer"),
    ("Certificate", "lws-serving-cert"),
    ("Certificate", "lws-metrics-cert"),
}
METRICS_SERVICE_DNS = f"lws-controller-manager-metrics-service.{NAMESPACE}.svc"
# Helm leaves the namespace to `--create-namespace`.
NAMESPACE_OBJ = {("Namespace", NAMESPACE)}


def test_chart_default_objects(chart_default: dict[Key, Obj]) -> None:
    assert set(chart_default) == COMMON | INTERNAL_CERT
    (container,) = chart_default[("Deployment", "lws-controller-manager")]["spec"]["template"][
        "spec"
    ]["containers"]
    assert container["image"] == f"{TEST_REPOSITORY}:{_app_version()}"
    assert _manager_config(chart_default) == {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": True},
        "internalCertManagement": {"enable": True},
    }


def test_kustomize_objects(
    kustomize_default: dict[Key, Obj], kustomize_certmanager: dict[Key, Obj]
) -> None:
    assert set(kustomize_default) == COMMON | INTERNAL_CERT | NAMESPACE_OBJ
    assert set(kustomize_certmanager) == COMMON | CERT_MANAGER | NAMESPACE_OBJ
    assert _manager_config(kustomize_certmanager)["internalCertManagement"] == {"enable": False}
    _assert_cert_manager_wiring(kustomize_certmanager)


def test_chart_custom_values(chart_custom: dict[Key, Obj]) -> None:
    assert set(chart_custom) == COMMON | CERT_MANAGER | {
        ("ServiceMonitor", "lws-controller-manager-metrics-monitor"),
        ("PrometheusRule", "lws-controller-alerts"),
        ("Role", "lws-prometheus-k8s"),
        ("RoleBinding", "lws-prometheus-k8s"),
        ("ClusterRole", "lws-volcano-role"),
        ("ClusterRoleBinding", "lws-volcano-rolebinding"),
    }
    _assert_cert_manager_wiring(chart_custom)
    # With cert-manager, Prometheus verifies the metrics certificate.
    monitor = chart_custom[("ServiceMonitor", "lws-controller-manager-metrics-monitor")]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {
        "serverName": METRICS_SERVICE_DNS,
        "insecureSkipVerify": False,
        "ca": {"secret": {"name": "lws-metrics-server-cert", "key": "ca.crt"}},
    }
    metrics_service = chart_custom[("Service", "lws-controller-manager-metrics-service")]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        metrics_service["metadata"]["labels"].items()
    )
    assert _manager_config(chart_custom) == {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": True, "leaseDuration": "30s"},
        "internalCertManagement": {"enable": False},
        "gangSchedulingManagement": {"schedulerProvider": "volcano"},
        "webhook": {"port": 9444},
        "clientConnection": {"qps": 100, "burst": 200},
    }

    deployment = chart_custom[("Deployment", "lws-controller-manager")]["spec"]
    pod = deployment["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["replicas"] == 3
    assert container["image"] == "example.com/lws:v9"
    assert container["imagePullPolicy"] == "Always"
    assert "--zap-log-level=debug" in container["args"]
    assert container["resources"] == CUSTOM_VALUES["resources"]
    assert container["securityContext"] == CUSTOM_VALUES["securityContext"]
    assert pod["securityContext"] == CUSTOM_VALUES["podSecurityContext"]
    assert pod["nodeSelector"] == CUSTOM_VALUES["nodeSelector"]
    assert pod["tolerations"] == CUSTOM_VALUES["tolerations"]
    assert pod["affinity"] == CUSTOM_VALUES["affinity"]
    assert pod["priorityClassName"] == "system-cluster-critical"

    # The webhook Service stays on 443 (a ClusterIP) and forwards to service.port, where
    # the container declares its webhook server; service.type is the metrics Service's.
    service = chart_custom[("Service", "lws-webhook-service")]["spec"]
    assert service["type"] == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in service["ports"]] == [(443, 9444)]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook-server": 9444, "metrics": 8443}
    assert metrics_service["spec"]["type"] == "NodePort"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in _webhook_config(chart_custom, kind)["webhooks"]:
            assert webhook["clientConfig"]["service"]["port"] == 443


# --- the two install paths agree -----------------------------------------------


@pytest.mark.parametrize("overlay", ["default", "certmanager"])
def test_chart_equals_kustomize(
    overlay: str,
    tools: Tools,
    kustomize_default: dict[Key, Obj],
    kustomize_certmanager: dict[Key, Obj],
) -> None:
    # kustomize always has the DisaggregatedSet webhook entry (as upstream's
    # config/webhook); the chart adds it under enableDisaggregatedSet (as upstream's).
    values: dict[str, Any] = {"enableDisaggregatedSet": True}
    if overlay == "default":
        kustomized = kustomize_default
    else:
        # Only the cert-manager switch differs from the defaults.
        values["enableCertManager"] = True
        kustomized = kustomize_certmanager
    chart = tools.dry_run(tools.helm_template(values))
    for key in sorted(set(chart) & set(kustomized)):
        assert _comparable(chart[key]) == _comparable(kustomized[key]), key


# Set by the chart only: Helm's labels, the config checksum that rolls the pods,
# and values (image) that the kustomize manifests leave to `kustomize edit`.
def _comparable(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    kind = obj["kind"]
    meta = obj["metadata"]
    kept: Obj = {"name": meta["name"], "namespace": meta.get("namespace")}
    kept["annotations"] = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("cert-manager.io/")
    }
    obj["metadata"] = kept
    if kind == "Deployment":
        template = obj["spec"]["template"]
        template["metadata"] = {}
        for container in template["spec"]["containers"]:
            container.pop("image")
            container.pop("imagePullPolicy")
    if kind == "Service":
        # Cluster IPs are allocated per dry run.
        obj["spec"] = {k: obj["spec"][k] for k in ("ports", "selector", "type")}
    if kind == "ConfigMap" and CONFIG_KEY in obj.get("data", {}):
        obj["data"][CONFIG_KEY] = yaml.safe_load(obj["data"][CONFIG_KEY])
    obj.pop("status", None)
    return obj


def _app_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def _manager_config(objs: dict[Key, Obj]) -> Obj:
    """The manager's Configuration, after checking that the manager accepts it."""
    text = objs[("ConfigMap", "lws-manager-config")]["data"][CONFIG_KEY]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, CONFIG_KEY)
        path.write_text(text)
        load_configuration(path)
    data: Obj = yaml.safe_load(text)
    return data


def _webhook_config(objs: dict[Key, Obj], kind: str) -> Obj:
    name = "lws-mutating" if kind.startswith("Mutating") else "lws-validating"
    return objs[(kind, f"{name}-webhook-configuration")]


def _assert_cert_manager_wiring(objs: dict[Key, Obj]) -> None:
    certificate = objs[("Certificate", "lws-serving-cert")]
    assert certificate["spec"]["secretName"] == "lws-webhook-server-cert"
    assert certificate["spec"]["issuerRef"]["name"] == "lws-selfsigned-issuer"
    assert certificate["spec"]["dnsNames"][0] == f"lws-webhook-service.{NAMESPACE}.svc"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = _webhook_config(objs, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/lws-serving-cert"
    pod = objs[("Deployment", "lws-controller-manager")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cert"]["secret"] == {
        "secretName": "lws-webhook-server-cert",
        "defaultMode": 420,
    }
    assert _manager_config(objs)["internalCertManagement"] == {"enable": False}

    # The metrics certificate names the metrics Service and is mounted where the
    # manager's metrics server looks for one.
    metrics_cert = objs[("Certificate", "lws-metrics-cert")]["spec"]
    assert metrics_cert["secretName"] == "lws-metrics-server-cert"
    assert metrics_cert["issuerRef"]["name"] == "lws-selfsigned-issuer"
    assert metrics_cert["dnsNames"] == [METRICS_SERVICE_DNS, METRICS_SERVICE_DNS + ".cluster.local"]
    assert volumes["metrics-cert"]["secret"]["secretName"] == "lws-metrics-server-cert"
    assert {i["path"] for i in volumes["metrics-cert"]["secret"]["items"]} >= {"tls.crt", "tls.key"}
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["metrics-cert"] == str(DEFAULT_METRICS_CERT_DIR)


# --- the manager's pod under the restricted Pod Security Standard ----------------------

ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def restricted_namespace(tools: Tools, kube_client: Client) -> Iterator[str]:
    """A namespace enforcing `restricted` (latest), with the manager's ServiceAccount,
    without which the pod would be refused for another reason."""
    name = f"lws-psa-{secrets.token_hex(3)}"
    kube_client.create(Namespace(metadata=ObjectMeta(name=name, labels={ENFORCE: "restricted"})))
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "lws-controller-manager"},
    }
    tools.run("kubectl", "apply", "-n", name, "-f", "-", stdin=json.dumps(sa))
    yield name
    kube_client.delete(Namespace, name)


def _manager_pod(objs: dict[Key, Obj], namespace: str) -> Obj:
    """The pod the manager's ReplicaSet would create, as the Deployment templates it."""
    template = objs[("Deployment", "lws-controller-manager")]["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": "lws-psa-check", "namespace": namespace},
        "spec": template["spec"],
    }


def _pod_admitted(tools: Tools, pod: Obj) -> tuple[bool, str]:
    """A server-side dry run of creating `pod`: every admission plugin, PSA among them,
    runs as for a real create; nothing is stored."""
    try:
        tools.run("kubectl", "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod))
    except pytest.fail.Exception as exc:  # run_tool fails the test with kubectl's stderr
        return False, str(exc)
    return True, ""


def test_the_manager_pod_passes_restricted(
    tools: Tools,
    restricted_namespace: str,
    chart_default: dict[Key, Obj],
    kustomize_default: dict[Key, Obj],
    kustomize_certmanager: dict[Key, Obj],
) -> None:
    for install, objs in (
        ("helm template", chart_default),
        ("config/default", kustomize_default),
        ("config/certmanager", kustomize_certmanager),
    ):
        admitted, why = _pod_admitted(tools, _manager_pod(objs, restricted_namespace))
        assert admitted, f"{install}: {why}"
    # The shipped namespace enforces it (Helm's --create-namespace labels nothing).
    for objs in (kustomize_default, kustomize_certmanager):
        assert objs[("Namespace", NAMESPACE)]["metadata"]["labels"][ENFORCE] == "restricted"
    # The check refuses what restricted refuses: the same pod, unconfined.
    pod = _manager_pod(chart_default, restricted_namespace)
    pod["spec"]["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    admitted, why = _pod_admitted(tools, pod)
    assert not admitted and "violates PodSecurity" in why, why
