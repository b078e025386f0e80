"""values.schema.json: Helm refuses a value the chart does not know or one of the wrong
type, and accepts every value the chart documents (its own values.yaml, the values the
install tests use, upstream's values.yaml in test_upstream_install_files.py)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from leaderworkerset.api.config.types import Configuration, json_name
from leaderworkerset.api.config.validation import SUPPORTED_GANG_SCHEDULERS
from leaderworkerset.api.leaderworkerset.scheduling import KNOWN_FEATURE_GATES
from tests.toolkit.paths import REPO
from tests.toolkit.render import CHART, Renderer

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())

# Every value a user may set, at once, none of them a default.
EVERYTHING: dict[str, Any] = {
    "global": {"imageRegistry": "example.com"},
    "nameOverride": "leaders",
    "fullnameOverride": "my-lws",
    "image": {"manager": {"repository": "example.com/lws", "tag": "v9", "pullPolicy": "Always"}},
    "imagePullSecrets": [{"name": "registry"}],
    "replicaCount": 3,
    "podDisruptionBudget": {
        "enabled": True,
        "minAvailable": "50%",
        "unhealthyPodEvictionPolicy": "IfHealthyBudget",
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 2,
            "nodeTaintsPolicy": "Honor",
        }
    ],
    "podAnnotations": {"example.com/team": "ml"},
    "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 65532},
    "securityContext": {"readOnlyRootFilesystem": True},
    "resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "lws", "effect": "NoSchedule"}
    ],
    "affinity": {"nodeAffinity": {}},
    "priorityClassName": "system-cluster-critical",
    "service": {"type": "LoadBalancer", "port": 10250},
    "enableCertManager": True,
    "enablePrometheus": True,
    "enableDisaggregatedSet": True,
    "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
    "gangSchedulingManagement": {"schedulerProvider": "volcano"},
    "featureGates": {"WorkloadAwareScheduling": True},
    "logLevel": "debug",
    "managerConfig": {
        "clientConnection": {"qps": 100, "burst": 200},
        "leaderWorkerSetLimits": {"maxSize": 64},
    },
}


def test_every_value_in_values_yaml_is_in_the_schema() -> None:
    def paths(node: Any, schema: dict[str, Any], at: str) -> None:
        if not isinstance(node, dict) or schema.get("type") != "object":
            return
        known = schema.get("properties") or {}
        for key, value in node.items():
            assert key in known or schema.get("additionalProperties") is not False, f"{at}.{key}"
            if key in known:
                paths(value, known[key], f"{at}.{key}")

    paths(VALUES, SCHEMA, "")
    assert set(SCHEMA["properties"]) == set(VALUES) | {"global"}


def test_the_schema_follows_the_manager() -> None:
    """What the schema lists of the manager's Configuration is what the manager reads."""
    props = SCHEMA["properties"]
    wire_names = {json_name(f.name) for f in dataclasses.fields(Configuration)}
    assert set(props["managerConfig"]["properties"]) == wire_names
    provider = props["gangSchedulingManagement"]["properties"]["schedulerProvider"]
    assert set(provider["enum"]) == set(SUPPORTED_GANG_SCHEDULERS)
    assert set(props["featureGates"]["propertyNames"]["enum"]) == set(KNOWN_FEATURE_GATES)


def test_the_readme_lists_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    listed = set(re.findall(r"`([a-zA-Z]+)(?:\.[a-zA-Z.]+)?`", readme))
    assert set(VALUES) <= listed, set(VALUES) - listed


