"""The DisaggregatedSet and RoleScaler CRDs: the checked-in files are what the generator
makes, and the schemas are upstream's.

The DisaggregatedSet CRD is compared with upstream's v0.9.0 file (the last release the
Go module proxy serves), fetched at run time: the same structural schema, descriptions
aside, except for what v0.10.0 added and the later status.observedGeneration, listed
below. The RoleScaler kind is new in v0.10.0, so its CRD is checked against v0.10.0's
facts, written out here."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from leaderworkerset.api.disaggregatedset.crd import (
    DISAGGREGATEDSET_CRD_FILE,
    SCALER_CRD_FILE,
    build_disaggregatedset_crd,
    build_scaler_crd,
    render_disaggregatedset_crd_yaml,
    render_scaler_crd_yaml,
)
from leaderworkerset.api.leaderworkerset.crd import build_crd as lws_crd
from tests.toolkit.paths import REPO
from tests.toolkit.upstream_module import upstream_file

UPSTREAM_VERSION = "v0.9.0"
CRD_FILE_NAME = DISAGGREGATEDSET_CRD_FILE.rsplit("/", 1)[1]
ROLE = ("spec", "roles", "[]")
ROLE_SPEC = (*ROLE, "spec")
TEMPLATE = (*ROLE_SPEC, "leaderWorkerTemplate")
# Kubernetes' own types: upstream's come from controller-gen and its k8s.io/api, ours
# from the Kubernetes OpenAPI document (api/schemas), so they differ with the versions;
# only their outline is compared.
KUBERNETES_TYPES = [
    (*TEMPLATE, "leaderTemplate"),
    (*TEMPLATE, "workerTemplate"),
    (*TEMPLATE, "volumeClaimTemplates"),
    (*TEMPLATE, "persistentVolumeClaimRetentionPolicy"),
]
SLICES = {"type": "integer", "format": "int32", "default": 1, "minimum": 1, "maximum": 100}
PLACEMENT_POLICY = {
    "type": "object",
    "properties": {
        "topology": {"type": "string"},
        "type": {
            "type": "string",
            "default": "None",
            "enum": ["None", "ExclusiveSlice", "ExclusiveTopology"],
        },
    },
}
SCALING = {
    "type": "object",
    "properties": {"mode": {"type": "string", "default": "Static", "enum": ["Static", "External"]}},
}
V0_10_RULE = {
    "rule": "self.roles.filter(r, !has(r.scaling) || r.scaling.mode != 'External')"
    ".all(r, !has(r.spec.replicas) || r.spec.replicas == 0) || "
    "self.roles.filter(r, !has(r.scaling) || r.scaling.mode != 'External')"
    ".all(r, has(r.spec.replicas) && r.spec.replicas > 0)",
    "message": "replicas must be zero for all non-External roles or non-zero for all "
    "non-External roles",
}
# Everything v0.10.0 changed in the DisaggregatedSet schema since v0.9.0: (what, path,
# our value). Nothing else may differ.
V0_10_CHANGES = [
    ("added", ("spec", "placementPolicy"), PLACEMENT_POLICY),
    ("added", (*ROLE, "scaling"), SCALING),
    ("added", (*ROLE_SPEC, "replicas", "maximum"), 1_000_000),
    ("added", (*ROLE_SPEC, "replicas", "minimum"), 0),
    ("added", ("spec", "slices"), SLICES),
    ("changed", ("spec", "x-kubernetes-validations"), [V0_10_RULE]),
]
# Upstream's after v0.10.0 (#933): the generation the status describes, as the
# LeaderWorkerSet's status has it.
AFTER_V0_10 = [
    ("added", ("status", "observedGeneration"), {"type": "integer", "format": "int64"}),
]
# Ours, not upstream's: a role's Group Identity members, with the LeaderWorkerSet's enums
# and no default (so a set that does not use them is stored as upstream stores it).
GROUP_IDENTITY_MEMBERS = [
    ("added", (*ROLE_SPEC, "groupIdentity"), {"type": "string", "enum": ["Ordinal", "Hash"]}),
    (
        "added",
        (*ROLE_SPEC, "groupReplacementPolicy"),
        {"type": "string", "enum": ["PostTermination", "Immediate"]},
    ),
]

# Upstream #877's restart budget, in each role's template as in a LeaderWorkerSet's.
RESTART_BUDGET = [
    (
        "added",
        (*ROLE_SPEC, "leaderWorkerTemplate", "maxGroupRestarts"),
        {"type": "integer", "format": "int32", "minimum": 0},
    )
]


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _node(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = schema
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(item) for item in node]
    return node


def _outline(node: dict[str, Any]) -> dict[str, Any]:
    """What is compared of an embedded Kubernetes type: its type, its members and what
    it requires, one level down."""
    if node.get("type") == "array":
        return {"type": "array", "items": _outline(node["items"])}
    return {
        "type": node.get("type"),
        "members": sorted(node.get("properties", {})),
        "required": node.get("required"),
        "spec.required": node.get("properties", {}).get("spec", {}).get("required"),
    }


def _comparable(crd: dict[str, Any]) -> dict[str, Any]:
    out = _without_descriptions(copy.deepcopy(crd))
    out["metadata"].pop("annotations")  # provenance: controller-gen's version, or ours
    for path in KUBERNETES_TYPES:
        *parent, name = path
        holder = _node(_schema(out), tuple(parent))
        holder["properties"][name] = _outline(holder["properties"][name])
    return out


def _differences(
    old: Any, new: Any, path: tuple[str, ...] = ()
) -> list[tuple[str, tuple[str, ...], Any]]:
    """(added | removed | changed, schema path, new value), with schema paths written as
    in V0_10_CHANGES (properties and items folded into the path)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(old.keys() | new.keys()):
            step = path if key in ("properties",) else (*path, "[]" if key == "items" else key)
            if key not in old:
                found.append(("added", step, new[key]))
            elif key not in new:
                found.append(("removed", step, old[key]))
            elif key == "properties":
                found += _differences(old[key], new[key], path)
            else:
                found += _differences(old[key], new[key], step)
        return found
    return [] if old == new else [("changed", path, new)]


