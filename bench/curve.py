"""The cost curve: the JSON lines of one or more `bench.scale --json` invocations as a
table, a row per size and identity, and with --plot a chart of it:

    python -m bench.curve results/*.jsonl [--plot DIR]

Each figure is the median over the runs at that size (`runs` says how many); x floor is
the median of each run's ratio to the floor of the same run. CPU ms per pod that stays
flat as pods grow is a linear cost; where it climbs, the cost stopped being linear.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import plots
from bench.scale import cell

JSON = dict[str, Any]
# The rows of a size, in this order: ours per identity, then the Go manager.
VARIANTS = ("Ordinal", "Hash", "upstream")


@dataclass
class Row:
    groups: int
    size: int
    variant: str
    runs: int
    floor_s: float | None
    ready_s: float | None
    x_floor: float | None
    cpu: float | None
    cpu_ms_per_pod: float | None
    peak_mib: float | None
    kib_per_pod: float | None
    writes_per_group: float | None

    @property
    def pods(self) -> int:
        return self.groups * self.size


def load(paths: Iterable[Path]) -> list[JSON]:
    """Every JSON line of these files, blank lines skipped."""
    records = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line: {exc}") from exc
    return records


def variant(record: JSON) -> str | None:
    """Which row a result belongs to: ours by its identity, or upstream; None for the
    floor and for a --baseline tree (neither is a curve of its own)."""
    config = str(record.get("config", ""))
    if config == "upstream":
        return "upstream"
    if config.startswith("ours"):
        mode = record.get("mode")
        if mode not in VARIANTS[:2]:
            raise ValueError(f"result {config} run {record.get('run')}: mode {mode!r}")
        return str(mode)
    return None


def _median(records: list[JSON], key: str) -> float | None:
    values = [float(r[key]) for r in records if r.get(key) is not None]
    return statistics.median(values) if values else None


def assemble(records: list[JSON]) -> list[Row]:
    """A row per (groups, size, variant) that has results, smallest size first."""
    sizes = {(int(r["replicas"]), int(r["size"])) for r in records}
    rows = []
    for groups, size in sorted(sizes, key=lambda k: (k[0] * k[1], k)):
        here = [r for r in records if (r["replicas"], r["size"]) == (groups, size)]
        floors = [r for r in here if r.get("config") == "floor"]
        for name in VARIANTS:
            mine = [r for r in here if variant(r) == name]
            if not mine:
                continue
            rows.append(
                Row(
                    groups=groups,
                    size=size,
                    variant=name,
                    runs=len(mine),
                    floor_s=_median(floors, "pods_ready"),
                    ready_s=_median(mine, "pods_ready"),
                    x_floor=_median(mine, "x_floor"),
                    cpu=_median(mine, "cpu"),
                    cpu_ms_per_pod=_median(mine, "cpu_ms_per_pod"),
                    peak_mib=_median(mine, "peak_mib"),
                    kib_per_pod=_median(mine, "kib_per_pod"),
                    writes_per_group=_median(mine, "writes_per_group"),
                )
            )
    return rows


def table(rows: list[Row]) -> str:
    header = (
        f"{'groups':>6} {'pods':>6} {'variant':<8} {'runs':>4} {'floor s':>7} {'ready s':>7} "
        f"{'x floor':>7} {'CPU s':>7} {'ms/pod':>6} {'peak MiB':>8} {'KiB/pod':>7} {'w/group':>7}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.groups:>6} {r.pods:>6} {r.variant:<8} {r.runs:>4} {cell(r.floor_s, '.1f'):>7} "
            f"{cell(r.ready_s, '.1f'):>7} {cell(r.x_floor, '.2f'):>7} {cell(r.cpu, '.1f'):>7} "
            f"{cell(r.cpu_ms_per_pod, '.2f'):>6} {cell(r.peak_mib, '.0f'):>8} "
            f"{cell(r.kib_per_pod, '.1f'):>7} {cell(r.writes_per_group, '.2f'):>7}"
        )
    return "\n".join(lines)


def series(rows: list[Row], attr: str) -> dict[str, list[tuple[float, float]]]:
    """(pods, figure) per line of the chart (ours per identity, upstream), where the
    variant has the figure."""
    out: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        value = getattr(r, attr)
        if value is not None:
            name = r.variant if r.variant == "upstream" else f"ours {r.variant}"
            out.setdefault(name, []).append((float(r.pods), float(value)))
    return out


def wall_series(rows: list[Row]) -> dict[str, list[tuple[float, float]]]:
    """Seconds to all pods Ready: each variant, then the floor once per size (last, so
    that a variant keeps the color it has in the other panels)."""
    floors = {r.pods: r.floor_s for r in rows if r.floor_s is not None}
    lines = series(rows, "ready_s")
    lines["floor"] = [(float(p), float(s)) for p, s in sorted(floors.items())]
    return {name: points for name, points in lines.items() if points}


def plot(rows: list[Row], directory: Path) -> Path:
    return plots.panels(
        directory / "curve.png",
        "Cost against pods (median of runs)",
        "pods",
        [
            ("CPU s", series(rows, "cpu")),
            ("peak MiB", series(rows, "peak_mib")),
            ("writes per group", series(rows, "writes_per_group")),
            ("s to all Ready", wall_series(rows)),
        ],
        from_zero=True,
    )


def plot_ready(records: list[JSON], directory: Path) -> list[Path]:
    """bench.scale's Ready-over-time chart of each invocation, redrawn from its JSON
    lines (their thinned series): a chart for docs without running again."""
    # Imported here: bench.scale brings the local cluster's modules, which the table
    # and the curve do not need.
    from bench import scale

    runs: dict[str, list[JSON]] = {}
    for record in records:
        runs.setdefault(str(record.get("invocation", "")), []).append(record)
    return [
        scale.plot_ready([scale.Result.from_record(r) for r in mine], directory)
        for mine in runs.values()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path, help="JSON lines of bench.scale --json")
    parser.add_argument(
        "--plot", metavar="DIR", type=Path, help="write curve.png and each run's Ready chart here"
    )
    args = parser.parse_args()
    records = load(args.files)
    rows = assemble(records)
    print(table(rows))
    if args.plot:
        for path in [plot(rows, args.plot), *plot_ready(records, args.plot)]:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
