"""Our install manifests name, label and select like upstream's, so an upstream install
can be upgraded to ours in place (and back).

Upstream's chart and config/ come from the module sigs.k8s.io/lws at the version
hack/upstream-lws/go.mod pins, fetched from the Go module proxy at run time (cached,
checked against go.sum). Both charts are rendered with the same release name and
values, and upstream's config/default is compared with ours. `helm upgrade` keeps an
object only if it has the same kind and name, and a Deployment only if its selector is
unchanged; objects that only upstream renders are deleted by the upgrade, so they are
exactly the list documented in docs/operations.md ("Migrating a Helm release from
upstream").

Needs helm and kubectl (hack/build-tools.sh), no cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.toolkit import upstream_module
from tests.toolkit.install_tools import ensure_tools, helm_env, run_tool
from tests.toolkit.paths import REPO
from tests.toolkit.render import TEST_REPOSITORY

NAMESPACE = "lws-system"
Obj = dict[str, Any]
Key = tuple[str, str]

# Values given to both charts (keys both know); each case is rendered for every release.
VALUE_CASES: dict[str, Obj] = {
    "defaults": {},
    "cert-manager and Prometheus": {"enableCertManager": True, "enablePrometheus": True},
    "nameOverride": {"nameOverride": "leaders"},
    "fullnameOverride": {"fullnameOverride": "my-controller"},
    "upstream-only switches": {
        "enableDisaggregatedSet": True,
        "gangSchedulingManagement": {"schedulerProvider": "volcano"},
    },
}
# "lws" holds the chart name (full name "lws"); the others are prefixed.
RELEASES = ("lws", "team-a", "my-lws")


def fullname(release: str, values: Obj) -> str:
    """What both charts use as the prefix of their release-named objects."""
    if values.get("fullnameOverride"):
        return str(values["fullnameOverride"])
    name = values.get("nameOverride") or "lws"
    return release if name in release else f"{release}-{name}"


def only_upstream(release: str, values: Obj) -> set[Key]:
    """The objects upstream's chart renders and ours does not (docs/operations.md)."""
    full = fullname(release, values)
    # Our manager ClusterRole holds the TokenReview and SubjectAccessReview rules.
    objects = {
        ("ClusterRole", f"{full}-proxy-role"),
        ("ClusterRoleBinding", f"{full}-proxy-rolebinding"),
    }
    if not values.get("enablePrometheus"):
        # Upstream renders Prometheus's Role whatever enablePrometheus says.
        objects |= {("Role", f"{full}-prometheus-k8s"), ("RoleBinding", f"{full}-prometheus-k8s")}
    return objects


# Upstream's config/default (kubectl kustomize) against ours.
# Our lws-system enforces the restricted Pod Security Standard, which the manager's pod
# passes (docs/security.md); upstream's Namespace carries no pod-security label.
ONLY_OURS_LABELS = {
    ("Namespace", "lws-system"): {"pod-security.kubernetes.io/enforce": "restricted"},
}
ONLY_UPSTREAM_KUSTOMIZE = {
    ("ClusterRole", "lws-proxy-role"),
    ("ClusterRoleBinding", "lws-proxy-rolebinding"),
    # Binds lws-metrics-reader to the manager's own ServiceAccount, which never scrapes.
    ("ClusterRoleBinding", "lws-metrics-reader-rolebinding"),
}


@dataclass(frozen=True)
class Renderer:
    tools: Path
    helm_home: Path
    upstream: Path  # the extracted module: charts/lws and config/ under it

    def helm(self, chart: Path, release: str, values: Obj) -> dict[Key, Obj]:
        # Ours names no image until a release fills one in; both get the same one.
        values = {"image": {"manager": {"repository": TEST_REPOSITORY}}, **values}
        out = run_tool(
            self.tools,
            "helm",
            "template",
            release,
            chart,
            "--namespace",
            NAMESPACE,
            "--values",
            "-",
            env=helm_env(self.helm_home),
            stdin=yaml.safe_dump(values),
        )
        return _by_key(out)

    def kustomize(self, folder: Path) -> dict[Key, Obj]:
        out = run_tool(self.tools, "kubectl", "kustomize", folder, env=helm_env(self.helm_home))
        return _by_key(out)


