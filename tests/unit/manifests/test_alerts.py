"""The alert rules (config/components/prometheus/alerts.yaml, and the chart's copy):
every series an expression reads is one the controller serves, every alert has its
runbook section in docs/alerts.md, and both install paths render the same rules."""

from __future__ import annotations

import re
from typing import Any

import yaml

from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.pod.group_recovery import RecoveryMetrics
from leaderworkerset.runtime.metrics import RuntimeMetrics
from tests.toolkit.paths import REPO
from tests.toolkit.render import CONFIG, Renderer

ALERTS = CONFIG / "components" / "prometheus" / "alerts.yaml"
RUNBOOK = REPO / "docs" / "alerts.md"
# Series Prometheus itself adds to every target.
SCRAPE_SERIES = {"up"}
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum")


def rules(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def served() -> set[str]:
    """Every sample name /metrics can serve."""
    runtime = RuntimeMetrics()
    GroupMetrics(runtime.registry)
    RecoveryMetrics(runtime.registry)
    families = {metric.name for metric in runtime.registry.collect()}
    return {family + suffix for family in families for suffix in SUFFIXES}


def read_series(expr: str) -> set[str]:
    """Names in an expression that are series, not functions, keywords or labels."""
    without_matchers = re.sub(r"\{[^}]*\}", "", expr)
    without_groupings = re.sub(r"\b(by|without)\s*\([^)]*\)", "", without_matchers)
    names = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", without_groupings))
    functions = set(re.findall(r"\b([a-z_]+)\s*\(", without_groupings))
    return names - functions - {"le", "and", "or", "unless", "bool", "on", "ignoring"}


def test_every_series_an_alert_reads_is_served() -> None:
    available = served() | SCRAPE_SERIES
    for rule in rules(yaml.safe_load(ALERTS.read_text())):
        unknown = read_series(rule["expr"]) - available
        assert not unknown, f"{rule['alert']} reads {sorted(unknown)}, which nothing serves"


def test_every_alert_has_its_runbook_section() -> None:
    headings = {
        line.removeprefix("## ").strip().lower()
        for line in RUNBOOK.read_text().splitlines()
        if line.startswith("## ")
    }
    for rule in rules(yaml.safe_load(ALERTS.read_text())):
        name = rule["alert"]
        assert rule["annotations"]["runbook"] == f"docs/alerts.md#{name.lower()}"
        assert name.lower() in headings, f"docs/alerts.md has no section {name}"
        assert rule["labels"]["severity"] in {"critical", "warning"}


def test_chart_and_kustomize_render_the_same_rules(renderer: Renderer) -> None:
    chart = renderer.helm_template({"enablePrometheus": True})
    (from_chart,) = [o for (kind, _), o in chart.items() if kind == "PrometheusRule"]
    component = renderer.kustomize(CONFIG / "prometheus")
    (from_kustomize,) = [o for (kind, _), o in component.items() if kind == "PrometheusRule"]
    assert from_chart["spec"] == from_kustomize["spec"]
    assert from_chart["metadata"]["namespace"] == "lws-system"
    assert not [k for k, _ in renderer.helm_template() if k == "PrometheusRule"]
