"""Counting how often a LeaderWorkerSet is decoded into the typed model: the costly step
that the controller does once per version (docs/architecture.md, "A typed value per
pass")."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet


def count_lws_decodes(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """From now on (until `monkeypatch` undoes it), every object decoded by
    `LeaderWorkerSet.from_json` is appended to the list returned."""
    decoded: list[object] = []
    original = LeaderWorkerSet.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[LeaderWorkerSet], obj: Any, *args: Any, **kwargs: Any) -> Any:
        decoded.append(obj)
        return original(cls, obj, *args, **kwargs)

    monkeypatch.setattr(LeaderWorkerSet, "from_json", classmethod(counting))
    return decoded
