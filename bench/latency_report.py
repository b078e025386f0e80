"""What the user-facing latency benchmark (bench.latency) reports: one configuration's
result, its percentiles, the markdown table of ours against Go, the steps of a rollout
and the recovery chart. Pure: no cluster needed, unit-tested on their own."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bench import plots

GO = "go"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..1): an observed value, so that the p99 of
    ten recoveries is the slowest of them rather than a value past it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Result:
    config: str
    run: int
    mode: str
    replicas: int
    size: int
    # Seconds from the create to every group whole and Ready (the pod watch), and to the
    # LeaderWorkerSet's status saying so.
    create_s: float | None = None
    create_lws_s: float | None = None
    # Seconds from the kill to each killed group whole and Ready again, by how it was
    # killed ("crash", "delete", or "-" where the replacement has a new key).
    recovery: list[float] = field(default_factory=list)
    recovery_kinds: list[str] = field(default_factory=list)
    rollout_s: float | None = None
    rollout_lws_s: float | None = None
    # (seconds since the rollout began, partition) for each partition the driver saw.
    partitions: list[tuple[float, int]] = field(default_factory=list)
    # Seconds since the rollout began at which each group (by index) was whole, Ready
    # and updated.
    updated_at: dict[str, float] = field(default_factory=dict)
    # The median over the groups of each part of a group's replacement in the rollout
    # (see `rollout_phases`), seconds.
    rollout_phases: dict[str, float] = field(default_factory=dict)
    scale_up_s: float | None = None
    scale_down_s: float | None = None
    delete_s: float | None = None
    # CPU seconds of the manager by phase, and over the whole run.
    cpu: dict[str, float] = field(default_factory=dict)
    peak_rss_mib: float | None = None
    peak_pss_mib: float | None = None
    termination_delay: float = 0.0
    # The phase that did not finish and why ("recovery: not done in 600s"); the phases
    # after it were not run.
    failed: str | None = None

    def recovery_p(self, q: float, kind: str | None = None) -> float | None:
        values = [
            v
            for v, k in zip(self.recovery, self.recovery_kinds, strict=True)
            if kind is None or k == kind
        ]
        return percentile(values, q)

    def record(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["recovery_p50"] = self.recovery_p(0.5)
        out["recovery_p99"] = self.recovery_p(0.99)
        out["recovery_max"] = max(self.recovery) if self.recovery else None
        out["steps"] = [vars(s) for s in rollout_steps(self.partitions, self.updated_at)]
        return out

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Result:
        names = {f.name for f in fields(cls)}
        result = cls(**{k: v for k, v in record.items() if k in names})
        result.partitions = [(float(t), int(p)) for t, p in result.partitions]
        return result


# -- the steps of a rollout -------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One partition step of an Ordinal rollout: lowered at `at` to `partition`; the
    groups it let update were all whole, Ready and updated at `ready`; the next step
    came `wait` seconds after that (what the controller took to notice and act)."""

    at: float
    partition: int
    groups: int
    ready: float | None
    wait: float | None


def rollout_steps(
    partitions: Sequence[tuple[float, int]], updated_at: dict[str, float]
) -> list[Step]:
    """The steps of a rollout from the partitions the leader StatefulSet went through
    (the first is the replica count the rollout starts from) and when each group was
    updated and Ready again."""
    steps: list[Step] = []
    lowered = [(t, p) for i, (t, p) in enumerate(partitions) if i == 0 or p < partitions[i - 1][1]]
    for i, (at, partition) in enumerate(lowered[1:], start=1):
        above = lowered[i - 1][1]
        indices = [str(g) for g in range(partition, above)]
        times = [updated_at[g] for g in indices if g in updated_at]
        ready = max(times) if times and len(times) == len(indices) else None
        steps.append(Step(at, partition, len(indices), ready, None))
    for i, step in enumerate(steps[:-1]):
        following = steps[i + 1]
        if step.ready is not None:
            steps[i] = Step(
                step.at, step.partition, step.groups, step.ready, following.at - step.ready
            )
    return steps


@dataclass(frozen=True)
class GroupReplacement:
    """When (seconds since the rollout began) each part of one Ordinal group's
    replacement happened, as the driver's pod watch saw it; None if not seen."""

    old_deleting: float | None
    old_gone: float | None
    new_leader: float | None
    new_worker: float | None
    ready: float | None


PHASES = (
    "partition to old leader deleting",
    "old leader deleting to gone",
    "old leader gone to new leader",
    "new leader to first new worker",
    "first new worker to group Ready",
)


