"""The mutating LeaderWorkerSet webhook reads the object once, whether it defaults it
or refuses it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.webhooks.admission import mutate_leaderworkerset
from tests.toolkit.lws import leaderworkerset


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    decoded: list[object] = []
    original = LeaderWorkerSet.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[LeaderWorkerSet], obj: Any, *args: Any, **kwargs: Any) -> Any:
        decoded.append(obj)
        return original(cls, obj, *args, **kwargs)

    monkeypatch.setattr(LeaderWorkerSet, "from_json", classmethod(counting))
    return decoded


@pytest.mark.parametrize("replicas", [3, "three"], ids=["defaulted", "refused"])
def test_the_mutating_webhook_decodes_the_object_once(decodes: list[object], replicas: Any) -> None:
    obj = leaderworkerset("a", "ns")
    obj["spec"]["replicas"] = replicas
    response = asyncio.run(mutate_leaderworkerset({"uid": "u", "object": obj})).to_json("u")
    assert response["allowed"] is (replicas == 3)
    assert decodes == [obj]
