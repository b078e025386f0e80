"""PriorityClasses a test makes and removes (cluster-scoped, so named uniquely)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from leaderworkerset.api.resources import PRIORITY_CLASSES
from leaderworkerset.runtime.client import ApiClient, ApiError


@contextlib.asynccontextmanager
async def priority_classes(api: ApiClient, *classes: tuple[str, int]) -> AsyncIterator[list[str]]:
    """One PriorityClass per (prefix, value), named `<prefix>-<random>`; deleted after."""
    suffix = secrets.token_hex(3)
    names = [f"{prefix}-{suffix}" for prefix, _ in classes]
    for name, (_, value) in zip(names, classes, strict=True):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        await api.create(PRIORITY_CLASSES, body)
    try:
        yield names
    finally:
        for name in names:
            try:
                await api.delete(PRIORITY_CLASSES, name)
            except ApiError as exc:
                if not exc.not_found:
                    raise
