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
        "scheduling": None,
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


def test_scheduling_adds_the_gang_floor_and_a_gang_variant_of_each_of_ours() -> None:
    configs = scale.configurations(
        _args(modes=["ordinal", "hash"], baseline=Path("src"), scheduling="both"), upstream=True
    )

    assert configs == [
        ("floor", None),
        ("floor-gang", None),
        ("base", "Ordinal"),
        ("ours", "Ordinal"),
        ("base-gang", "Ordinal"),
        ("ours-gang", "Ordinal"),
        ("base-hash", "Hash"),
        ("ours-hash", "Hash"),
        ("base-hash-gang", "Hash"),
        ("ours-hash-gang", "Hash"),
        # Upstream's v0.9.0 manager serves no spec.scheduling: never a gang.
        ("upstream", "Ordinal"),
    ]
    assert [name for name, _ in configs if scale.is_gang(name)] == [
        "floor-gang",
        "base-gang",
        "ours-gang",
        "base-hash-gang",
        "ours-hash-gang",
    ]


def test_scheduling_only_keeps_the_plain_floor_and_runs_ours_with_gangs() -> None:
    assert scale.configurations(_args(hash=True, scheduling="only"), upstream=False) == [
        ("floor", None),
        ("floor-gang", None),
        ("ours-gang", "Hash"),
    ]
    assert scale.configurations(_args(scheduling="only", no_floor=True), upstream=False) == [
        ("ours-gang", "Ordinal")
    ]


def test_a_gang_run_is_compared_with_both_floors_and_a_plain_one_with_the_floor_only() -> None:
    results = [
        _result("floor", 1, 100.0),
        _result("floor-gang", 1, 125.0),
        _result("ours", 1, 110.0, mode="Ordinal", cpu=10.0, writes=200),
        _result("ours-gang", 1, 150.0, mode="Ordinal", cpu=12.0, writes=300),
        _result("floor", 2, 50.0),
    ]
    ours, gang = results[2], results[3]

    assert scale.x_floor(gang, results) == 1.5
    assert scale.x_gang_floor(gang, results) == 1.2
    assert scale.x_gang_floor(results[1], results) == 1.0
    assert scale.x_gang_floor(ours, results) is None
    # No gang floor in run 2: no ratio rather than one against another run's.
    assert scale.x_gang_floor(_result("ours-gang", 2, 60.0), results) is None
    record = gang.record(scale.x_floor(gang, results), "t0", scale.x_gang_floor(gang, results))
    assert (record["x_floor"], record["x_gang_floor"]) == (1.5, 1.2)
    header, _, *rows = scale.table(results).splitlines()
    assert "x gang floor" in header
    assert rows[3].split()[:6] == ["ours-gang", "1", "150.0", "-", "1.50", "1.20"]
    assert rows[2].split()[:6] == ["ours", "1", "110.0", "-", "1.10", "-"]


def test_the_cost_table_has_each_process_cpu_and_our_writes_per_group_by_method() -> None:
    gang = _result(
        "ours-gang",
        1,
        150.0,
        mode="Hash",
        cpu=12.0,
        writes=55,
        writes_by_method={"POST": 30, "PUT": 5, "PATCH": 20, "DELETE": 0},
        process_cpu={"kube-scheduler": 40.0, "kube-apiserver": 120.0},
        pod_groups=10,
        pod_groups_placed=9,
    )
    floor = _result("floor", 1, 100.0, process_cpu={"kube-scheduler": 30.0})

    header, _, floor_row, gang_row = scale.cost_table([floor, gang]).splitlines()

    assert header.split()[-5:] == [
        "PUT/group",
        "PATCH/group",
        "DELETE/group",
        "PodGroups",
        "placed",
    ]
    assert " ".join(gang_row.split()) == (
        "ours-gang 1 150.0 1.50 - 12.0 40.0 120.0 - 3.00 0.50 2.00 0.00 9/10"
    )
    # The floor makes no writes of ours: its cells say so, not 0.
    assert " ".join(floor_row.split()) == "floor 1 100.0 1.00 - - 30.0 - - - - - - -"
    assert gang.per_group("POST") == 3.0 and floor.per_group("POST") is None
    assert "POST 30 (3.00/group)" in scale.writes_line(gang)
    assert scale.writes_line(floor) == ""
