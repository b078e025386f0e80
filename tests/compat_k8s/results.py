"""The Kubernetes matrix's results (`make compat-k8s`): each run of tests/compat_k8s
against one release writes a JSON file (its conftest, when ``LWS_COMPAT_RESULTS`` names
one), and ``python -m tests.compat_k8s.results FILE...`` prints them as one Markdown
table, the one docs/testing.md keeps.

A file holds ``{"version", "server", "build", "steps": {step: {"outcome", "seconds",
"reason"}}}``; ``build`` is ``cached``, the seconds a build took, or ``failed`` (then
no step ran).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# The matrix's steps, one test each, in the order they run and the table's columns.
STEPS = {
    "test_server_is_the_release_asked_for": "cluster up",
    "test_install": "install",
    "test_webhooks": "webhooks",
    "test_hash_group_story": "Hash group story",
    "test_gang_story": "gang story",
}
JSON = dict[str, Any]


def step_of(test_name: str) -> str | None:
    return STEPS.get(test_name.split("[")[0])


def _cell(step: JSON | None, notes: list[str]) -> str:
    if step is None:
        return "not run"
    outcome = str(step["outcome"])
    reason = str(step.get("reason") or "")
    if reason:
        # One note for a reason several releases share.
        if reason not in notes:
            notes.append(reason)
        outcome += f" [{notes.index(reason) + 1}]"
    return f"{outcome}, {float(step['seconds']):.0f} s"


def _build(value: object) -> str:
    if isinstance(value, int | float):
        return f"{value:.0f} s"
    return str(value or "?")


def table(results: list[JSON]) -> str:
    """Markdown: a row per release, a column per step with its outcome and time, and the
    reasons of skips and failures as numbered notes under it."""
    head = ["Kubernetes", "build", *STEPS.values(), "steps' total"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes: list[str] = []
    for result in sorted(results, key=lambda r: _release(str(r["version"]))):
        steps = result.get("steps") or {}
        cells = [_cell(steps.get(label), notes) for label in STEPS.values()]
        total = sum(float(s["seconds"]) for s in steps.values())
        version = str(result["version"])
        server = result.get("server")
        if server and server != version:
            version += f" (server says {server})"
        row = [version, _build(result.get("build")), *cells, f"{total:.0f} s"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *(f"[{i}] {note}" for i, note in enumerate(notes, 1))] if notes else []
    return "\n".join(lines)


def _release(version: str) -> tuple[int, ...]:
    digits = version.lstrip("v").split(".")
    return tuple(int(d) if d.isdigit() else 0 for d in digits)


def passed(result: JSON) -> bool:
    """Every step passed or was skipped, and there was a build."""
    steps = result.get("steps") or {}
    ran = result.get("build") != "failed" and len(steps) == len(STEPS)
    return ran and all(s["outcome"] in ("passed", "skipped") for s in steps.values())


def main(argv: list[str]) -> int:
    results = [json.loads(Path(path).read_text()) for path in argv]
    print(table(results))
    return 0 if results and all(passed(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
