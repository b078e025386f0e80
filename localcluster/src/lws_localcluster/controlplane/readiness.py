"""Whether each component serves: etcd's /health, the API server's /readyz as the
cluster admin, kube-controller-manager's controllers built, kube-scheduler's /readyz;
and the components' own endpoints (metrics) that a caller may read."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from lws_localcluster.controlplane.components import (
    APISERVER,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    Ports,
)


def admin_ssl(pki_dir: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
    ctx.load_cert_chain(pki_dir / "admin.crt", pki_dir / "admin.key")
    return ctx


def api_get(server: str, pki_dir: Path, path: str, *, timeout: float = 5.0) -> bytes:
    """GET ``path`` from the API server at ``server`` as the cluster admin."""
    with urllib.request.urlopen(server + path, context=admin_ssl(pki_dir), timeout=timeout) as resp:
        body: bytes = resp.read()
        return body


def apiserver_ready(server: str, pki_dir: Path) -> bool:
    try:
        return api_get(server, pki_dir, "/readyz", timeout=2.0) == b"ok"
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


def etcd_healthy(ports: Ports) -> bool:
    try:
        with urllib.request.urlopen(ports.etcd_endpoint + "/health", timeout=2.0) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def local_get(port: int, path: str) -> bytes | None:
    """GET from kcm or the scheduler; None unless 200.

    They serve a self-signed certificate of their own, and the health
    paths need no credentials, so nothing is verified here.
    """
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        url = f"https://127.0.0.1:{port}{path}"
        with urllib.request.urlopen(url, context=ctx, timeout=2.0) as resp:
            body: bytes = resp.read()
            return body if resp.status == 200 else None
    except OSError:
        return None


def controller_manager_ready(ports: Ports) -> bool:
    # /healthz answers as soon as kcm listens, but its controllers are
    # built later, and an API server restart during that phase makes kcm
    # exit. The per-controller checks appear once they are all built.
    body = local_get(ports.controller_manager, "/healthz?verbose")
    return body is not None and b"garbage-collector-controller ok" in body


def scheduler_ready(ports: Ports) -> bool:
    return local_get(ports.scheduler, "/readyz") is not None


def component_metrics(ports: Ports, component: str) -> str | None:
    """kube-controller-manager's or kube-scheduler's /metrics, None if unanswered."""
    body = local_get(ports.secure_port(component), "/metrics")
    return None if body is None else body.decode()


def component_health(server: str, pki_dir: Path, ports: Ports) -> dict[str, bool]:
    return {
        ETCD: etcd_healthy(ports),
        APISERVER: apiserver_ready(server, pki_dir),
        CONTROLLER_MANAGER: controller_manager_ready(ports),
        SCHEDULER: scheduler_ready(ports),
    }
