"""Collections are timed into python_gc_pause_seconds, by generation."""

from __future__ import annotations

import gc

from leaderworkerset.runtime.metrics import REGISTRY, observe_gc_pauses


def collected(generation: str) -> float:
    value = REGISTRY.get_sample_value("python_gc_pause_seconds_count", {"generation": generation})
    return value or 0.0


def test_a_full_collection_is_timed_once() -> None:
    observe_gc_pauses()
    observe_gc_pauses()  # installing twice must not count twice
    before = collected("2")
    gc.collect()
    assert collected("2") == before + 1
    total = REGISTRY.get_sample_value("python_gc_pause_seconds_sum", {"generation": "2"})
    assert total is not None and total > 0
