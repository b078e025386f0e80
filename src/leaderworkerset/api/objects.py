"""Reading the metadata of objects kept as plain JSON dicts (absent = empty)."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api import constants as c

JSON = dict[str, Any]


def meta_of(obj: JSON | None) -> JSON:
    meta: JSON = (obj or {}).get("metadata") or {}
    return meta


def labels_of(obj: JSON | None) -> dict[str, Any]:
    labels: dict[str, Any] = meta_of(obj).get("labels") or {}
    return labels


def annotations_of(obj: JSON | None) -> dict[str, Any]:
    annotations: dict[str, Any] = meta_of(obj).get("annotations") or {}
    return annotations


def revision_key_of(obj: JSON | None) -> Any:
    """The template revision an object was built from (its revision-hash label)."""
    return labels_of(obj).get(c.LABEL_TEMPLATE_REVISION_HASH)
