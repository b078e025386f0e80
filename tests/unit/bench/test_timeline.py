"""The Ready-over-time series the scale benchmark draws, from its pod watch's Timeline."""

from __future__ import annotations

from bench.timeline import Timeline, thin

from tests.toolkit.pods import pod


def _pod(uid: str, name: str) -> dict[str, object]:
    return pod(name, uid=uid, labels={}, node="n")


def test_ready_series_counts_pods_in_the_order_they_turned_ready() -> None:
    timeline = Timeline(start=100.0)
    timeline.observe(_pod("a", "bench-0"), 101.0, ready=False)
    timeline.observe(_pod("b", "bench-1"), 101.5, ready=True)
    timeline.observe(_pod("a", "bench-0"), 103.0, ready=True)
    # A later Ready event of a pod already Ready does not count it twice.
    timeline.observe(_pod("b", "bench-1"), 104.0, ready=True)

    assert timeline.ready_series() == [(0.0, 0), (1.5, 1), (3.0, 2)]


def test_ready_series_of_no_ready_pod_is_the_origin() -> None:
    timeline = Timeline(start=5.0)
    timeline.observe(_pod("a", "bench-0"), 6.0, ready=False)

    assert timeline.ready_series() == [(0.0, 0)]


def test_thin_keeps_the_ends_and_at_most_the_points_asked_for() -> None:
    points = [(float(i), i) for i in range(1001)]

    kept = thin(points, 11)

    assert kept == [(float(i), i) for i in range(0, 1001, 100)]
    assert thin(points[:5], 11) == points[:5]
