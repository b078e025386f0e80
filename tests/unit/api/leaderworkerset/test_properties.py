"""Properties of defaulting and the JSON codec over random objects."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings

from leaderworkerset.api.leaderworkerset.defaults import default_leaderworkerset
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import validate_create
from tests.toolkit.strategies import lws_objects


def _decode(data: dict[str, Any]) -> LeaderWorkerSet:
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == []
    return lws


@settings(max_examples=300)
@given(lws_objects())
def test_json_round_trip_is_lossless(data: dict[str, Any]) -> None:
    original = copy.deepcopy(data)
    assert _decode(data).to_json() == original


@settings(max_examples=300)
@given(lws_objects())
def test_defaulting_is_idempotent(data: dict[str, Any]) -> None:
    once = default_leaderworkerset(_decode(data))
    twice = default_leaderworkerset(once)
    assert twice == once
    assert twice.to_json() == once.to_json()


@settings(max_examples=300)
@given(lws_objects())
def test_defaulting_keeps_unknown_members(data: dict[str, Any]) -> None:
    defaulted = default_leaderworkerset(_decode(data)).to_json()
    for key, value in data["spec"].items():
        if key.startswith("x"):
            assert defaulted["spec"][key] == value
    worker = data["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    # Kept member for member; only struct members a Go round trip writes are added.
    assert _keeps(defaulted["spec"]["leaderWorkerTemplate"]["workerTemplate"], worker)


def _keeps(result: Any, original: Any) -> bool:
    if isinstance(original, dict):
        return isinstance(result, dict) and all(
            key in result and _keeps(result[key], value) for key, value in original.items()
        )
    if isinstance(original, list):
        return (
            isinstance(result, list)
            and len(result) == len(original)
            and all(_keeps(r, o) for r, o in zip(result, original, strict=True))
        )
    return bool(result == original)


@settings(max_examples=300)
@given(lws_objects())
def test_a_defaulted_valid_object_stays_valid(data: dict[str, Any]) -> None:
    defaulted = default_leaderworkerset(_decode(data))
    if validate_create(defaulted):
        return
    # What the API server stores is read back, defaulted again and re-validated on
    # every later update: none of that may turn a valid object invalid.
    stored = _decode(defaulted.to_json())
    again = default_leaderworkerset(stored)
    assert validate_create(again) == []
    assert again.to_json() == defaulted.to_json()
