"""The checked-in CRD is what the generator makes, and it is a structural schema."""

from __future__ import annotations

from typing import Any

import yaml

from leaderworkerset.api.disaggregatedset.crd import build_disaggregatedset_crd
from leaderworkerset.api.leaderworkerset.crd import CRD_FILE, build_crd, render_crd_yaml
from tests.toolkit.paths import REPO

ALLOWED_EXTENSIONS = {
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
}


def _version() -> dict[str, Any]:
    version: dict[str, Any] = build_crd()["spec"]["versions"][0]
    return version


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = _version()["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        found += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


def test_checked_in_crd_matches_generator() -> None:
    checked_in = (REPO / CRD_FILE).read_text()
    assert checked_in == render_crd_yaml(), (
        f"{CRD_FILE} is stale: run `lws crd generate --output {CRD_FILE}`"
    )


def test_schema_is_structural() -> None:
    for path, node in _walk(_schema()):
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node, path
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        assert not ("properties" in node and "additionalProperties" in node), path
        extensions = {k for k in node if k.startswith("x-")}
        assert extensions <= ALLOWED_EXTENSIONS, (path, extensions)


def test_pod_templates_are_fully_described() -> None:
    lwt = _schema()["properties"]["spec"]["properties"]["leaderWorkerTemplate"]
    for name in ("leaderTemplate", "workerTemplate"):
        pod_spec = lwt["properties"][name]["properties"]["spec"]
        assert pod_spec["required"] == ["containers"]
        container = pod_spec["properties"]["containers"]["items"]
        assert {"image", "env", "resources", "readinessProbe"} <= set(container["properties"])
        assert pod_spec["properties"]["containers"]["x-kubernetes-list-type"] == "map"
        requests = container["properties"]["resources"]["properties"]["requests"]
        assert requests["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert lwt["required"] == ["workerTemplate"]


def test_defaults_and_enums_as_upstream() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    assert spec["replicas"]["default"] == 1
    assert spec["startupPolicy"]["default"] == "LeaderCreated"
    assert spec["startupPolicy"]["enum"] == ["LeaderCreated", "LeaderReady"]
    lwt = spec["leaderWorkerTemplate"]["properties"]
    assert lwt["size"]["default"] == 1
    assert lwt["restartPolicy"]["default"] == "RecreateGroupOnPodRestart"
    config = spec["rolloutStrategy"]["properties"]["rollingUpdateConfiguration"]["properties"]
    assert (config["partition"]["default"], config["maxUnavailable"]["default"]) == (0, 1)
    assert config["maxSurge"]["default"] == 0
    assert spec["groupIdentity"]["enum"] == ["Ordinal", "Hash"]
    assert spec["groupReplacementPolicy"]["default"] == "PostTermination"


def test_subresources_names_and_columns() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == "leaderworkersets.leaderworkerset.x-k8s.io"
    assert crd["spec"]["names"]["shortNames"] == ["lws"]
    version = _version()
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.hpaPodSelector",
    }
    columns = [(col["name"], col["jsonPath"]) for col in version["additionalPrinterColumns"]]
    assert columns == [
        ("Ready", ".status.readyReplicas"),
        ("Desired", ".spec.replicas"),
        ("Up-to-date", ".status.updatedReplicas"),
        ("Identity", ".spec.groupIdentity"),
        ("Age", ".metadata.creationTimestamp"),
    ]


def test_rendered_yaml_parses_back() -> None:
    rendered = render_crd_yaml()
    assert yaml.safe_load(rendered.split("---\n", 1)[1]) == build_crd()


def test_scheduling_schema_as_upstream_982() -> None:
    scheduling = _schema()["properties"]["spec"]["properties"]["scheduling"]
    members = scheduling["properties"]
    assert set(members) == {
        "schedulingPolicy",
        "schedulingConstraints",
        "disruptionMode",
        "resourceClaims",
    }
    assert "default" not in scheduling and "required" not in scheduling
    policy = members["schedulingPolicy"]
    assert policy["x-kubernetes-validations"] == [
        {
            "rule": "!has(oldSelf.basic) || has(self.basic)",
            "message": "field basic is immutable once set",
        }
    ]
    basic = policy["properties"]["basic"]
    assert basic["type"] == "object" and "properties" not in basic
    assert basic["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "field is immutable"}
    ]
    gang = policy["properties"]["gang"]
    assert gang["required"] == ["minCount"]
    assert gang["properties"]["minCount"] == {
        "type": "integer",
        "format": "int32",
        "description": gang["properties"]["minCount"]["description"],
    }
    topology = members["schedulingConstraints"]["properties"]["topology"]
    assert topology["x-kubernetes-list-type"] == "atomic" and "maxItems" not in topology
    assert topology["items"]["required"] == ["key"]
    assert set(members["disruptionMode"]["properties"]) == {"single", "all"}
    claims = members["resourceClaims"]
    assert claims["maxItems"] == 4
    assert (claims["x-kubernetes-list-type"], claims["x-kubernetes-list-map-keys"]) == (
        "map",
        ["name"],
    )
    assert claims["items"]["required"] == ["name"]
    assert set(claims["items"]["properties"]) == {
        "name",
        "resourceClaimName",
        "resourceClaimTemplateName",
    }


def test_disaggregatedset_roles_carry_the_lws_scheduling_schema() -> None:
    """A role's groups may be gangs: its spec.scheduling is the LeaderWorkerSet's."""
    crd = build_disaggregatedset_crd()
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    role_spec = root["properties"]["spec"]["properties"]["roles"]["items"]["properties"]["spec"]
    lws_spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    ours = {k: v for k, v in role_spec["properties"]["scheduling"].items() if k != "description"}
    theirs = {k: v for k, v in lws_spec["properties"]["scheduling"].items() if k != "description"}
    assert ours == theirs
