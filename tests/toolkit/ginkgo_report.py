"""Reading a ginkgo JSON report (`--ginkgo.json-report`): one row per spec, and the
table tests/e2e_real/test_upstream_e2e.py prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# The nodes that are specs; BeforeSuite/AfterSuite are reported as well.
SPEC_NODES = ("It",)
NANOSECONDS = 1e9


@dataclass(frozen=True)
class SpecResult:
    node: str  # It, BeforeSuite, ...
    container: str  # the Describe/Context texts, joined by spaces
    leaf: str  # the spec's own text
    state: str  # passed, failed, skipped, panicked, timedout, ...
    seconds: float
    failure: str

    @property
    def is_spec(self) -> bool:
        return self.node in SPEC_NODES

    @property
    def text(self) -> str:
        """The full text ginkgo's --ginkgo.focus and --ginkgo.skip match."""
        return " ".join(t for t in (self.container, self.leaf) if t)


def read_report(path: Path) -> list[SpecResult]:
    reports = json.loads(path.read_text())
    results = []
    for report in reports:
        for spec in report.get("SpecReports") or []:
            failure = spec.get("Failure") or {}
            results.append(
                SpecResult(
                    node=spec.get("LeafNodeType", ""),
                    container=" ".join(spec.get("ContainerHierarchyTexts") or []),
                    leaf=spec.get("LeafNodeText") or "",
                    state=spec.get("State", ""),
                    seconds=(spec.get("RunTime") or 0) / NANOSECONDS,
                    failure=str(failure.get("Message") or ""),
                )
            )
    return results


def table(results: list[SpecResult], width: int = 100) -> str:
    """One line per spec (its own text; BeforeSuite and AfterSuite by name) with its
    result and time, under a line per container."""
    rows: list[tuple[str, str, str]] = []
    container = None
    for r in results:
        if r.container != container and r.container:
            rows.append((f"{r.container}:", "", ""))
        container = r.container
        text = f"  {r.leaf}" if r.container else r.leaf or r.node
        rows.append((text, r.state, f"{r.seconds:.1f}s"))
    rows.append(("total", "", f"{sum(r.seconds for r in results):.1f}s"))
    text_width = min(width, max(len(text) for text, _, _ in rows))
    lines = [f"{'spec':<{text_width}}  {'result':<8}  time"]
    for text, state, seconds in rows:
        shown = text if len(text) <= text_width else text[: text_width - 1] + "…"
        lines.append(f"{shown:<{text_width}}  {state:<8}  {seconds:>6}")
    return "\n".join(lines)
