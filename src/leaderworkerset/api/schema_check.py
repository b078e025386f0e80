"""What the API server finds on its own in a LeaderWorkerSet, DisaggregatedSet or
DisaggregatedSetRoleScaler, with the structural schema of the kind's CRD: members the
schema does not declare (refused under `fieldValidation=Strict`, kubectl's default, or
warned about under `Warn`), and values of the wrong JSON type, below a `minimum`, above
a `maximum` or outside an `enum`, anywhere in the object, pod templates included.

`lws validate` runs this so that a manifest it accepts is one the API server accepts,
refused with the server's words; the webhooks never need it (the API server has
refused unknown members before calling them, and checks the schema after the mutating
webhooks and before the validating ones).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from leaderworkerset.api.disaggregatedset import constants as ds
from leaderworkerset.api.disaggregatedset.crd import build_disaggregatedset_crd, build_scaler_crd
from leaderworkerset.api.errors import (
    FieldError,
    invalid,
    json_integer,
    not_supported,
    type_error,
)
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.crd import build_crd, object_meta_schema

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


# The CRD of each kind checked, by (group, kind); anything else is read as a
# LeaderWorkerSet, the kind `lws validate` was first written for.
_CRDS: Final[dict[tuple[str, str], Callable[[], dict[str, Any]]]] = {
    (c.GROUP, c.KIND): build_crd,
    (ds.GROUP, ds.KIND): build_disaggregatedset_crd,
    (ds.GROUP, ds.SCALER_KIND): build_scaler_crd,
}


@dataclass
class SchemaFindings:
    unknown: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)
    kind: str = c.KIND
    version: str = c.VERSION

    def strict_error(self) -> str:
        """The API server's answer to a create with unknown members under Strict."""
        listed = ", ".join(f"unknown field {json.dumps(path)}" for path in sorted(self.unknown))
        return (
            f"{self.kind} in version {json.dumps(self.version)} cannot be handled as a "
            f"{self.kind}: strict decoding error: {listed}"
        )

    def warnings(self) -> list[str]:
        """The API server's warnings for the same members under Warn."""
        return [f"unknown field {json.dumps(path)}" for path in sorted(self.unknown)]


@cache
def _schema(group: str, kind: str) -> tuple[str, dict[str, Any]]:
    """The version and the structural schema of a kind's CRD."""
    version = _CRDS[group, kind]()["spec"]["versions"][0]
    schema: dict[str, Any] = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    # The CRD leaves the object's own metadata to the API server, which decodes it as
    # ObjectMeta (and so finds unknown members in it too).
    schema["properties"]["metadata"] = object_meta_schema()
    return version["name"], schema


def check_against_schema(obj: dict[str, Any]) -> SchemaFindings:
    """The findings for `obj` against the schema of its kind (by apiVersion's group and
    kind; a LeaderWorkerSet's when it is of none of the three)."""
    group = str(obj.get("apiVersion", "")).partition("/")[0]
    kind = str(obj.get("kind", ""))
    if (group, kind) not in _CRDS:
        group, kind = c.GROUP, c.KIND
    version, schema = _schema(group, kind)
    findings = SchemaFindings(kind=kind, version=version)
    _walk(obj, schema, "", findings)
    return findings


def _walk(value: Any, schema: dict[str, Any], path: str, findings: SchemaFindings) -> None:
    if value is None:
        # The API server drops nulls of members that are not nullable before validating.
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            findings.errors.append(type_error(path, value, "integer,string"))
        return
    expected = schema.get("type")
    if expected is not None and not _has_type(value, expected):
        findings.errors.append(type_error(path, value, expected))
        return
    findings.errors.extend(_bounds_errors(value, schema, path))
    if isinstance(value, dict):
        _walk_members(value, schema, path, findings)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{i}]", findings)


def _walk_members(
    value: dict[str, Any], schema: dict[str, Any], path: str, findings: SchemaFindings
) -> None:
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    keeps_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    for key, member in value.items():
        member_path = f"{path}.{key}" if path else key
        if key in properties:
            _walk(member, properties[key], member_path, findings)
        elif isinstance(additional, dict):
            _walk(member, additional, member_path, findings)
        elif not keeps_unknown and additional is not True:
            findings.unknown.append(member_path)


def _bounds_errors(value: Any, schema: dict[str, Any], path: str) -> list[FieldError]:
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        return [not_supported(path, value, tuple(str(v) for v in enum))]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    if minimum is not None and value < minimum:
        return [
            invalid(path, value, f"{path} in body should be greater than or equal to {minimum}")
        ]
    if maximum is not None and value > maximum:
        return [invalid(path, value, f"{path} in body should be less than or equal to {maximum}")]
    return []


def _has_type(value: Any, expected: str) -> bool:
    if expected == "integer":
        return json_integer(value) is not None
    if expected == "number" and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))
