"""Upstream's own values files and kustomize overlays, rendered against our chart and
config/: they must be accepted and mean there what they mean in upstream's.

Upstream's files come from its module at the version hack/upstream-lws/go.mod pins
(fetched at run time, never kept here): its chart's values.yaml, and its
test/e2e/config overlay (what its e2e suite installs: config/default with the image
set by `kustomize edit set image controller=...` in config/manager and a patch of the
Deployment by upstream's original names). Upstream's test/e2e/config/certmanager needs
its e2e script's edits of upstream's own config/default, so it has no counterpart here;
config/certmanager is checked for any namespace instead.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.toolkit.render import CONFIG, Key, Obj, Renderer

DEPLOYMENT = ("Deployment", "lws-controller-manager")
WEBHOOK_SERVICE = ("Service", "lws-webhook-service")


def upstream_chart(upstream: Path) -> Path:
    return upstream / "charts" / "lws"


def upstream_values(upstream: Path) -> Path:
    return upstream_chart(upstream) / "values.yaml"


def deployment(objs: dict[Key, Obj]) -> Obj:
    (found,) = [o for (kind, _), o in objs.items() if kind == "Deployment"]
    return found


def manager(objs: dict[Key, Obj]) -> Obj:
    (container,) = deployment(objs)["spec"]["template"]["spec"]["containers"]
    return container


def metrics_service(objs: dict[Key, Obj]) -> Obj | None:
    found = [o for (kind, name), o in objs.items() if kind == "Service" and "metrics" in name]
    return found[0] if found else None


# Values given on top of upstream's values.yaml, as upstream documents them.
CASES: dict[str, Obj] = {
    "values.yaml": {},
    "Prometheus": {"enablePrometheus": True},
    "cert-manager and Prometheus": {"enableCertManager": True, "enablePrometheus": True},
    "a NodePort metrics Service": {"enablePrometheus": True, "service": {"type": "NodePort"}},
    "Volcano": {"gangSchedulingManagement": {"schedulerProvider": "volcano"}},
    "DisaggregatedSet": {"enableDisaggregatedSet": True},
}


@pytest.mark.parametrize("case", CASES)
def test_upstreams_values_mean_the_same_in_our_chart(
    renderer: Renderer, upstream: Path, case: str
) -> None:
    files = (upstream_values(upstream),)
    ours = renderer.helm_template(CASES[case], values_files=files)
    theirs = renderer.helm_template(CASES[case], chart=upstream_chart(upstream), values_files=files)

    for field in ("image", "imagePullPolicy", "resources"):
        assert manager(ours)[field] == manager(theirs)[field], field
    assert deployment(ours)["spec"]["replicas"] == deployment(theirs)["spec"]["replicas"]
    # service.port: the port the manager's webhook server is declared on.
    ports = [{p["name"]: p["containerPort"] for p in manager(o)["ports"]} for o in (ours, theirs)]
    assert ports[0]["webhook-server"] == ports[1]["webhook-server"]
    # The webhook Service: 443, forwarded to that port.
    for objs in (ours, theirs):
        spec = objs[WEBHOOK_SERVICE]["spec"]
        assert [(p["port"], p["targetPort"]) for p in spec["ports"]] == [(443, 9443)]
    # service.type: the metrics Service's type (upstream renders that Service only with
    # Prometheus; ours always).
    theirs_metrics, ours_metrics = metrics_service(theirs), metrics_service(ours)
    assert ours_metrics is not None
    if theirs_metrics is not None:
        assert ours_metrics["spec"]["type"] == theirs_metrics["spec"]["type"]
    want = (CASES[case].get("service") or {}).get("type", "ClusterIP")
    assert ours_metrics["spec"]["type"] == want
    pod = deployment(ours)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True


def set_image(kustomization: Path, name: str, image: str) -> None:
    """What `kustomize edit set image <name>=<image>` does to a kustomization.yaml: the
    `images:` entry of that name gets newName (and newTag), or is added."""
    data = yaml.safe_load(kustomization.read_text())
    new_name, _, new_tag = image.rpartition(":") if ":" in image else (image, "", "")
    entry: dict[str, Any] = {"name": name, "newName": new_name}
    if new_tag:
        entry["newTag"] = new_tag
    images = [i for i in data.get("images") or [] if i["name"] != name]
    data["images"] = [*images, entry]
    kustomization.write_text(yaml.safe_dump(data, sort_keys=False))


def test_upstreams_e2e_overlay_installs_ours(
    renderer: Renderer, upstream: Path, tmp_path: Path
) -> None:
    # The tree upstream's overlay expects: config/ (ours) three levels up.
    config = renderer.config_copy(tmp_path)
    shutil.copytree(upstream / "test" / "e2e" / "config", tmp_path / "test" / "e2e" / "config")
    set_image(config / "manager" / "kustomization.yaml", "controller", "example.com/lws:v1")
    installed = renderer.kustomize(tmp_path / "test" / "e2e" / "config")

    container = manager(installed)
    assert container["image"] == "example.com/lws:v1"
    assert container["imagePullPolicy"] == "IfNotPresent"  # upstream's patch, by its names
    # Everything else is config/default's.
    plain = renderer.kustomize(CONFIG / "default")
    assert set(installed) == set(plain)
    for field in ("image", "imagePullPolicy"):
        container.pop(field)
        manager(plain).pop(field, None)
    assert installed == plain


def uncomment_components(kustomization: Path) -> None:
    """Upstream's documented way to add Volcano's RBAC: uncomment `components:` in
    config/default/kustomization.yaml; ours has the same lines."""
    text = kustomization.read_text()
    text, found = re.subn(r"^# components:$", "components:", text, flags=re.MULTILINE)
    assert found == 1
    text = re.sub(r"^#   - \.\./components/", "  - ../components/", text, flags=re.MULTILINE)
    kustomization.write_text(text)


def test_volcano_and_prometheus_are_components(renderer: Renderer, tmp_path: Path) -> None:
    for name in ("volcano", "prometheus"):
        kustomization = yaml.safe_load(
            (CONFIG / "components" / name / "kustomization.yaml").read_text()
        )
        assert kustomization["kind"] == "Component", name
    config = renderer.config_copy(tmp_path)
    uncomment_components(config / "default" / "kustomization.yaml")
    plain = renderer.kustomize(CONFIG / "default")
    with_components = renderer.kustomize(config / "default")
    assert set(with_components) - set(plain) == {
        ("ClusterRole", "lws-volcano-role"),
        ("ClusterRoleBinding", "lws-volcano-rolebinding"),
        ("ServiceMonitor", "lws-controller-manager-metrics-monitor"),
        ("PrometheusRule", "lws-controller-alerts"),
        ("Role", "lws-prometheus-k8s"),
        ("RoleBinding", "lws-prometheus-k8s"),
    }
    assert {k: with_components[k] for k in plain} == plain


def test_components_follow_the_namespace_of_an_overlay(renderer: Renderer, tmp_path: Path) -> None:
    """An overlay of one's own: config/default in team-a with both Components."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(CONFIG, overlay)
    kustomization = {
        "namespace": "team-a",
        "resources": [f"{base}/default"],
        "components": [f"{base}/components/volcano", f"{base}/components/prometheus"],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    objs = renderer.kustomize(overlay)
    binding = objs[("ClusterRoleBinding", "lws-volcano-rolebinding")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "lws-controller-manager", "namespace": "team-a"}
    ]
    assert (
        objs[("ServiceMonitor", "lws-controller-manager-metrics-monitor")]["metadata"]["namespace"]
        == "team-a"
    )
    # Prometheus's own service accounts stay where kube-prometheus runs them.
    subjects = objs[("RoleBinding", "lws-prometheus-k8s")]["subjects"]
    assert {s["namespace"] for s in subjects} == {"monitoring"}
    assert "lws-system" not in renderer.kustomize_text(overlay)


