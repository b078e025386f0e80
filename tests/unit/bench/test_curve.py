"""The cost curve assembled from bench.scale's JSON lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench import curve


def _line(config: str, run: int, replicas: int, ready: float) -> dict[str, Any]:
    return {"config": config, "run": run, "replicas": replicas, "size": 8, "pods_ready": ready}


def _ours(mode: str, run: int, replicas: int, ready: float, cpu: float) -> dict[str, Any]:
    pods = replicas * 8
    return {
        **_line("ours" if mode == "Ordinal" else "ours-hash", run, replicas, ready),
        "mode": mode,
        "x_floor": ready / 100.0,
        "cpu": cpu,
        "cpu_ms_per_pod": cpu * 1000 / pods,
        "peak_mib": 100.0 + run,
        "kib_per_pod": 9.0,
        "writes_per_group": 2.0 + run,
    }


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n\n" for r in records))
    return path


def test_rows_are_medians_per_size_and_identity_smallest_size_first(tmp_path: Path) -> None:
    big = _write(
        tmp_path / "big.jsonl",
        [
            _line("floor", 1, 1000, 100.0),
            _ours("Hash", 1, 1000, 110.0, 30.0),
            _line("floor", 2, 1000, 104.0),
            _ours("Hash", 2, 1000, 130.0, 34.0),
            _line("floor", 3, 1000, 102.0),
            _ours("Hash", 3, 1000, 120.0, 29.0),
            {**_line("upstream", 1, 1000, 150.0), "mode": "Ordinal", "cpu": 12.0},
            {**_line("base", 1, 1000, 999.0), "mode": "Hash", "cpu": 999.0},
        ],
    )
    small = _write(
        tmp_path / "small.jsonl",
        [_line("floor", 1, 250, 40.0), _ours("Ordinal", 1, 250, 44.0, 5.0)],
    )

    rows = curve.assemble(curve.load([big, small]))

    assert [(r.pods, r.variant, r.runs) for r in rows] == [
        (2000, "Ordinal", 1),
        (8000, "Hash", 3),
        (8000, "upstream", 1),
    ]
    hash_row = rows[1]
    assert hash_row.floor_s == 102.0
    assert hash_row.ready_s == 120.0
    assert hash_row.x_floor == pytest.approx(1.2)
    assert hash_row.cpu == 30.0
    assert hash_row.cpu_ms_per_pod == pytest.approx(3.75)
    assert hash_row.peak_mib == 102.0
    assert hash_row.writes_per_group == 4.0
    # Upstream's lines have no memory figure: a dash, not a zero.
    assert rows[2].peak_mib is None
    assert rows[2].floor_s == 102.0


def test_table_and_series_name_each_identity(tmp_path: Path) -> None:
    rows = curve.assemble(
        [
            _line("floor", 1, 250, 40.0),
            _ours("Ordinal", 1, 250, 44.0, 5.0),
            _ours("Hash", 1, 250, 48.0, 7.0),
        ]
    )

    text = curve.table(rows)

    assert "Ordinal" in text.splitlines()[2] and "Hash" in text.splitlines()[3]
    assert curve.series(rows, "cpu") == {
        "ours Ordinal": [(2000.0, 5.0)],
        "ours Hash": [(2000.0, 7.0)],
    }
    assert curve.wall_series(rows)["floor"] == [(2000.0, 40.0)]


def test_a_result_of_ours_without_an_identity_is_an_error_naming_the_field() -> None:
    with pytest.raises(ValueError, match="mode None"):
        curve.assemble([_line("ours", 1, 250, 44.0)])


def test_a_line_that_is_not_json_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"config": "floor"}\nnot json\n')

    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        curve.load([path])


def test_plot_writes_the_curve_png(tmp_path: Path) -> None:
    rows = curve.assemble([_line("floor", 1, 250, 40.0), _ours("Hash", 1, 250, 48.0, 7.0)])

    path = curve.plot(rows, tmp_path)

    assert path == tmp_path / "curve.png"
    assert path.read_bytes().startswith(b"\x89PNG")


def test_each_invocation_gets_its_ready_chart_back(tmp_path: Path) -> None:
    first = [
        {**_line("floor", 1, 250, 40.0), "invocation": "a", "ready": [[0, 0], [40, 2000]]},
        {**_ours("Hash", 1, 250, 48.0, 7.0), "invocation": "a", "ready": [[0, 0], [48, 2000]]},
    ]
    second = [{**_line("floor", 1, 100, 20.0), "invocation": "b", "ready": [[0, 0], [20, 800]]}]

    paths = curve.plot_ready(first + second, tmp_path)

    assert paths == [tmp_path / "ready-250x8-hash.png", tmp_path / "ready-100x8-floor.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)