def _by_key(manifests: str) -> dict[Key, Obj]:
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.fixture(scope="module")
def renderer(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Renderer]:
    folder = tmp_path_factory.mktemp("upstream")
    try:
        upstream_module.extract("charts/lws", folder)
        upstream_module.extract("config", folder)
    except upstream_module.ProxyUnreachableError as exc:
        pytest.skip(f"upstream's manifests cannot be fetched: {exc}")
    yield Renderer(ensure_tools(pytestconfig), tmp_path_factory.mktemp("helm"), folder)


def _deployment(objs: dict[Key, Obj]) -> Obj:
    (deployment,) = [o for (kind, _), o in objs.items() if kind == "Deployment"]
    return deployment


def _pod_selection(objs: dict[Key, Obj]) -> tuple[Obj, Obj]:
    spec = _deployment(objs)["spec"]
    return spec["selector"], spec["template"]["metadata"]["labels"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", VALUE_CASES)
def test_chart_names_and_selectors_are_upstreams(
    renderer: Renderer, release: str, case: str
) -> None:
    values = VALUE_CASES[case]
    ours = renderer.helm(REPO / "charts" / "lws", release, values)
    theirs = renderer.helm(renderer.upstream / "charts" / "lws", release, values)

    # The upgrade keeps the Deployment, and its pods keep being selected.
    assert _pod_selection(ours) == _pod_selection(theirs)
    full = fullname(release, values)
    assert _deployment(ours)["metadata"]["name"] == f"{full}-controller-manager"
    # An object renamed on either side would show up here, as only upstream's.
    assert set(theirs) - set(ours) == only_upstream(release, values)

    pod_labels = _pod_selection(ours)[1]
    for key in sorted(set(ours) & set(theirs)):
        labels = ours[key]["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == release, key
        for name in ("app.kubernetes.io/name", "app.kubernetes.io/managed-by", "control-plane"):
            if name in (theirs[key]["metadata"].get("labels") or {}):
                assert labels.get(name) == theirs[key]["metadata"]["labels"][name], (key, name)
    for (kind, name), obj in ours.items():
        if kind == "Service":
            # Every Service selects the manager's pods, and only through their labels.
            assert obj["spec"]["selector"].items() <= pod_labels.items(), name


def test_name_overrides_rename_like_upstream(renderer: Renderer) -> None:
    """nameOverride and fullnameOverride move our names and the name label as they
    move upstream's (the parametrized test checks the whole sets)."""
    for values, deployment, name_label in (
        ({}, "team-a-lws-controller-manager", "lws"),
        ({"nameOverride": "leaders"}, "team-a-leaders-controller-manager", "leaders"),
        ({"fullnameOverride": "my-controller"}, "my-controller-controller-manager", "lws"),
    ):
        for chart in (REPO / "charts" / "lws", renderer.upstream / "charts" / "lws"):
            objs = renderer.helm(chart, "team-a", values)
            assert _deployment(objs)["metadata"]["name"] == deployment, (chart, values)
            assert _pod_selection(objs)[1]["app.kubernetes.io/name"] == name_label


def test_kustomize_default_is_upstreams(renderer: Renderer) -> None:
    ours = renderer.kustomize(REPO / "config" / "default")
    theirs = renderer.kustomize(renderer.upstream / "config" / "default")
    assert _pod_selection(ours) == _pod_selection(theirs)
    assert set(theirs) - set(ours) == ONLY_UPSTREAM_KUSTOMIZE
    for key in sorted(set(ours) & set(theirs)):
        app_labels = [
            {k: v for k, v in (objs[key]["metadata"].get("labels") or {}).items() if "/" in k}
            for objs in (ours, theirs)
        ]
        assert app_labels[0] == {**app_labels[1], **ONLY_OURS_LABELS.get(key, {})}, key
        if key[0] == "Service":
            assert ours[key]["spec"]["selector"] == theirs[key]["spec"]["selector"], key
