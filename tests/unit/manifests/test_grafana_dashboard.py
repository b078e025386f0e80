"""The Grafana dashboard parses, the chart ships the same file, and every query reads
only metric families the manager registers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from leaderworkerset.wiring import setup_controllers
from tests.toolkit.manager import new_manager
from tests.toolkit.paths import REPO

DASHBOARD = REPO / "config/grafana/lws-groups.json"
CHART_DASHBOARD = REPO / "charts/lws/dashboards/lws-groups.json"
CHART_TEMPLATE = REPO / "charts/lws/templates/grafana/dashboard.yaml"
# Names of the families the manager serves, as they start.
OURS = re.compile(r"\b(?:lws|controller_runtime|workqueue|rest_client|leader_election)_\w+")


def expressions(node: Any) -> list[str]:
    """Every query of the dashboard: panel targets and template variable queries."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                found.append(value)
            else:
                found.extend(expressions(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(expressions(item))
    return found


def served_names(tmp_path: Path) -> set[str]:
    """Sample names /metrics can show (a counter's _total, a histogram's _bucket,
    _count and _sum...): those of the registry a wired manager serves."""
    manager = new_manager(tmp_path)
    setup_controllers(manager)
    return set(manager.metrics.registry._names_to_collectors)


def test_dashboard_parses_and_the_chart_ships_the_same() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "lws-groups"
    assert dashboard["panels"]
    assert CHART_DASHBOARD.read_bytes() == DASHBOARD.read_bytes(), (
        "charts/lws/dashboards/lws-groups.json differs from config/grafana/lws-groups.json"
    )
    assert 'Files.Get "dashboards/lws-groups.json"' in CHART_TEMPLATE.read_text()


def test_every_query_reads_metrics_that_exist(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    served = served_names(tmp_path)
    queries = expressions(dashboard)
    assert queries
    used: set[str] = set()
    for query in queries:
        names = set(OURS.findall(query))
        assert names, f"a query that reads none of our metrics: {query}"
        missing = names - served
        assert not missing, f"{query} reads {sorted(missing)}, which /metrics does not serve"
        used |= names
    for family in (
        "lws_groups",
        "lws_group_ready_seconds_bucket",
        "lws_group_recreations_total",
        "lws_group_recovery_seconds_bucket",
        "lws_rollout_seconds_bucket",
        "lws_replacement_gated_seconds_bucket",
        "lws_scheduling_gate_admissions_total",
        "lws_scheduling_gate_early_releases_total",
    ):
        assert family in used, f"the dashboard does not show {family}"


def test_panels_do_not_overlap() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((x, y))
        assert pos["x"] + pos["w"] <= 24
