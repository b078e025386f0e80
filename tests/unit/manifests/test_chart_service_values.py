"""`service.type` and `service.port` mean what they mean in upstream's chart: the type
of the metrics Service, and the port the manager serves its webhooks on. The webhook
Service stays on 443, as upstream's, and forwards to that port."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.toolkit.render import Key, Obj, Renderer

WEBHOOK_SERVICE = ("Service", "lws-webhook-service")
METRICS_SERVICE = ("Service", "lws-controller-manager-metrics-service")
DEPLOYMENT = ("Deployment", "lws-controller-manager")
CONFIG_KEY = "controller_manager_config.yaml"
WEBHOOK_CONFIGS = (
    ("MutatingWebhookConfiguration", "lws-mutating-webhook-configuration"),
    ("ValidatingWebhookConfiguration", "lws-validating-webhook-configuration"),
)


def container_ports(objs: dict[Key, Obj]) -> dict[str, int]:
    (container,) = objs[DEPLOYMENT]["spec"]["template"]["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in container["ports"]}


def configuration(objs: dict[Key, Obj]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        objs[("ConfigMap", "lws-manager-config")]["data"][CONFIG_KEY]
    )
    return data


def assert_webhooks_reach(objs: dict[Key, Obj], port: int) -> None:
    """The API server calls lws-webhook-service on 443 (no port given: the default), and
    the Service forwards to the manager's webhook-server port."""
    spec = objs[WEBHOOK_SERVICE]["spec"]
    assert "type" not in spec  # ClusterIP, whatever service.type says
    assert [(p["port"], p["targetPort"]) for p in spec["ports"]] == [(443, port)]
    assert container_ports(objs)["webhook-server"] == port
    for key in WEBHOOK_CONFIGS:
        for webhook in objs[key]["webhooks"]:
            assert "port" not in webhook["clientConfig"]["service"], key


def test_defaults_are_upstreams(renderer: Renderer) -> None:
    objs = renderer.helm_template()
    assert objs[METRICS_SERVICE]["spec"]["type"] == "ClusterIP"
    assert_webhooks_reach(objs, 9443)
    assert container_ports(objs)["metrics"] == 8443
    # The manager's default port: nothing written.
    assert "webhook" not in configuration(objs)


def test_service_type_is_the_metrics_services_and_port_the_webhook_servers(
    renderer: Renderer,
) -> None:
    objs = renderer.helm_template({"service": {"type": "NodePort", "port": 10250}})
    assert objs[METRICS_SERVICE]["spec"]["type"] == "NodePort"
    assert_webhooks_reach(objs, 10250)
    assert configuration(objs)["webhook"] == {"port": 10250}


def test_manager_config_webhook_port_wins(renderer: Renderer) -> None:
    """managerConfig is merged last into the Configuration, so the ports follow it."""
    objs = renderer.helm_template(
        {"service": {"port": 9444}, "managerConfig": {"webhook": {"port": 9555}}}
    )
    assert configuration(objs)["webhook"] == {"port": 9555}
    assert_webhooks_reach(objs, 9555)


@pytest.mark.parametrize("port", [8443, 8081])
def test_a_port_the_manager_uses_for_something_else_is_refused(
    renderer: Renderer, port: int
) -> None:
    error = renderer.helm_fails({"service": {"port": port}})
    assert f"service.port {port} is the manager's metrics or health port" in error


def test_a_privileged_port_needs_the_capability(renderer: Renderer) -> None:
    """service.port 443 was this chart's webhook Service port; kept in a values file, it
    would now be the manager's listening port, which a non-root process without
    NET_BIND_SERVICE cannot bind: refused with a message that says so."""
    error = renderer.helm_fails({"service": {"port": 443}})
    assert "no longer the webhook Service's (always 443)" in error
    allowed = {
        "service": {"port": 443},
        "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
    }
    assert_webhooks_reach(renderer.helm_template(allowed), 443)
