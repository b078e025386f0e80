"""A JSON value as Go's `encoding/json` writes it after decoding it into a typed
Kubernetes struct: the bytes upstream's DisaggregatedSet revision hash covers.

Decoding into structs and encoding back changes a document: members come out in Go's
declaration order, not the document's; `omitempty` members that are empty disappear;
members without it appear even when absent (`"containers":null`, `"resources":{}`);
members the Go types do not know are dropped; quantities take their canonical form.
The member lists come from the Go sources of the Kubernetes version upstream builds
with (`gotypes/`, written by hack/update-go-fields.py); the LeaderWorkerSet types are
declared here, as upstream's v0.10.0 declares them.

A type is written as Go spells it, with packages as "group/version.Name": "*T",
"[]T", "map[string]T", or one of string, bool, int32, int64, float64, quantity,
intorstring, time, raw (bytes kept as they are).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any, Final

from leaderworkerset.api.go.quantity import go_quantity_text

K8S_GO_VERSION: Final = "v0.36.3"
LEADER_WORKER_TEMPLATE: Final = "lws/v1.LeaderWorkerTemplate"

# (JSON name, type, options) of upstream's LeaderWorkerSet types, in Go's order.
_LWS_TYPES: Final = {
    LEADER_WORKER_TEMPLATE: [
        ["leaderTemplate", "*core/v1.PodTemplateSpec", "omitempty"],
        ["workerTemplate", "core/v1.PodTemplateSpec", ""],
        ["size", "*int32", "omitempty"],
        ["restartPolicy", "string", "omitempty"],
        ["subGroupPolicy", "*lws/v1.SubGroupPolicy", "omitempty"],
        ["volumeClaimTemplates", "[]core/v1.PersistentVolumeClaim", "omitempty"],
        [
            "persistentVolumeClaimRetentionPolicy",
            "*apps/v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
            "omitempty",
        ],
    ],
    "lws/v1.SubGroupPolicy": [
        ["subGroupPolicyType", "*string", "omitempty"],
        ["subGroupSize", "*int32", "omitempty"],
    ],
}
# Go's encoder escapes these so that its output is safe inside HTML.
_HTML_ESCAPES: Final = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_LINE_ESCAPES: Final = {"\u2028": "\\u2028", "\u2029": "\\u2029"}
_ESCAPED: Final = re.compile("[<>&\u2028\u2029]")
_NUMBERS: Final = {"int32", "int64", "float64"}


@cache
def go_types() -> dict[str, list[list[str]]]:
    data = resources.files("leaderworkerset.api.go").joinpath(f"gotypes/k8s-{K8S_GO_VERSION}.json")
    types: dict[str, list[list[str]]] = json.loads(data.read_text())["types"]
    return {**types, **_LWS_TYPES}


def go_json(value: Any, go_type: str) -> str:
    """The compact JSON Go writes for `value` decoded into `go_type`."""
    if go_type.startswith("*"):
        return "null" if value is None else go_json(value, go_type[1:])
    if go_type.startswith("[]"):
        if not isinstance(value, list):
            return "null"
        return "[" + ",".join(go_json(item, go_type[2:]) for item in value) + "]"
    if go_type.startswith("map["):
        if not isinstance(value, dict):
            return "null"
        element = go_type.split("]", 1)[1]
        members = (f"{go_string(key)}:{go_json(value[key], element)}" for key in sorted(value))
        return "{" + ",".join(members) + "}"
    if "/" in go_type:
        return _struct(value if isinstance(value, dict) else {}, go_type)
    return _scalar(value, go_type)


def go_string(text: str) -> str:
    """A JSON string as Go quotes it: control characters escaped as Python does, and
    <, >, & and the line separators as \\u escapes."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _ESCAPED.sub(lambda m: {**_HTML_ESCAPES, **_LINE_ESCAPES}[m.group(0)], quoted)


def go_float(number: float) -> str:
    """A float64 as Go's encoder writes it: shortest digits, exponent form only below
    1e-6 or from 1e21, and no leading zero in a negative exponent."""
    if number == 0:
        return "0"
    digits = Decimal(repr(float(number)))
    if 1e-6 <= abs(number) < 1e21:
        text = format(digits, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, _, exponent = format(digits.normalize(), "e").partition("e")
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}e{sign}{int(exponent.lstrip('+-')):02d}".replace("e-0", "e-")


def _struct(value: dict[str, Any], go_type: str) -> str:
    members = []
    for name, member_type, options in go_types()[go_type]:
        member = value.get(name)
        flags = options.split(",")
        if "omitempty" in flags and _empty(member, member_type):
            continue
        if "omitzero" in flags and _zero(member, member_type):
            continue
        members.append(f"{go_string(name)}:{go_json(member, member_type)}")
    return "{" + ",".join(members) + "}"


def _scalar(value: Any, go_type: str) -> str:
    if go_type == "string":
        return go_string(value if isinstance(value, str) else "")
    if go_type == "bool":
        return "true" if value is True else "false"
    if go_type in ("int32", "int64"):
        return str(int(value)) if isinstance(value, int | float) else "0"
    if go_type == "float64":
        return go_float(float(value)) if isinstance(value, int | float) else "0"
    if go_type == "quantity":
        return go_string(go_quantity_text(_number_text(value)) if value is not None else "0")
    if go_type == "intorstring":
        return go_string(value) if isinstance(value, str) else _scalar(value, "int32")
    if go_type == "time":
        return "null" if value is None else go_string(_go_time(value))
    if go_type == "raw":
        return "null" if value is None else json.dumps(value, separators=(",", ":"))
    raise ValueError(f"no Go encoding for type {go_type!r}")


def _number_text(value: Any) -> str:
    """A quantity's text as the API server hands it over (JSON numbers as Go wrote them)."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def _go_time(value: Any) -> str:
    """metav1.Time: RFC 3339 in UTC, whole seconds."""
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _empty(value: Any, go_type: str) -> bool:
    """Go's omitempty: false, 0, "", a nil pointer, an empty slice or map. A struct
    (quantity, intorstring and time included) is never empty."""
    if go_type.startswith("*"):
        return value is None
    if go_type.startswith(("[]", "map[")):
        return not value
    if go_type == "string":
        return not isinstance(value, str) or value == ""
    if go_type == "bool":
        return value is not True
    if go_type in _NUMBERS:
        return not value
    return False


def _zero(value: Any, go_type: str) -> bool:
    """Go's omitzero: the zero value (a zero time, an unset pointer, slice or map, a
    struct whose members are all zero)."""
    if go_type == "time":
        return value is None
    if go_type.startswith(("*", "[]", "map[")) or go_type == "raw":
        return value is None
    if "/" in go_type:
        members = value if isinstance(value, dict) else {}
        return all(_zero(members.get(n), t) for n, t, _ in go_types()[go_type])
    if go_type == "quantity":
        return value is None or go_quantity_text(_number_text(value)) == "0"
    if go_type == "intorstring":
        return value in (None, 0)
    return _empty(value, go_type)
