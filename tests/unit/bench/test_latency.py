"""The latency benchmark's pure parts: whole groups from its pod watch, percentiles, the
steps of a rollout and the table of ours against Go."""

from __future__ import annotations

from bench.latency_groups import PodSeen, ReadySince, whole_groups
from bench.latency_report import (
    GroupReplacement,
    Result,
    percentile,
    recovery_curves,
    rollout_phases,
    rollout_steps,
    table,
)


def _pod(uid: str, key: str, leader: bool = False, **kw: object) -> PodSeen:
    fields: dict[str, object] = {"ready": True, "deleting": False, "marker": "1", "index": key}
    fields.update(kw)
    return PodSeen(uid=uid, name=uid, key=key, leader=leader, **fields)  # type: ignore[arg-type]


def test_percentile_is_an_observed_value_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 0.5) == 5
    assert percentile(values, 0.99) == 10
    assert percentile(values, 0.0) == 1
    assert percentile([], 0.5) is None


def test_a_group_is_whole_when_every_pod_is_ready_and_none_is_going() -> None:
    since = ReadySince()
    pods = [_pod("l", "a", leader=True), _pod("w1", "a"), _pod("w2", "b", leader=True)]
    for at, p in enumerate(pods):
        since.observe(p, float(at))
    groups = whole_groups(pods, 2, since)
    assert [(g.key, g.ready_at) for g in groups] == [("a", 1.0)]
    # A worker going, or one from an earlier generation, does not make a group.
    going = [pods[0], _pod("w1", "a", deleting=True)]
    since.observe(going[1], 5.0)
    assert whole_groups(going, 2, since) == []
    assert whole_groups(pods, 2, since, exclude={"w1"}) == []
    # Not on the revision asked for.
    assert whole_groups(pods[:2], 2, since, marker="2") == []


def test_ready_since_forgets_a_pod_that_stops_being_ready() -> None:
    since = ReadySince()
    since.observe(_pod("p", "a"), 1.0)
    since.observe(_pod("p", "a"), 2.0)
    assert since.at == {"p": 1.0}
    since.observe(_pod("p", "a", ready=False), 3.0)
    since.observe(_pod("p", "a"), 4.0)
    assert since.at == {"p": 4.0}


def test_rollout_steps_say_what_each_partition_step_waited_on() -> None:
    # 4 groups, 2 a step: 4 -> 2 at 1 s, groups 2 and 3 Ready at 5 and 6 s, 2 -> 0 at
    # 6.5 s, groups 0 and 1 Ready at 9 and 10 s.
    partitions = [(0.2, 4), (1.0, 2), (6.5, 0)]
    updated = {"0": 9.0, "1": 10.0, "2": 5.0, "3": 6.0}
    steps = rollout_steps(partitions, updated)
    assert [(s.partition, s.groups, s.ready, s.wait) for s in steps] == [
        (2, 2, 6.0, 0.5),
        (0, 2, 10.0, None),
    ]


def _result(config: str, run: int, rollout: float, recovery: list[float]) -> Result:
    return Result(
        config,
        run,
        "Ordinal",
        100,
        4,
        rollout_s=rollout,
        recovery=recovery,
        recovery_kinds=["crash"] * len(recovery),
    )


def test_the_table_has_the_median_the_range_and_the_ratio_to_go() -> None:
    results = [
        _result("ours", 1, 20.0, [1.0, 2.0]),
        _result("go", 1, 16.0, [1.0, 4.0]),
        _result("ours", 2, 22.0, [1.0]),
        _result("go", 2, 16.0, [2.0]),
    ]
    lines = table(results).splitlines()
    assert lines[0] == "|  | ours | go | ours / go |"
    rollout = next(line for line in lines if line.startswith("| rolling update: all"))
    cells = [cell.strip() for cell in rollout.strip("|").split("|")]
    assert cells == ["rolling update: all updated and Ready, s", "21.0 (20.0-22.0)",
                     "16.0 (16.0-16.0)", "1.31x"]  # fmt: skip
    # Rows no configuration measured are left out.
    assert not any(line.startswith("| delete LWS") for line in lines)


def test_recovery_curves_pool_the_runs_of_a_configuration() -> None:
    curves = recovery_curves([_result("ours", 1, 1, [2.0, 1.0]), _result("ours", 2, 1, [3.0])])
    assert curves == {"ours (3 groups)": [(0.0, 0.0), (1.0, 1 / 3), (2.0, 2 / 3), (3.0, 1.0)]}


def test_rollout_phases_are_medians_of_each_part_of_a_group_replacement() -> None:
    partitions = [(0.1, 2), (1.0, 1), (9.0, 0)]
    groups = {
        "1": GroupReplacement(1.5, 4.5, 4.6, 7.6, 8.0),
        "0": GroupReplacement(9.2, 12.2, 12.4, 15.4, 16.0),
        "k": GroupReplacement(None, None, 1.0, 2.0, 3.0),  # Hash: no partition, left out
    }
    assert rollout_phases(partitions, groups) == {
        "partition to old leader deleting": 0.35,
        "old leader deleting to gone": 3.0,
        "old leader gone to new leader": 0.15,
        "new leader to first new worker": 3.0,
        "first new worker to group Ready": 0.5,
    }
