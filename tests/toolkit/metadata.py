"""What every kind's builder shares: an object's metadata and its typed envelope, each
member present only when asked for (a builder never adds a default a test did not
choose)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]


def object_meta(
    scalars: Sequence[tuple[str, Any]],
    *,
    finalizers: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owners: Sequence[JSON] | None = None,
) -> JSON:
    """ObjectMeta from (member, value) pairs, in their order, then the collections."""
    meta: JSON = {key: value for key, value in scalars if value is not None}
    if finalizers is not None:
        meta["finalizers"] = list(finalizers)
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if owners is not None:
        meta["ownerReferences"] = [dict(owner) for owner in owners]
    return meta


def envelope(api_version: str | None, kind: str | None, meta: JSON) -> JSON:
    """apiVersion and kind (when given), then the metadata."""
    body: JSON = {}
    if api_version is not None:
        body["apiVersion"] = api_version
    if kind is not None:
        body["kind"] = kind
    body["metadata"] = meta
    return body
