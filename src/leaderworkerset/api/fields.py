"""Field declarations shared by the typed model, its JSON codec and the CRD generator.

Each dataclass field of the API model carries one `FieldSpec`. Declaring the
JSON name, type, enum, default and bounds once lets the codec (types <-> JSON)
and the CRD schema be derived from the same source, so they cannot drift.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Kind(Enum):
    INT32 = "int32"
    INT64 = "int64"
    STRING = "string"
    INT_OR_STRING = "int-or-string"
    MODEL = "model"  # a nested API dataclass
    MODEL_LIST = "model-list"  # a list of nested API dataclasses
    K8S = "k8s"  # a Kubernetes type kept as raw JSON (lossless), schema from OpenAPI
    K8S_LIST = "k8s-list"  # a list of such


@dataclass(frozen=True)
class FieldSpec:
    json: str
    kind: Kind
    description: str
    model: type | None = None
    k8s_ref: str | None = None
    enum: tuple[str, ...] | None = None
    schema_default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    required: bool = False
    # Lists of Kubernetes condition-like objects are list-maps keyed by type.
    list_map_keys: tuple[str, ...] | None = None
    # Extra OpenAPI keywords copied into the CRD schema verbatim.
    schema_extra: dict[str, Any] | None = None


def api_field(
    json: str,
    kind: Kind,
    description: str,
    *,
    model: type | None = None,
    k8s_ref: str | None = None,
    enum: tuple[str, ...] | None = None,
    schema_default: Any = None,
    minimum: int | None = None,
    maximum: int | None = None,
    required: bool = False,
    list_map_keys: tuple[str, ...] | None = None,
    schema_extra: dict[str, Any] | None = None,
) -> Any:
    """A dataclass field whose value is None (absent) unless the JSON carries it."""
    spec = FieldSpec(
        json=json,
        kind=kind,
        description=description,
        model=model,
        k8s_ref=k8s_ref,
        enum=enum,
        schema_default=schema_default,
        minimum=minimum,
        maximum=maximum,
        required=required,
        list_map_keys=list_map_keys,
        schema_extra=schema_extra,
    )
    return dataclasses.field(default=None, metadata={"api": spec})


def extra_field() -> Any:
    """Holds JSON members the model does not know, so that they survive a round trip."""
    return dataclasses.field(default_factory=dict, metadata={"extra": True}, compare=True)


def api_fields(cls: type) -> Iterator[tuple[str, FieldSpec]]:
    """(python attribute name, spec) for each API field of a model class, in order."""
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("api")
        if spec is not None:
            yield f.name, spec
