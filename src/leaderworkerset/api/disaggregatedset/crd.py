"""The DisaggregatedSet and DisaggregatedSetRoleScaler CRDs, generated from the model.

Built like the LeaderWorkerSet CRD (`api.leaderworkerset.crd`): the schema comes from
the FieldSpecs of `types.py` and the embedded Kubernetes types from Kubernetes'
OpenAPI document. Names, printer columns and subresources are upstream's v0.10.0
ones. Each role embeds the LeaderWorkerSet spec: upstream's, plus our Group Identity
members (`groupIdentity`, `groupReplacementPolicy`) with the LeaderWorkerSet's enums
but without its schema defaults, so that a set which does not use them is stored as
upstream's CRD stores it (the LeaderWorkerSet webhook defaults them on the role's
LeaderWorkerSets). A role may also carry `scheduling` (upstream's roles cannot, #893):
each of the role's groups is then a gang, as in a LeaderWorkerSet.

The rendered YAML lives in config/crd/bases/ and charts/lws/crds/ (`make crd`); a
unit test fails when either is stale.
"""

from __future__ import annotations

from typing import Any

import yaml

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.types import (
    DisaggregatedSet,
    DisaggregatedSetRoleScaler,
)
from leaderworkerset.api.leaderworkerset import constants as lws
from leaderworkerset.api.leaderworkerset.crd import KUBERNETES_SCHEMA_VERSION, model_schema

DISAGGREGATEDSET_CRD_FILE = f"config/crd/bases/{c.GROUP}_{c.PLURAL}.yaml"
SCALER_CRD_FILE = f"config/crd/bases/{c.GROUP}_{c.SCALER_PLURAL}.yaml"
# LeaderWorkerSet spec members that are ours, not upstream's (Group Identity).
PROJECT_ONLY_LWS_MEMBERS = ("groupIdentity", "groupReplacementPolicy")
# LeaderWorkerSet spec members that are upstream's but not in upstream's roles (its
# DisaggregatedSet CRD predates them); ours carry them, described for a role.
ROLE_MEMBERS_BEYOND_UPSTREAM = ("scheduling",)
_ROLE_MEMBER_DESCRIPTIONS = {
    "scheduling": (
        "Workload-Aware Scheduling of the role's groups, as a LeaderWorkerSet's "
        "spec.scheduling: each group of the role is a Kubernetes PodGroup, placed whole or "
        "not at all. Not in upstream's DisaggregatedSet API (its #893)."
    ),
    "groupIdentity": (
        "How the role's groups are named and which controller manages its leaders: Ordinal "
        "(a leader StatefulSet) or Hash (a leader Deployment; scale-down sheds unhealthy "
        "groups first). Absent means Ordinal. Not part of upstream's API. Changing it makes "
        "a new revision: the role's new LeaderWorkerSets get the new value."
    ),
    "groupReplacementPolicy": (
        "When a replacement group may schedule: PostTermination (absent) waits until the "
        "group it replaces is gone; Immediate does not wait (Hash only). Not part of "
        "upstream's API. Changing it makes a new revision."
    ),
}


def build_disaggregatedset_crd() -> dict[str, Any]:
    root = _root_schema(DisaggregatedSet)
    root["description"] = (
        "DisaggregatedSet runs several roles (prefill, decode, ...), each a LeaderWorkerSet "
        "template, as one workload: one LeaderWorkerSet per slice, revision and role, rolled "
        "out together so that the roles keep their ratio."
    )
    role = root["properties"]["spec"]["properties"]["roles"]["items"]
    members = role["properties"]["spec"]["properties"]
    for member in ROLE_MEMBERS_BEYOND_UPSTREAM:
        members[member]["description"] = _ROLE_MEMBER_DESCRIPTIONS[member]
    for member in PROJECT_ONLY_LWS_MEMBERS:
        del members[member]["default"]
        members[member]["description"] = _ROLE_MEMBER_DESCRIPTIONS[member]
    names = {"kind": c.KIND, "listKind": c.LIST_KIND, "plural": c.PLURAL, "singular": c.SINGULAR}
    version = _version(root, subresources={"status": {}})
    return _crd(c.CRD_NAME, names, version)


def build_scaler_crd() -> dict[str, Any]:
    root = _root_schema(DisaggregatedSetRoleScaler)
    root["description"] = (
        "DisaggregatedSetRoleScaler is the /scale target of one External role of a "
        "DisaggregatedSet, named <disaggregatedset>-<role> and made by its controller: an "
        "autoscaler writes spec.replicas, the controller scales the role to it."
    )
    names = {
        "kind": c.SCALER_KIND,
        "listKind": c.SCALER_LIST_KIND,
        "plural": c.SCALER_PLURAL,
        "singular": c.SCALER_SINGULAR,
        "shortNames": [c.SCALER_SHORT_NAME],
    }
    version = _version(
        root,
        subresources={
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector",
            },
        },
    )
    version["additionalPrinterColumns"] = [
        {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Current", "type": "integer", "jsonPath": ".status.replicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return _crd(c.SCALER_CRD_NAME, names, version)


def render_disaggregatedset_crd_yaml() -> str:
    return _render(build_disaggregatedset_crd())


def render_scaler_crd_yaml() -> str:
    return _render(build_scaler_crd())


def _root_schema(model: type) -> dict[str, Any]:
    root = model_schema(model)
    root["properties"]["metadata"] = {"type": "object"}
    return root


def _version(root: dict[str, Any], subresources: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": c.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root},
        "subresources": subresources,
    }


def _crd(name: str, names: dict[str, Any], version: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": name,
            "annotations": {
                lws.ANNOTATION_CRD_GENERATED_BY: "lws crd generate",
                lws.ANNOTATION_CRD_POD_TEMPLATE_SCHEMA: (
                    f"Kubernetes {KUBERNETES_SCHEMA_VERSION} OpenAPI v3"
                ),
            },
        },
        "spec": {"group": c.GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }


def _render(crd: dict[str, Any]) -> str:
    header = (
        "# Generated by `lws crd generate` from src/leaderworkerset/api/disaggregatedset. "
        "Do not edit.\n"
        f"# Pod template schemas: Kubernetes {KUBERNETES_SCHEMA_VERSION} OpenAPI v3 "
        "(src/leaderworkerset/api/schemas).\n"
    )
    return header + "---\n" + yaml.safe_dump(crd, sort_keys=True, width=100, allow_unicode=True)
