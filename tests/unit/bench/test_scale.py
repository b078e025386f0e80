"""What bench.scale decides without a cluster: its configurations, its table's ratios
and the JSON line of a result."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from bench import scale


def _args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {
        "modes": None,
        "hash": False,
        "no_floor": False,
        "baseline": None,
        "replicas": 10,
        "size": 4,
        "runs": 1,
        "plot": None,
    }
    return argparse.Namespace(**{**defaults, **given})


def test_both_modes_give_ours_twice_and_upstream_ordinal() -> None:
    configs = scale.configurations(_args(modes=["ordinal", "hash"]), upstream=True)

    assert configs == [
        ("floor", None),
        ("ours", "Ordinal"),
        ("ours-hash", "Hash"),
        ("upstream", "Ordinal"),
    ]


def test_hash_alone_keeps_the_name_ours() -> None:
    assert scale.configurations(_args(hash=True), upstream=False) == [
        ("floor", None),
        ("ours", "Hash"),
    ]
    assert scale.configurations(_args(modes=["hash"], baseline=Path("src")), upstream=False) == [
        ("floor", None),
        ("base", "Hash"),
        ("ours", "Hash"),
    ]


def test_modes_rejects_an_unknown_identity_by_the_flag_name() -> None:
    assert scale._modes("Hash, ordinal,hash") == ["hash", "ordinal"]
    with pytest.raises(argparse.ArgumentTypeError, match="--modes: leader"):
        scale._modes("ordinal,leader")


def _result(config: str, run: int, seconds: float, **extra: object) -> scale.Result:
    return scale.Result(config, run, seconds, replicas=10, size=4, **extra)  # type: ignore[arg-type]


def test_the_json_line_has_per_pod_and_per_group_figures_and_the_floor_ratio() -> None:
    floor = _result("floor", 1, 20.0)
    other_floor = _result("floor", 2, 10.0)
    ours = _result(
        "ours",
        1,
        25.0,
        mode="Hash",
        cpu=2.0,
        writes=35,
        process_cpu={"kube-apiserver": 9.0},
        ready=[(0.0, 0), (1.0, 1), (2.0, 2)],
    )
    results = [floor, other_floor, ours]

    record = json.loads(json.dumps(ours.record(scale.x_floor(ours, results), "t0")))

    assert record["x_floor"] == 1.25
    assert record["cpu_ms_per_pod"] == 50.0
    assert record["writes_per_group"] == 3.5
    assert record["pods"] == 40
    assert record["mode"] == "Hash"
    assert record["process_cpu"] == {"kube-apiserver": 9.0}
    assert record["ready"] == [[0.0, 0], [1.0, 1], [2.0, 2]]
    assert "1.25" in scale.table(results).splitlines()[-1]


def test_the_ready_chart_is_named_after_size_and_modes(tmp_path: Path) -> None:
    results = [
        _result("floor", 1, 2.0, ready=[(0.0, 0), (2.0, 40)]),
        _result("ours-hash", 1, 3.0, mode="Hash", ready=[(0.0, 0), (3.0, 40)]),
        _result("upstream", 1, 3.0, mode="Ordinal", ready=[(0.0, 0), (3.0, 40)]),
    ]

    path = scale.plot_ready(results, tmp_path)

    assert path == tmp_path / "ready-10x4-hash.png"
    assert path.read_bytes().startswith(b"\x89PNG")


def test_a_json_line_gives_back_its_result() -> None:
    ours = _result("ours", 2, 25.0, mode="Hash", cpu=2.0, writes=35, ready=[(0.0, 0), (1.5, 40)])

    again = scale.Result.from_record(json.loads(json.dumps(ours.record(1.1, "t0"))))

    assert again.config == "ours" and again.run == 2 and again.mode == "Hash"
    assert (again.cpu, again.writes, again.replicas, again.size) == (2.0, 35, 10, 4)
    assert again.ready == [(0.0, 0), (1.5, 40)]