def test_certmanager_overlay_works_in_any_namespace(renderer: Renderer, tmp_path: Path) -> None:
    config = renderer.config_copy(tmp_path)
    kustomization = config / "certmanager" / "kustomization.yaml"
    text, found = re.subn(
        r"^namespace: lws-system$", "namespace: team-a", kustomization.read_text(), flags=re.M
    )
    assert found == 1, "config/certmanager writes its namespace once"
    kustomization.write_text(text)

    assert "lws-system" not in renderer.kustomize_text(config / "certmanager")
    objs = renderer.kustomize(config / "certmanager")
    serving = objs[("Certificate", "lws-serving-cert")]
    assert serving["metadata"]["namespace"] == "team-a"
    assert serving["spec"]["dnsNames"] == [
        "lws-webhook-service.team-a.svc",
        "lws-webhook-service.team-a.svc.cluster.local",
    ]
    assert objs[("Certificate", "lws-metrics-cert")]["spec"]["dnsNames"] == [
        "lws-controller-manager-metrics-service.team-a.svc",
        "lws-controller-manager-metrics-service.team-a.svc.cluster.local",
    ]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (config_obj,) = [o for (k, _), o in objs.items() if k == kind]
        assert config_obj["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "team-a/lws-serving-cert"
        }
        for webhook in config_obj["webhooks"]:
            assert webhook["clientConfig"]["service"]["namespace"] == "team-a"
    # And as shipped, in lws-system.
    shipped = renderer.kustomize(CONFIG / "certmanager")
    assert shipped[("Certificate", "lws-serving-cert")]["spec"]["dnsNames"][0] == (
        "lws-webhook-service.lws-system.svc"
    )
