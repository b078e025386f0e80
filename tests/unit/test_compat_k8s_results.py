"""The Kubernetes matrix's table (tests/compat_k8s/results.py): a row per release in
release order, each step's outcome and time, skip and failure reasons as notes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.compat_k8s.results import STEPS, main, passed, step_of, table


def _result(version: str, build: object, **outcomes: str) -> dict[str, object]:
    steps = {
        label: {"outcome": outcomes.get(label.split()[0], "passed"), "seconds": 10.4, "reason": ""}
        for label in STEPS.values()
    }
    return {"version": version, "server": version, "build": build, "steps": steps}


def test_rows_in_release_order_with_notes() -> None:
    old = _result("v1.9.0", 400, gang="skipped")
    old["steps"]["gang story"]["reason"] = "no Workload API"  # type: ignore[index]
    older = _result("v1.8.0", 400, gang="skipped")
    older["steps"]["gang story"]["reason"] = "no Workload API"  # type: ignore[index]
    text = table([_result("v1.37.2", "cached"), old, older])
    rows = [line for line in text.splitlines() if line.startswith("| v")]
    assert rows[1].startswith("| v1.9.0 | 400 s | passed, 10 s | passed, 10 s |")
    # One note for the reason both releases share.
    assert "skipped [1], 10 s" in rows[0] and "skipped [1], 10 s" in rows[1]
    assert rows[2].startswith("| v1.37.2 | cached |") and rows[2].endswith("| 52 s |")
    assert text.splitlines()[-1] == "[1] no Workload API"


def test_a_failed_build_or_step_fails_the_matrix(tmp_path: Path) -> None:
    assert passed(_result("v1.37.2", 1, gang="skipped"))
    assert not passed(_result("v1.37.2", 1, install="error"))
    assert not passed({"version": "v1.34.4", "build": "failed", "steps": {}})
    ok, bad = tmp_path / "ok.json", tmp_path / "bad.json"
    ok.write_text(json.dumps(_result("v1.36.3", 1)))
    bad.write_text(json.dumps({"version": "v1.34.4", "build": "failed", "steps": {}}))
    assert main([str(ok)]) == 0
    assert main([str(ok), str(bad)]) == 1


def test_steps_are_named_by_their_tests() -> None:
    assert step_of("test_install") == "install"
    assert step_of("test_gang_story[x]") == "gang story"
    assert step_of("test_server_is_the_release_asked_for") == "cluster up"
    assert step_of("test_something_else") is None
