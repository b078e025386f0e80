"""Writing into the nested maps of an object being mutated at admission."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.objects import JSON

Pod = JSON


def child_map(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """`parent[key]`, created empty when absent or null, for writing into."""
    value: dict[str, Any] | None = parent.get(key)
    if value is None:
        value = {}
        parent[key] = value
    return value
