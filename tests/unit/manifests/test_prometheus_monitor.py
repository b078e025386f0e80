"""The kustomize ServiceMonitor scrapes the secure metrics endpoint the manifests
deploy: the metrics Service's https port, over TLS, with a bearer token; the Role of
components/prometheus lets Prometheus discover that Service's endpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from leaderworkerset.controller_command import load_configuration
from tests.toolkit.paths import REPO
from tests.toolkit.render import Renderer

CONFIG = REPO / "config"
COMPONENT = CONFIG / "components" / "prometheus"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_monitor_targets_the_secure_metrics_service(renderer: Renderer) -> None:
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert component["resources"] == ["monitor.yaml", "role.yaml", "alerts.yaml"]
    overlay = yaml.safe_load((CONFIG / "prometheus" / "kustomization.yaml").read_text())
    assert overlay["components"] == ["../components/prometheus"]

    monitors = renderer.kustomize(CONFIG / "prometheus")
    (monitor,) = [o for (kind, _), o in monitors.items() if kind == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"

    installed = renderer.kustomize(CONFIG / "default")
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [
        o
        for (kind, _), o in installed.items()
        if kind == "Service" and selector.items() <= (o["metadata"].get("labels") or {}).items()
    ]
    assert [s["metadata"]["name"] for s in services] == ["lws-controller-manager-metrics-service"]
    assert services[0]["metadata"]["namespace"] == monitor["metadata"]["namespace"]
    (port,) = [p for p in services[0]["spec"]["ports"] if p["name"] == endpoint["port"]]

    deployment = installed[("Deployment", "lws-controller-manager")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    metrics_ports = [p["containerPort"] for p in container["ports"] if p["name"] == "metrics"]
    assert metrics_ports == [port["targetPort"]]
    # The manager binds metrics there by default, and serves them securely by default.
    assert load_configuration(None).metrics.bind_address == f":{port['targetPort']}"
    assert not any("--metrics-secure=false" in arg for arg in container.get("args") or [])


def test_prometheus_may_discover_the_metrics_endpoints() -> None:
    role, binding = _docs(COMPONENT / "role.yaml")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert {(s["namespace"], s["name"]) for s in binding["subjects"]} == {
        ("monitoring", "prometheus-k8s"),
        ("monitoring", "prometheus-operator"),
    }
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for needed in (("", "services"), ("", "endpoints"), ("discovery.k8s.io", "endpointslices")):
        assert {"get", "list", "watch"} <= granted[needed], needed
    # Discovery only: nothing that writes, nothing cluster-wide.
    assert all(verbs <= {"get", "list", "watch"} for verbs in granted.values())
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "lws-system"
