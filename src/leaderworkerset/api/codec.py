"""JSON <-> model conversion driven by the `FieldSpec`s of the model classes.

Decoding never stops at the first problem: type errors are collected with
their field paths. Members the model does not know are kept in `extra`, and
Kubernetes types (pod templates, claims) are kept as raw JSON, so an object
read and written again is unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, TypeVar

from leaderworkerset.api.errors import FieldError, json_integer, out_of_range, type_error
from leaderworkerset.api.fields import FieldSpec, Kind, api_fields

T = TypeVar("T")

_INT_RANGES = {
    Kind.INT32: (-(2**31), 2**31 - 1),
    Kind.INT64: (-(2**63), 2**63 - 1),
}


def child_path(path: str, member: str) -> str:
    return f"{path}.{member}" if path else member


def decode(cls: type[T], data: Any, path: str, errors: list[FieldError]) -> T:
    """Build `cls` from JSON, appending a FieldError for every member of the wrong type."""
    if not isinstance(data, dict):
        errors.append(type_error(path or "<root>", data, "object"))
        return cls()
    kwargs: dict[str, Any] = {}
    known: set[str] = set()
    for name, spec in api_fields(cls):
        known.add(spec.json)
        value = data.get(spec.json)
        if value is None:
            continue
        decoded = _decode_value(spec, value, child_path(path, spec.json), errors)
        if decoded is not None:
            kwargs[name] = decoded
    obj = cls(**kwargs)
    if _has_extra(cls):
        obj.extra.update(  # type: ignore[attr-defined]
            {k: copy.deepcopy(v) for k, v in data.items() if k not in known}
        )
    return obj


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object of a model instance: declared members in order, then unknown ones."""
    out: dict[str, Any] = {}
    for name, spec in api_fields(type(obj)):
        value = getattr(obj, name)
        if value is not None:
            out[spec.json] = _encode_value(spec, value)
    if _has_extra(type(obj)):
        for key, value in obj.extra.items():
            out.setdefault(key, copy.deepcopy(value))
    return out


def _has_extra(cls: type) -> bool:
    return any(f.metadata.get("extra") for f in dataclasses.fields(cls))


def _decode_value(spec: FieldSpec, value: Any, path: str, errors: list[FieldError]) -> Any:
    kind = spec.kind
    if kind in _INT_RANGES:
        # The API server takes a whole number written as 2.0 for an integer (and stores 2).
        number = json_integer(value)
        if number is None:
            errors.append(type_error(path, value, "integer"))
            return None
        low, high = _INT_RANGES[kind]
        if not low <= number <= high:
            errors.append(out_of_range(path, number, kind.value))
            return None
        return number
    if kind is Kind.STRING:
        if not isinstance(value, str):
            errors.append(type_error(path, value, "string"))
            return None
        return value
    if kind is Kind.INT_OR_STRING:
        if isinstance(value, bool) or not isinstance(value, int | str):
            errors.append(type_error(path, value, "integer or string"))
            return None
        return value
    if kind is Kind.MODEL:
        assert spec.model is not None
        return decode(spec.model, value, path, errors)
    if kind is Kind.K8S:
        if not isinstance(value, dict):
            errors.append(type_error(path, value, "object"))
            return None
        return copy.deepcopy(value)
    if not isinstance(value, list):
        errors.append(type_error(path, value, "array"))
        return None
    if kind is Kind.MODEL_LIST:
        assert spec.model is not None
        return [decode(spec.model, item, f"{path}[{i}]", errors) for i, item in enumerate(value)]
    items: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            items.append(copy.deepcopy(item))
        else:
            errors.append(type_error(f"{path}[{i}]", item, "object"))
    return items


def _encode_value(spec: FieldSpec, value: Any) -> Any:
    if spec.kind is Kind.MODEL:
        return encode(value)
    if spec.kind is Kind.MODEL_LIST:
        return [encode(item) for item in value]
    if spec.kind in (Kind.K8S, Kind.K8S_LIST):
        return copy.deepcopy(value)
    return value
