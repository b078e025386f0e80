"""The soak's verdict: each pass condition beside its measured value, the table of
samples every 5 minutes, the charts, and everything as JSON for a later look."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lws_localcluster.controlplane import Revived

from bench.plots import panels
from bench.soak.churn import Done
from bench.soak.sampler import Sample
from bench.soak.watch import STUCK_BOUND, Watch

RSS_TOLERANCE = 0.10
# The relist variant's bound: a relist must cost no lasting memory (docs/soak.md).
RELIST_RSS_TOLERANCE = 0.05
# More polls than this missed (the API server away) and the checker saw too little.
MISSED_POLLS_SHARE = 0.1


@dataclass(frozen=True)
class QuietWindow:
    minute: float
    minutes: float
    writes: float | None  # None: a replica was away at either end (see Sampler.complete)
    # The controller's writes the API server's audit log names, most frequent first.
    what: Sequence[str] = ()
    rest_after: float = 0.0  # seconds the window waited for the fleet to come to rest
    moving: Sequence[str] = ()  # what had not, when the wait gave up (then it fails)

    def measured(self) -> str:
        writes = "unknown" if self.writes is None else f"{self.writes:.0f}"
        if self.moving:
            rest = f"never at rest: {', '.join(self.moving)}"
        else:
            rest = f"at rest after {self.rest_after:.0f} s"
        end = self.minute + self.minutes
        return f"{writes} writes in minutes {self.minute:.0f}-{end:.0f} ({rest})"


@dataclass(frozen=True)
class Condition:
    what: str
    measured: str
    passed: bool


def rss_reference_minute(minutes: float) -> float:
    """Minute 15 of an hour: a quarter of the way in."""
    return minutes / 4


def rss_condition(
    samples: Sequence[Sample],
    minutes: float,
    replica: str = "leader",
    tolerance: float = RSS_TOLERANCE,
) -> Condition:
    """Judged on one process, the replica's (``leader`` or ``standby``) at the reference
    minute: one started again or replaced after it fails the condition (its heap is
    another's)."""

    def pid(sample: Sample) -> int:
        return int(getattr(sample, f"{replica}_pid"))

    def rss(sample: Sample) -> float:
        return float(getattr(sample, f"{replica}_rss_mib"))

    reference_at = rss_reference_minute(minutes)
    after = [s for s in samples if s.minute >= reference_at - 0.5 and rss(s)]
    what = (
        f"{replica} RSS from minute {reference_at:.0f} to the end within "
        f"{tolerance:.0%} of its value at minute {reference_at:.0f}"
    )
    if not after:
        return Condition(what, "no samples", False)
    first = pid(after[0])
    others = [s for s in after if pid(s) != first]
    if others:
        measured = f"the {replica}'s process changed at minute {others[0].minute:.0f}"
        return Condition(what, measured, False)
    reference = rss(after[0])
    low = min(rss(s) for s in after)
    high = max(rss(s) for s in after)
    worst = max(abs(high - reference), abs(reference - low)) / reference
    measured = (
        f"{reference:.1f} MiB at minute {after[0].minute:.0f}; {low:.1f}-{high:.1f} MiB "
        f"after ({worst:+.1%} at most), one process throughout"
    )
    return Condition(what, measured, worst <= tolerance)


def conditions(
    samples: Sequence[Sample],
    watch: Watch,
    quiet: Sequence[QuietWindow],
    minutes: float,
    relists: bool = False,
) -> list[Condition]:
    """The pass conditions; with ``relists`` (a relist in every churn block) memory is
    held to RELIST_RSS_TOLERANCE, for the standby as well as the leader."""
    settle_worst = max((s.seconds for s in watch.settles), default=0.0)
    unsettled = [s for s in watch.settles if s.violations]
    on_us = watch.stuck_on_controller()
    held = [g for g in watch.stuck if g not in on_us]
    quiet_text = "; ".join(q.measured() for q in quiet)
    polls_ok = watch.missed_polls <= MISSED_POLLS_SHARE * max(watch.polls, 1)
    return [
        Condition(
            "0 invariant violations (at every poll, and after every churn block)",
            f"{len(watch.violations)} over {watch.polls} polls ({watch.missed_polls} missed "
            f"while the API server was away) and {len(watch.settles)} settles",
            not watch.violations and watch.polls > 0 and polls_ok,
        ),
        Condition(
            f"0 groups stuck: none short of Ready pods for over {STUCK_BOUND:.0f} s on the "
            "controller's account, every churn block settled within its bound",
            f"{len(on_us)} stuck on the controller, {len(held)} on kube-scheduler (a pod "
            f"never bound); {len(unsettled)} blocks unsettled; slowest settle "
            f"{settle_worst:.0f} s",
            not on_us and not unsettled,
        ),
        *(
            [
                rss_condition(samples, minutes, replica, RELIST_RSS_TOLERANCE)
                for replica in ("leader", "standby")
            ]
            if relists
            else [rss_condition(samples, minutes)]
        ),
        Condition(
            "0 writes in a 5-minute quiet window (lease renewals left out), opened once the "
            "churn before it has finished (rollouts done, every group whole)",
            quiet_text or "no quiet window",
            bool(quiet) and all(q.writes == 0 and not q.moving for q in quiet),
        ),
    ]


def table(samples: Sequence[Sample], done: Sequence[Done], every: float = 5.0) -> str:
    header = (
        "| minute | leader | leader RSS MiB | standby RSS MiB | CPU s | writes/min | "
        "actions | queue depth | queue wait ms | watches | tasks | Events |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    last_minute = 0.0
    for s in _every(samples, every):
        acts = sum(1 for d in done if last_minute * 60 <= d.at < s.minute * 60)
        cpu = sum(x.cpu_seconds for x in samples if last_minute < x.minute <= s.minute)
        writes = sum(x.writes for x in samples if last_minute < x.minute <= s.minute)
        span = max(s.minute - last_minute, 1e-9)
        wait = "-" if s.queue_wait_ms is None else f"{s.queue_wait_ms:.1f}"
        lines.append(
            f"| {s.minute:.0f} | {s.leader or '-'} | {s.leader_rss_mib:.1f} | "
            f"{s.standby_rss_mib:.1f} | {cpu:.1f} | {writes / span:.1f} | {acts} | "
            f"{s.queue_depth:.0f} | {wait} | {s.watches:.0f} | {s.tasks:.0f} | {s.events} |"
        )
        last_minute = s.minute
    return "\n".join(lines)


def _every(samples: Sequence[Sample], every: float) -> list[Sample]:
    """The sample nearest each multiple of `every` minutes, and the last."""
    picked: list[Sample] = []
    for s in samples:
        if not picked or int(s.minute // every) > int(picked[-1].minute // every):
            picked.append(s)
    if samples and picked[-1] is not samples[-1]:
        picked.append(samples[-1])
    return picked


def charts(out: Path, samples: Sequence[Sample], done: Sequence[Done]) -> Path:
    per_minute: dict[int, int] = {}
    for d in done:
        per_minute[int(d.at // 60)] = per_minute.get(int(d.at // 60), 0) + 1
    last = int(samples[-1].minute) if samples else 0
    actions = [(float(m), float(per_minute.get(m, 0))) for m in range(last + 1)]
    return panels(
        out / "soak.png",
        "Soak: the controller over time",
        "minutes",
        [
            (
                "RSS MiB",
                {
                    "leader": [(s.minute, s.leader_rss_mib) for s in samples],
                    "standby": [(s.minute, s.standby_rss_mib) for s in samples],
                },
            ),
            (
                "CPU % of a core",
                {"both replicas": [(s.minute, _cpu_percent(s)) for s in samples]},
            ),
            (
                "per minute",
                {
                    "object writes": [(s.minute, s.writes_per_minute) for s in samples],
                    "churn actions": actions,
                },
            ),
            (
                "open watches, tasks",
                {
                    "watches": [(s.minute, s.watches) for s in samples],
                    "loop tasks": [(s.minute, s.tasks) for s in samples],
                },
            ),
        ],
    )


def write(
    out: Path,
    *,
    minutes: float,
    seed: int,
    samples: Sequence[Sample],
    watch: Watch,
    quiet: Sequence[QuietWindow],
    done: Sequence[Done],
    restarts: int = 0,
    revived: Sequence[tuple[float, Revived]] = (),
    relists: bool = False,
) -> bool:
    out.mkdir(parents=True, exist_ok=True)
    verdict = conditions(samples, watch, quiet, minutes, relists)
    variant = ", a relist in every churn block" if relists else ""
    lines = [
        f"# Soak: {minutes:g} minutes, seed {seed}{variant}",
        "",
        "| pass condition | measured | passed |",
        "|---|---|---|",
        *(f"| {c.what} | {c.measured} | {'yes' if c.passed else 'NO'} |" for c in verdict),
        "",
        table(samples, done),
        "",
        "Actions by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(_kinds(done).items())),
        "",
        "Writes in the quiet windows, from the audit log:",
        *(f"- minute {q.minute:.0f}: {', '.join(q.what) or 'none'}" for q in quiet),
        "",
        "Violations:",
        *(f"- at {at / 60:.1f} min: {v}" for v, at in watch.violations.items()),
        "Stuck groups:",
        *(f"- {g}: {s:.0f} s; {watch.stuck_why.get(g, '')}" for g, s in watch.stuck.items()),
        "",
        f"Controller replicas started again by the supervisor: {restarts}.",
        "Control-plane components that exited and were started again (as a kubelet would):",
        *(
            f"- minute {m:.1f}: {r.component}, exit code {r.exit_code}; last line: `{r.last_line}`"
            for m, r in revived
        ),
    ]
    text = "\n".join(lines) + "\n"
    (out / "soak.md").write_text(text)
    print(text, flush=True)
    raw = {
        "minutes": minutes,
        "seed": seed,
        "relists": relists,
        "conditions": [dataclasses.asdict(c) for c in verdict],
        "samples": [dataclasses.asdict(s) for s in samples],
        "quiet": [dataclasses.asdict(q) for q in quiet],
        "actions": [dataclasses.asdict(d) for d in done],
        "settles": [dataclasses.asdict(s) for s in watch.settles],
        "violations": watch.violations,
        "stuck": watch.stuck,
        "stuck_why": watch.stuck_why,
        "polls": watch.polls,
        "missed_polls": watch.missed_polls,
        "restarts": restarts,
        "revived": [{"minute": m, **dataclasses.asdict(r)} for m, r in revived],
    }
    (out / "soak.json").write_text(json.dumps(raw, indent=1))
    if samples:
        charts(out, samples, done)
    return all(c.passed for c in verdict)


def _kinds(done: Sequence[Done]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in done:
        counts[d.kind] = counts.get(d.kind, 0) + 1
    return counts


def _cpu_percent(s: Sample) -> float:
    return 100 * s.cpu_seconds / (60 * s.interval_minutes) if s.interval_minutes else 0.0