@pytest.fixture(scope="module")
def upstream_crd() -> dict[str, Any]:
    text = upstream_file(f"config/crd/bases/{CRD_FILE_NAME}", UPSTREAM_VERSION)
    crd: dict[str, Any] = yaml.safe_load(text)
    return crd


def test_disaggregatedset_schema_is_upstreams_plus_v0_10(upstream_crd: dict[str, Any]) -> None:
    ours = _comparable(build_disaggregatedset_crd())
    theirs = _comparable(upstream_crd)
    differences = _differences(_schema(theirs), _schema(ours))
    expected = V0_10_CHANGES + AFTER_V0_10 + GROUP_IDENTITY_MEMBERS + RESTART_BUDGET
    # Our third addition: a role's groups may be gangs (its LWS's spec.scheduling, #893).
    added_scheduling = [d for d in differences if d[1] == (*ROLE_SPEC, "scheduling")]
    assert [d[0] for d in added_scheduling] == ["added"]
    assert set(added_scheduling[0][2]["properties"]) == {
        "schedulingPolicy",
        "schedulingConstraints",
        "disruptionMode",
        "resourceClaims",
    }
    differences = [d for d in differences if d not in added_scheduling]
    assert sorted(differences, key=str) == sorted(expected, key=str)
    rest = {k: v for k, v in ours.items() if k != "spec"}
    assert rest == {k: v for k, v in theirs.items() if k != "spec"}
    ours["spec"]["versions"][0].pop("schema")
    theirs["spec"]["versions"][0].pop("schema")
    assert ours["spec"] == theirs["spec"]  # names, scope, version, subresources


def test_embedded_kubernetes_types_have_upstreams_outline(upstream_crd: dict[str, Any]) -> None:
    for path in KUBERNETES_TYPES:
        ours = _node(_schema(build_disaggregatedset_crd()), path)
        theirs = _node(_schema(upstream_crd), path)
        assert _outline(ours) == _outline(theirs), path


def test_roles_take_the_leaderworkerset_group_identity_enums_without_defaults() -> None:
    role_spec = _node(_schema(build_disaggregatedset_crd()), ROLE_SPEC)["properties"]
    lws_spec = _schema(lws_crd())["properties"]["spec"]["properties"]
    for member in ("groupIdentity", "groupReplacementPolicy"):
        assert "default" in lws_spec[member] and "default" not in role_spec[member]
        assert role_spec[member]["enum"] == lws_spec[member]["enum"]
    # The LeaderWorkerSet CRD itself keeps its defaults (the role's schema is a copy).
    assert lws_spec["groupIdentity"]["default"] == "Ordinal"


def test_role_scaler_crd_is_v0_10s() -> None:
    crd = build_scaler_crd()
    assert crd["metadata"]["name"] == "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"
    assert crd["spec"]["group"] == "disaggregatedset.x-k8s.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": "DisaggregatedSetRoleScaler",
        "listKind": "DisaggregatedSetRoleScalerList",
        "plural": "disaggregatedsetrolescalers",
        "singular": "disaggregatedsetrolescaler",
        "shortNames": ["dsrs"],
    }
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert version["additionalPrinterColumns"] == [
        {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Current", "type": "integer", "jsonPath": ".status.replicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def test_role_scaler_schema_is_v0_10s() -> None:
    schema = _without_descriptions(_schema(build_scaler_crd()))
    assert "required" not in schema
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["spec"] == {
        "type": "object",
        "required": ["replicas"],
        "properties": {
            "replicas": {"type": "integer", "format": "int32", "default": 0, "minimum": 0}
        },
    }
    status = schema["properties"]["status"]["properties"]
    assert status["replicas"] == {"type": "integer", "format": "int32"}
    assert status["selector"] == {"type": "string"}
    assert status["observedGeneration"] == {"type": "integer", "format": "int64"}
    conditions = status["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert conditions["items"]["required"] == [
        "lastTransitionTime",
        "message",
        "reason",
        "status",
        "type",
    ]


@pytest.mark.parametrize(
    "path,render",
    [
        (DISAGGREGATEDSET_CRD_FILE, render_disaggregatedset_crd_yaml),
        (SCALER_CRD_FILE, render_scaler_crd_yaml),
    ],
    ids=["disaggregatedsets", "disaggregatedsetrolescalers"],
)
def test_checked_in_crds_match_generator(path: str, render: Any) -> None:
    chart = f"charts/lws/crds/{path.rsplit('/', 1)[1]}"
    for checked_in in (path, chart):
        assert (REPO / checked_in).read_text() == render(), f"{checked_in} is stale: run `make crd`"


def test_kustomization_installs_every_crd() -> None:
    kustomization = yaml.safe_load((REPO / "config/crd/kustomization.yaml").read_text())
    assert {f"config/crd/{entry}" for entry in kustomization["resources"]} == {
        "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        DISAGGREGATEDSET_CRD_FILE,
        SCALER_CRD_FILE,
    }


@pytest.mark.parametrize("build", [build_disaggregatedset_crd, build_scaler_crd])
def test_rendered_yaml_parses_back(build: Any) -> None:
    render = {
        build_disaggregatedset_crd: render_disaggregatedset_crd_yaml,
        build_scaler_crd: render_scaler_crd_yaml,
    }[build]
    assert yaml.safe_load(render().split("---\n", 1)[1]) == build()
