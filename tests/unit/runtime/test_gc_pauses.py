"""Collections are timed into python_gc_pause_seconds, by generation."""

from __future__ import annotations

import gc

from leaderworkerset.runtime.metrics import RuntimeMetrics


def collected(metrics: RuntimeMetrics, generation: str) -> float:
    value = metrics.registry.get_sample_value(
        "python_gc_pause_seconds_count", {"generation": generation}
    )
    return value or 0.0


def test_a_full_collection_is_timed_once() -> None:
    metrics = RuntimeMetrics()
    metrics.observe_gc_pauses()
    metrics.observe_gc_pauses()  # installing twice must not count twice
    # No automatic collection (another thread's allocations) in between: the count
    # must be exact to show the double install did not double it.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = collected(metrics, "2")
        gc.collect()
        assert collected(metrics, "2") == before + 1
    finally:
        metrics.stop_observing_gc_pauses()
        if was_enabled:
            gc.enable()
    total = metrics.registry.get_sample_value("python_gc_pause_seconds_sum", {"generation": "2"})
    assert total is not None and total > 0
    gc.collect()
    assert collected(metrics, "2") == before + 1, "stopped: no longer timed"
