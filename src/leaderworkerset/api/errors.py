"""Kubernetes-style field errors (the shape of apimachinery's field.Error).

Every message names the field path and the bad value, so that a user can fix
a manifest from the error alone, and errors are collected, never raised one by
one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from leaderworkerset.api.leaderworkerset.constants import GROUP


class ErrorType(Enum):
    INVALID = "Invalid value"
    REQUIRED = "Required value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    DUPLICATE = "Duplicate value"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    # apimachinery renders a type mismatch as "Invalid value" too; only the reason
    # (FieldValueTypeInvalid) tells it apart.
    TYPE = "Invalid value"

    @property
    def reason(self) -> str:
        """The `FieldValueXxx` cause type the API server reports in Status.details."""
        return {
            ErrorType.INVALID: "FieldValueInvalid",
            ErrorType.REQUIRED: "FieldValueRequired",
            ErrorType.NOT_SUPPORTED: "FieldValueNotSupported",
            ErrorType.FORBIDDEN: "FieldValueForbidden",
            ErrorType.DUPLICATE: "FieldValueDuplicate",
            ErrorType.TOO_LONG: "FieldValueTooLong",
            ErrorType.TOO_MANY: "FieldValueTooMany",
            ErrorType.TYPE: "FieldValueTypeInvalid",
        }[self]


_OMITTED = object()


def format_value(value: Any) -> str:
    """Render a bad value the way `kubectl` users are used to: strings quoted, rest as JSON."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class FieldError:
    type: ErrorType
    field: str
    bad_value: Any
    detail: str = ""

    def __str__(self) -> str:
        head = f"{self.field}: {self.type.value}"
        if self.type in (ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG):
            if self.bad_value is not _OMITTED and self.bad_value is not None:
                head += f": {format_value(self.bad_value)}"
        else:
            head += f": {format_value(self.bad_value)}"
        return f"{head}: {self.detail}" if self.detail else head


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, field, value, detail)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, field, _OMITTED, detail)


def not_supported(field: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    detail = "supported values: " + ", ".join(json.dumps(s) for s in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, field, value, detail)


def forbidden(field: str, detail: str, value: Any = _OMITTED) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, field, value, detail)


def json_type_name(value: Any) -> str:
    """The JSON type of a decoded value, as OpenAPI names it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def json_integer(value: Any) -> int | None:
    """`value` as the API server reads a JSON integer (a whole float such as 2.0 is one,
    a boolean is not), or None."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def type_error(field: str, value: Any, expected: str) -> FieldError:
    """A value of the wrong JSON type, worded as the API server's schema validation
    words it: `spec.replicas: Invalid value: "string": spec.replicas in body must be of
    type integer: "string"`. `expected` is an OpenAPI type (integer, string, ...)."""
    actual = json_type_name(value)
    return FieldError(
        ErrorType.TYPE, field, actual, f'{field} in body must be of type {expected}: "{actual}"'
    )


def out_of_range(field: str, value: Any, fmt: str) -> FieldError:
    """An integer that does not fit its format (int32, int64): the API server refuses it
    ("Checked value must be of type integer with format int32") without naming the field,
    so this names it."""
    return invalid(field, value, f"{field} in body must be of type integer with format {fmt}")


def too_long(field: str, value: Any, limit: int) -> FieldError:
    return FieldError(ErrorType.TOO_LONG, field, value, f"must have at most {limit} bytes")


def too_many(field: str, actual: int, limit: int) -> FieldError:
    """A list longer than its maxItems, as apimachinery's field.TooMany words it."""
    noun = "item" if limit == 1 else "items"
    return FieldError(ErrorType.TOO_MANY, field, actual, f"must have at most {limit} {noun}")


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError(ErrorType.DUPLICATE, field, value)


def immutable(field: str, value: Any) -> FieldError:
    return invalid(field, value, "field is immutable")


class InvalidObjectError(ValueError):
    """All field errors of one object, in the API server's `is invalid` wording."""

    def __init__(self, kind: str, name: str, errors: list[FieldError]) -> None:
        self.kind = kind
        self.name = name
        self.errors = list(errors)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        joined = ", ".join(str(e) for e in self.errors)
        body = joined if len(self.errors) == 1 else f"[{joined}]"
        return f"{self.kind}.{GROUP} {json.dumps(self.name)} is invalid: {body}"