def test_everything_a_user_may_set_is_accepted(renderer: Renderer) -> None:
    objs = renderer.helm_template(EVERYTHING)
    assert ("PodDisruptionBudget", "my-lws-controller-manager") in objs
    renderer.helm("lint", "--strict", CHART)


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replicaCount": "two"}, "/replicaCount"),
        ({"replicaCount": -1}, "/replicaCount"),
        ({"unknownKey": True}, "'unknownKey' not allowed"),
        ({"image": {"manager": {"tag": 1.10}}}, "/image/manager/tag"),
        ({"image": {"manager": {"registry": "x"}}}, "'registry' not allowed"),
        ({"image": {"manager": {"pullPolicy": "Sometimes"}}}, "/image/manager/pullPolicy"),
        ({"service": {"type": "ExternalName"}}, "/service/type"),
        ({"service": {"port": "9443"}}, "/service/port"),
        ({"service": {"port": 70000}}, "/service/port"),
        ({"service": {"nodePort": 30000}}, "'nodePort' not allowed"),
        ({"enableCertManager": "yes"}, "/enableCertManager"),
        ({"resources": {"requests": {"memory": "lots"}}}, "/resources/requests/memory"),
        ({"resources": {"request": {"cpu": 1}}}, "'request' not allowed"),
        ({"tolerations": {"key": "x"}}, "/tolerations"),
        ({"nodeSelector": {"zone": 1}}, "/nodeSelector/zone"),
        ({"imagePullSecrets": ["registry"]}, "/imagePullSecrets/0"),
        ({"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}}, "/podDisruptionBudget"),
        (
            {"podDisruptionBudget": {"maxUnavailable": "half"}},
            "/podDisruptionBudget/maxUnavailable",
        ),
        ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "/topologySpreadConstraints/0"),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "Maybe"}
                ]
            },
            "/topologySpreadConstraints/0/whenUnsatisfiable",
        ),
        ({"gangSchedulingManagement": {"schedulerProvider": "kueue"}}, "/gangSchedulingManagement"),
        ({"featureGates": {"NoSuchGate": True}}, "invalid propertyName 'NoSuchGate'"),
        (
            {"featureGates": {"WorkloadAwareScheduling": "true"}},
            "/featureGates/WorkloadAwareScheduling",
        ),
        ({"logLevel": "verbose"}, "/logLevel"),
        ({"managerConfig": {"leaderElect": True}}, "'leaderElect' not allowed"),
        ({"grafanaDashboard": {"enable": True}}, "'enable' not allowed"),
    ],
)
def test_unknown_or_wrongly_typed_values_are_refused(
    renderer: Renderer, values: dict[str, Any], complaint: str
) -> None:
    error = renderer.helm_fails(values)
    assert "don't meet the specifications of the schema" in error, error
    assert complaint in error, error


def test_kube_version_is_the_oldest_supported(renderer: Renderer) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.34.0-0"
    assert "incompatible with Kubernetes v1.33" in renderer.helm_fails({}, kube_version="1.33.9")
    renderer.helm_template(extra=("--kube-version", "1.34.0"))
    # The version the tests run against (hack/controlplane) is inside the range.
    go_mod = (REPO / "hack" / "controlplane" / "go.mod").read_text()
    (tested,) = re.findall(r"^\s*k8s\.io/kubernetes v(\S+)", go_mod, re.MULTILINE)
    renderer.helm_template(extra=("--kube-version", tested))


def test_the_package_holds_the_chart_and_nothing_else(renderer: Renderer, tmp_path: Path) -> None:
    """.helmignore keeps editors' and tests' leftovers out; the README and the schema
    go in."""
    chart = tmp_path / "lws"
    shutil.copytree(CHART, chart)
    junk = ["templates/deployment.yaml.swp", ".idea/workspace.xml", "__pycache__/x.pyc", "a.orig"]
    for name in junk:
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text("x")
    renderer.helm("package", chart, "--destination", tmp_path)
    (archive,) = tmp_path.glob("lws-*.tgz")
    with tarfile.open(archive) as tar:
        names = {n.removeprefix("lws/") for n in tar.getnames()}
    assert {"Chart.yaml", "values.yaml", "values.schema.json", "README.md", ".helmignore"} <= names
    shipped = {p.relative_to(CHART).as_posix() for p in CHART.rglob("*") if p.is_file()}
    assert names == shipped
