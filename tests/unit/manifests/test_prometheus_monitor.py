"""The kustomize ServiceMonitor scrapes the secure metrics endpoint the manifests
deploy: the metrics Service's https port, over TLS, with a bearer token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from leaderworkerset.controller_command import load_configuration
from tests.toolkit.paths import REPO

CONFIG = REPO / "config"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_monitor_targets_the_secure_metrics_service() -> None:
    kustomization = yaml.safe_load((CONFIG / "prometheus" / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["monitor.yaml"]
    (monitor,) = _docs(CONFIG / "prometheus" / "monitor.yaml")
    assert monitor["kind"] == "ServiceMonitor"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"

    manager_docs = _docs(CONFIG / "manager" / "manager.yaml")
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [
        d
        for d in manager_docs + _docs(CONFIG / "webhook" / "service.yaml")
        if d["kind"] == "Service"
        and selector.items() <= ((d["metadata"].get("labels") or {}).items())
    ]
    assert [s["metadata"]["name"] for s in services] == ["lws-controller-manager-metrics-service"]
    (port,) = [p for p in services[0]["spec"]["ports"] if p["name"] == endpoint["port"]]

    (deployment,) = [d for d in manager_docs if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    metrics_ports = [p["containerPort"] for p in container["ports"] if p["name"] == "metrics"]
    assert metrics_ports == [port["targetPort"]]
    # The manager binds metrics there by default, and serves them securely by default.
    assert load_configuration(None).metrics.bind_address == f":{port['targetPort']}"
    assert not any("--metrics-secure=false" in arg for arg in container.get("args") or [])
