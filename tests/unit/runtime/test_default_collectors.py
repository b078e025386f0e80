"""The families every Prometheus client serves by default are on the registry /metrics
serves: process_*, python_info and python_gc_*."""

from __future__ import annotations

import platform
import sys

from prometheus_client import CollectorRegistry, generate_latest

from leaderworkerset.runtime.metrics import RuntimeMetrics


def test_process_python_and_gc_families_are_served() -> None:
    registry = RuntimeMetrics().registry
    rss = registry.get_sample_value("process_resident_memory_bytes")
    assert rss is not None and rss > 1024 * 1024
    assert registry.get_sample_value("process_start_time_seconds")
    fds = registry.get_sample_value("process_open_fds")
    assert fds is not None and fds > 0
    labels = {
        "implementation": platform.python_implementation(),
        "major": str(sys.version_info.major),
        "minor": str(sys.version_info.minor),
        "patchlevel": str(sys.version_info.micro),
        "version": platform.python_version(),
    }
    assert registry.get_sample_value("python_info", labels) == 1.0
    text = generate_latest(registry).decode()
    assert 'python_gc_collections_total{generation="2"}' in text


def test_a_registry_handed_in_gets_only_the_controllers_families() -> None:
    """Embedders and tests that pass their own registry may already serve the process
    families (a second ProcessCollector on it would clash)."""
    registry = CollectorRegistry()
    RuntimeMetrics(registry)
    assert registry.get_sample_value("process_resident_memory_bytes") is None
    assert registry.get_sample_value("controller_runtime_max_concurrent_reconciles") is None
    assert "controller_runtime_reconcile_total" in generate_latest(registry).decode()