def rollout_phases(
    partitions: Sequence[tuple[float, int]], groups: dict[str, GroupReplacement]
) -> dict[str, float]:
    """The median over the groups of each part of their replacement: the StatefulSet
    controller acting on the partition, the old leader's termination, the new leader's
    creation, the old workers' teardown and the new worker StatefulSet, the new workers
    to Ready. Together with the wait for the next step, what a step is made of."""
    parts: dict[str, list[float]] = {name: [] for name in PHASES}
    for index, g in groups.items():
        if not index.isdigit():
            continue
        lowered = next((t for t, p in partitions if p <= int(index)), None)
        marks = [lowered, g.old_deleting, g.old_gone, g.new_leader, g.new_worker, g.ready]
        for name, start, end in zip(PHASES, marks, marks[1:], strict=False):
            if start is not None and end is not None:
                parts[name].append(end - start)
    return {name: round(statistics.median(v), 2) for name, v in parts.items() if v}


def steps_line(result: Result) -> str:
    """The rollout's steps in one line: how long each took to be Ready, and how long the
    next one waited after that."""
    steps = rollout_steps(result.partitions, result.updated_at)
    if not steps:
        return ""
    took = [s.ready - s.at for s in steps if s.ready is not None]
    waits = [s.wait for s in steps if s.wait is not None]
    phases = "; ".join(f"{name} {v:.2f}" for name, v in result.rollout_phases.items())
    return (
        f"{len(steps)} partition steps; step to its groups Ready p50 {_fmt(_median(took))} s "
        f"max {_fmt(max(took, default=None))} s; last group Ready to the next step p50 "
        f"{_fmt(_median(waits))} s max {_fmt(max(waits, default=None))} s"
        + (f"\n  per group, p50 s: {phases}" if phases else "")
    )


# -- the table --------------------------------------------------------------------------------

# (row label, how to read it from a result); a row where no configuration has a value
# is left out.
ROWS: list[tuple[str, Any]] = [
    ("create: all groups Ready, s", lambda r: r.create_s),
    ("create: LWS Ready, s", lambda r: r.create_lws_s),
    ("recovery p50, s", lambda r: r.recovery_p(0.5)),
    ("recovery p99, s", lambda r: r.recovery_p(0.99)),
    ("recovery max, s", lambda r: max(r.recovery) if r.recovery else None),
    ("recovery p50, crash, s", lambda r: r.recovery_p(0.5, "crash")),
    ("recovery p50, leader deleted, s", lambda r: r.recovery_p(0.5, "delete")),
    ("rolling update: all updated and Ready, s", lambda r: r.rollout_s),
    ("rolling update: LWS Ready, s", lambda r: r.rollout_lws_s),
    ("scale N to 2N: all Ready, s", lambda r: r.scale_up_s),
    ("scale 2N to N: pods gone, s", lambda r: r.scale_down_s),
    ("delete LWS: last pod gone, s", lambda r: r.delete_s),
    ("CPU s, whole run", lambda r: r.cpu.get("total")),
    ("CPU s, create", lambda r: r.cpu.get("create")),
    ("CPU s, rolling update", lambda r: r.cpu.get("rollout")),
    ("peak RSS, MiB", lambda r: r.peak_rss_mib),
]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cell(values: list[float]) -> str:
    """The median, and the range when there are several runs."""
    if not values:
        return "-"
    middle = _fmt(_median(values), 2 if max(values) < 10 else 1)
    if len(values) == 1:
        return middle
    return f"{middle} ({min(values):.1f}-{max(values):.1f})"


def table(results: Sequence[Result]) -> str:
    """A markdown table, a column per configuration (the median over runs, with the
    range), and the ratio of each other configuration's median to Go's."""
    configs = list(dict.fromkeys(r.config for r in results))
    others = [c for c in configs if c != GO] if GO in configs else []
    header = ["", *configs, *(f"{c} / go" for c in others)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, read in ROWS:
        values = {
            c: [v for r in results if r.config == c and (v := read(r)) is not None] for c in configs
        }
        if not any(values.values()):
            continue
        cells = [_cell(values[c]) for c in configs]
        for c in others:
            mine, go = _median(values[c]), _median(values[GO])
            cells.append(f"{mine / go:.2f}x" if mine is not None and go else "-")
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


# -- the chart --------------------------------------------------------------------------------


def recovery_curves(results: Sequence[Result]) -> dict[str, list[tuple[float, float]]]:
    """Per configuration (runs pooled), the share of killed groups whole and Ready
    again by each second after the kill: a step line from (0, 0)."""
    pooled: dict[str, list[float]] = {}
    for r in results:
        pooled.setdefault(r.config, []).extend(r.recovery)
    curves = {}
    for config, values in pooled.items():
        ordered = sorted(values)
        n = len(ordered)
        curves[f"{config} ({n} groups)"] = [(0.0, 0.0)] + [
            (v, (i + 1) / n) for i, v in enumerate(ordered)
        ]
    return curves


def plot_recovery(results: Sequence[Result], path: Path) -> Path:
    first = results[0]
    title = (
        f"Killed groups whole and Ready again, {first.replicas} groups x {first.size}, "
        f"{len(first.recovery)} killed per run"
    )
    return plots.line_chart(
        path,
        title,
        "seconds after the kill",
        "share of killed groups recovered",
        recovery_curves(results),
        step=True,
    )
