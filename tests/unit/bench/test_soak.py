"""The soak's pure parts: its schedule, how counters become amounts, and its verdict."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path
from typing import Any

from bench.soak import schedule as s
from bench.soak.churn import Done
from bench.soak.report import QuietWindow, conditions, rss_condition, write
from bench.soak.sampler import Reading, Sample, Sampler, combine, grown, parse
from bench.soak.watch import (
    STUCK_BOUND,
    Settled,
    Watch,
    scheduler_held,
    unrest,
    unwhole_groups,
)

from leaderworkerset.api.leaderworkerset import constants as c
from tests.chaos.invariants import Snapshot
from tests.toolkit.pods import lws_labels
from tests.toolkit.pods import pod as a_pod

LWS = ["a", "b", "c"]
NODES = ["n1", "n2"]


def reading(pid: int = 1, **values: float) -> Reading:
    base = dict(
        rss_kib=100 * 1024,
        cpu=10.0,
        leading=False,
        writes=0.0,
        lease_writes=0.0,
        queue_depth=0.0,
        queue_wait_sum=0.0,
        queue_wait_count=0.0,
        watches=0.0,
        tasks=0.0,
    )
    base.update(values)
    return Reading(pid=pid, **base)  # type: ignore[arg-type]


# --- the schedule ------------------------------------------------------------------------


def test_an_hour_has_two_quiet_blocks_and_every_one_off_fault() -> None:
    blocks = s.plan(60, 1, LWS, NODES)
    assert len(blocks) == 12
    assert [b.index for b in blocks if b.quiet] == [5, 10]
    kinds = [a.kind for b in blocks for a in b.actions]
    for one_off in s.ONE_OFF:
        assert kinds.count(one_off) == s.ONE_OFF.count(one_off)
    assert all(not b.actions for b in blocks if b.quiet)


def test_the_leading_replica_dies_before_memory_is_judged() -> None:
    first = s.plan(60, 3, LWS, NODES)[0]
    assert first.actions[0].kind == s.KILL_LEADER_REPLICA
    assert first.actions[0].at == 0.0


def test_a_short_run_still_meets_every_fault_and_ends_quiet() -> None:
    blocks = s.plan(15, 1, LWS, NODES)
    assert [b.quiet for b in blocks] == [False, False, True]
    kinds = {a.kind for b in blocks for a in b.actions}
    assert set(s.ONE_OFF) <= kinds


def test_actions_finish_within_the_churn_window() -> None:
    for seed in range(20):
        for block in s.plan(60, seed, LWS, NODES):
            for action in block.actions:
                end = action.at
                if action.kind == s.NODE_DOWN:
                    end += s.NODE_DOWN_SECONDS
                assert 0 <= end <= s.CHURN_WINDOW, action
                if action.kind in s.ON_LWS:
                    assert action.target in LWS
                if action.kind in s.ON_NODE:
                    assert action.target in NODES


def test_the_relist_variant_relists_in_every_churn_block_and_keeps_the_standby() -> None:
    blocks = s.plan(60, 1, LWS, NODES, relists=True)
    for block in blocks:
        relists = [a for a in block.actions if a.kind in s.RELISTS]
        assert len(relists) == (0 if block.quiet else 1), block
    kinds = [a.kind for b in blocks for a in b.actions]
    assert s.KILL_STANDBY_REPLICA not in kinds
    assert kinds.count(s.KILL_LEADER_REPLICA) == 1
    assert {s.COMPACTION, s.RESTART_APISERVER} <= set(kinds)


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert s.plan(60, 5, LWS, NODES) == s.plan(60, 5, LWS, NODES)
    assert s.plan(60, 5, LWS, NODES) != s.plan(60, 6, LWS, NODES)


# --- counters ------------------------------------------------------------------------------


METRICS = """\
rest_client_requests_total{code="200",host="h",method="GET"} 500
rest_client_requests_total{code="200",host="h",method="PUT"} 40
rest_client_requests_total{code="201",host="h",method="POST"} 7
rest_client_requests_total{code="409",host="h",method="PATCH"} 3
lws_leader_election_lease_writes_total{name="b8ba15f5.x-k8s.io"} 30
workqueue_depth{controller="pod",name="pod"} 2
workqueue_depth{controller="leaderworkerset",name="leaderworkerset"} 1
workqueue_queue_duration_seconds_sum{controller="pod",name="pod"} 1.5
workqueue_queue_duration_seconds_count{controller="pod",name="pod"} 10
lws_watches_open{resource="pods"} 1
lws_watches_open{resource="statefulsets"} 1
lws_event_loop_tasks 143
leader_election_master_status{name="b8ba15f5.x-k8s.io"} 1
"""


def test_a_scrape_is_read_into_writes_leases_queues_watches_and_tasks() -> None:
    r = parse(42, 2048, 3.5, METRICS)
    assert r.leading
    assert (r.writes, r.lease_writes) == (50, 30)
    assert (r.queue_depth, r.queue_wait_sum, r.queue_wait_count) == (3, 1.5, 10)
    assert (r.watches, r.tasks) == (2, 143)


def test_a_restarted_replica_counts_from_zero() -> None:
    before, after = reading(pid=1, writes=100), reading(pid=1, writes=130)
    assert grown(before, after, "writes") == 30
    assert grown(before, reading(pid=2, writes=5), "writes") == 5
    assert grown(None, after, "writes") == 130


def test_a_sample_leaves_lease_renewals_out_of_the_writes() -> None:
    before = {
        "r0": reading(1, writes=100, lease_writes=60, cpu=10),
        "r1": reading(2, lease_writes=0),
    }
    after = {
        "r0": reading(1, writes=190, lease_writes=90, cpu=16, leading=True, rss_kib=200 * 1024),
        "r1": reading(2, writes=0, cpu=11, rss_kib=50 * 1024),
    }
    sample = combine(5.0, 2.0, before, after, events=7)
    assert sample.leader == "r0"
    assert sample.writes == 60  # 90 writes, 30 of them lease renewals
    assert sample.writes_per_minute == 30
    assert sample.cpu_seconds == 7  # 6 + 1 over the interval
    assert (sample.leader_rss_mib, sample.standby_rss_mib) == (200, 50)


# --- the verdict --------------------------------------------------------------------------


def samples(rss: list[float]) -> list[Sample]:
    out = []
    for minute, value in enumerate(rss, start=1):
        after = {"r0": reading(1, leading=True, rss_kib=int(value * 1024))}
        out.append(combine(float(minute), 1.0, {}, after, events=0))
    return out


def test_memory_that_grows_past_a_tenth_after_minute_15_fails() -> None:
    flat = [100.0] * 60
    assert rss_condition(samples(flat), 60).passed
    growing = [100.0] * 14 + [100.0 + minute for minute in range(46)]
    assert not rss_condition(samples(growing), 60).passed
    # What happens before the reference minute (the start, a replica killed) is not judged.
    start = [40.0] * 14 + [100.0] * 46
    assert rss_condition(samples(start), 60).passed
    # The leader started again (or replaced) after the reference: not the same heap.
    restarted = samples(flat)
    restarted[40] = dataclasses.replace(restarted[40], leader_pid=2)
    verdict = rss_condition(restarted, 60)
    assert not verdict.passed and "changed at minute 41" in verdict.measured


def test_the_relist_variant_holds_both_replicas_to_five_percent() -> None:
    def both(leader: float, standby: float, standby_pid: int = 2) -> Sample:
        after = {
            "r0": reading(1, leading=True, rss_kib=int(leader * 1024)),
            "r1": reading(standby_pid, rss_kib=int(standby * 1024)),
        }
        return combine(1.0, 1.0, {}, after, events=0)

    def rows(standby: list[float]) -> list[Sample]:
        out = []
        for minute, value in enumerate(standby, start=1):
            out.append(dataclasses.replace(both(100.0, value), minute=float(minute)))
        return out

    watch = Watch(api=None, log_paths=[])  # type: ignore[arg-type]
    watch.settles.append(Settled(0, 12.0, []))
    watch.polls = 20
    quiet = [QuietWindow(25, 5, 0)]
    flat = rows([80.0] * 60)
    assert all(c.passed for c in conditions(flat, watch, quiet, 60, relists=True))
    # +7 % on the standby: within the plain soak's 10 % on the leader, not the variant's.
    stepped = rows([80.0] * 30 + [85.6] * 30)
    assert all(c.passed for c in conditions(stepped, watch, quiet, 60))
    verdict = {c.what: c for c in conditions(stepped, watch, quiet, 60, relists=True)}
    standby = next(c for what, c in verdict.items() if what.startswith("standby RSS"))
    assert not standby.passed and "85.6" in standby.measured
    restarted = flat[:40] + [dataclasses.replace(r, standby_pid=3) for r in flat[40:]]
    changed = rss_condition(restarted, 60, "standby", 0.05)
    assert not changed.passed and "changed at minute 41" in changed.measured


def test_a_write_in_a_quiet_window_or_a_violation_fails_the_soak() -> None:
    watch = Watch(api=None, log_paths=[])  # type: ignore[arg-type]
    watch.settles.append(Settled(0, 12.0, []))
    watch.polls = 20
    rows = samples([100.0] * 60)
    quiet_ok = [QuietWindow(25, 5, 0)]
    assert all(c.passed for c in conditions(rows, watch, quiet_ok, 60))
    assert not all(c.passed for c in conditions(rows, watch, [QuietWindow(25, 5, 3)], 60))
    assert not all(c.passed for c in conditions(rows, watch, [], 60))
    # A replica away at either end of the window: its writes are unknown, not 0.
    assert not all(c.passed for c in conditions(rows, watch, [QuietWindow(25, 5, None)], 60))
    # The fleet never came to rest: 0 writes in that window prove nothing.
    unrested = [QuietWindow(25, 5, 0, rest_after=600, moving=["a: updatedReplicas 3 of 4"])]
    assert not all(c.passed for c in conditions(rows, watch, unrested, 60))
    watch.violations["a: unkeyed: pod x has no key"] = 30.0
    assert not all(c.passed for c in conditions(rows, watch, quiet_ok, 60))


def test_the_report_has_each_condition_its_table_and_chart(tmp_path: Path) -> None:
    watch = Watch(api=None, log_paths=[])  # type: ignore[arg-type]
    watch.settles.append(Settled(0, 12.0, []))
    watch.polls = 20
    done = [Done(30.0, s.SCALE, "a", "50 -> 52 groups"), Done(400.0, s.ROLLOUT, "b", "r1")]
    passed = write(
        tmp_path,
        minutes=10,
        seed=1,
        samples=samples([100.0] * 10),
        watch=watch,
        quiet=[QuietWindow(5, 5, 0)],
        done=done,
        restarts=1,
    )
    assert passed
    text = (tmp_path / "soak.md").read_text()
    assert text.count("| yes |") == 4
    assert "| 5 | r0 | 100.0 |" in text
    raw = json.loads((tmp_path / "soak.json").read_text())
    assert len(raw["samples"]) == 10 and raw["restarts"] == 1
    assert (tmp_path / "soak.png").read_bytes().startswith(b"\x89PNG")


# --- stuck groups ----------------------------------------------------------------------------


def pod(
    name: str, index: int, *, ready: bool, node: str | None = "n1", phase: str = "Running"
) -> dict:  # type: ignore[type-arg]
    return a_pod(
        name,
        labels=lws_labels(group_key="g1", worker=str(index)),
        node=node or None,
        spec={},
        phase=phase,
        ready=ready,
    )


def group(*workers: dict[str, Any]) -> Snapshot:
    leader = pod("g-0", 0, ready=True)
    others = [pod(f"g-{i}", i, ready=True) for i in range(1, 4 - len(workers))]
    return Snapshot(lws={}, pods=[leader, *others, *workers])


def test_a_whole_group_is_not_tracked_and_a_short_one_says_which_pod_holds_it() -> None:
    assert unwhole_groups(group(pod("g-3", 3, ready=True))) == {}
    held = unwhole_groups(group(pod("g-3", 3, ready=False, node=None, phase="Pending")))
    assert held == {"g1": "g-3 Pending never scheduled"}
    assert scheduler_held(held["g1"])
    # Found unschedulable (placement the controller may have got wrong): not excused.
    unschedulable = pod("g-3", 3, ready=False, node=None, phase="Pending")
    unschedulable["status"]["conditions"].append({"type": "PodScheduled", "status": "False"})
    refused = unwhole_groups(group(unschedulable))
    assert refused == {"g1": "g-3 Pending unbound"}
    assert not scheduler_held(refused["g1"])
    crashing = unwhole_groups(group(pod("g-3", 3, ready=False)))
    assert crashing == {"g1": "g-3 Running n1"}
    assert not scheduler_held(crashing["g1"])


def test_a_group_is_stuck_past_the_bound_and_only_the_controllers_count_against_it() -> None:
    watch = Watch(api=None, log_paths=[])  # type: ignore[arg-type]
    watch._track({"a/g1": "g-3 Pending never scheduled", "b/g2": "g-2 Running n1"}, now=0.0)
    watch._track({"a/g1": "g-3 Pending never scheduled", "b/g2": "g-2 Running n1"}, now=STUCK_BOUND)
    assert watch.stuck == {}
    watch._track(
        {"a/g1": "g-3 Pending never scheduled", "b/g2": "g-2 Running n1"}, now=STUCK_BOUND + 1
    )
    assert set(watch.stuck) == {"a/g1", "b/g2"}
    assert watch.stuck_on_controller() == ["b/g2"]
    # Whole again, then short again: the clock starts over.
    watch._track({}, now=STUCK_BOUND + 2)
    watch._track({"b/g2": "x"}, now=STUCK_BOUND + 3)
    watch._track({"b/g2": "x"}, now=STUCK_BOUND + 10)
    assert watch.stuck["b/g2"] == STUCK_BOUND + 1


def test_a_quiet_window_missing_a_replica_at_either_end_has_unknown_writes() -> None:
    procs = [types.SimpleNamespace(name="r0"), types.SimpleNamespace(name="r1")]
    sampler = Sampler(api=None, procs=procs)  # type: ignore[arg-type]
    start = {"r0": reading(1, writes=10), "r1": reading(2, writes=5)}
    end = {"r0": reading(1, writes=12, lease_writes=2), "r1": reading(2, writes=5)}
    assert sampler.writes_between(start, end) == 0
    assert sampler.writes_between(start, {"r0": end["r0"]}) is None
    restarted = {**end, "r1": reading(3, writes=1)}
    assert sampler.writes_between(start, restarted) is None


def test_too_many_missed_polls_fail_the_invariant_condition() -> None:
    watch = Watch(api=None, log_paths=[])  # type: ignore[arg-type]
    watch.polls, watch.missed_polls = 20, 10
    [violations, *_] = conditions(samples([100.0] * 60), watch, [QuietWindow(25, 5, 0)], 60)
    assert not violations.passed


def test_a_rollout_still_replacing_groups_or_a_group_not_whole_is_not_rest() -> None:
    def lws(updated: int, rolling: str = "False") -> dict[str, Any]:
        return {
            "spec": {"replicas": 1},
            "status": {
                "replicas": 1,
                "readyReplicas": 1,
                "updatedReplicas": updated,
                "conditions": [{"type": c.CONDITION_UPDATE_IN_PROGRESS, "status": rolling}],
            },
        }

    whole = group(pod("g-3", 3, ready=True)).pods
    assert unrest(Snapshot(lws=lws(1), pods=whole)) is None
    assert unrest(Snapshot(lws=lws(0), pods=whole)) == (
        "replicas 1, readyReplicas 1, updatedReplicas 0 of 1"
    )
    assert unrest(Snapshot(lws=lws(1, rolling="True"), pods=whole)) == "UpdateInProgress True"
    short = group(pod("g-3", 3, ready=False)).pods
    assert unrest(Snapshot(lws=lws(1), pods=short)) == "1 groups not whole"
