"""The planner, case by case against upstream's v0.10.0 planner_test.go: each test (or
parametrized id) is named after the upstream test or case it mirrors, with the same
inputs and the same expected steps. Upstream's tests that only check properties of a
whole rollout (completes, surge and unavailability bounds) are mirrored the same way."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from leaderworkerset.controllers.disaggregatedset.planner import (
    RollingConfig,
    Step,
    all_steps,
    batch_size,
    correct_growth,
    default_configs,
    next_new,
    next_old,
    next_step,
    total_steps,
)


def parse(step: str) -> Step:
    """ "old0,old1|new0,new1" as a Step."""
    old, new = step.split("|")
    return Step(old=tuple(map(int, old.split(","))), new=tuple(map(int, new.split(","))))


def surge(*values: int) -> list[RollingConfig]:
    return [RollingConfig(max_surge=v, max_unavailable=0) for v in values]


def unavailable(*values: int) -> list[RollingConfig]:
    return [RollingConfig(max_surge=0, max_unavailable=v) for v in values]


def completes(steps: list[Step], target: tuple[int, ...] | list[int]) -> bool:
    last = steps[-1]
    return all(v == 0 for v in last.old) and list(last.new) == list(target)


def total(step: Step) -> int:
    return sum(step.old) + sum(step.new)


@dataclass(frozen=True)
class ExactCase:
    name: str
    source: tuple[int, int]
    target: tuple[int, int]
    max_surge: tuple[int, int] | None  # None: upstream's DefaultRollingUpdateConfig
    steps: list[str]


# TestComputeAllSteps_ExactSequence
EXACT_SEQUENCES = [
    ExactCase("small_1_1_surge1", (1, 1), (1, 1), None, ["1,1|0,0", "1,1|1,1", "0,0|1,1"]),
    ExactCase(
        "small_2_2_surge1",
        (2, 2),
        (2, 2),
        None,
        ["2,2|0,0", "2,2|1,1", "1,1|1,1", "1,1|2,2", "0,0|2,2"],
    ),
    ExactCase(
        "small_3_3_surge1",
        (3, 3),
        (3, 3),
        None,
        ["3,3|0,0", "3,3|1,1", "2,2|1,1", "2,2|2,2", "1,1|2,2", "1,1|3,3", "0,0|3,3"],
    ),
    ExactCase(
        "medium_6_2_surge1",
        (6, 2),
        (6, 2),
        None,
        [
            "6,2|0,0",
            "6,2|1,1",
            "5,2|1,1",
            "5,2|2,1",
            "4,2|2,1",
            "4,2|3,1",
            "3,1|3,1",
            "3,1|4,2",
            "2,1|4,2",
            "2,1|5,2",
            "1,1|5,2",
            "1,1|6,2",
            "0,0|6,2",
        ],
    ),
    ExactCase(
        "medium_6_2_surge2",
        (6, 2),
        (6, 2),
        (2, 2),
        ["6,2|0,0", "6,2|2,1", "4,2|2,1", "4,2|4,2", "2,1|4,2", "2,1|6,2", "0,0|6,2"],
    ),
    ExactCase(
        "medium_6_4_surge2",
        (6, 4),
        (6, 4),
        (2, 2),
        ["6,4|0,0", "6,4|2,2", "4,3|2,2", "4,3|4,3", "2,2|4,3", "2,2|6,4", "0,0|6,4"],
    ),
    ExactCase(
        "asymmetric_10_1_surge1",
        (10, 1),
        (10, 1),
        None,
        [
            "10,1|0,0",
            "10,1|1,1",
            "9,1|1,1",
            "9,1|2,1",
            "8,1|2,1",
            "8,1|3,1",
            "7,1|3,1",
            "7,1|4,1",
            "6,1|4,1",
            "6,1|5,1",
            "5,1|5,1",
            "5,1|6,1",
            "4,1|6,1",
            "4,1|7,1",
            "3,1|7,1",
            "3,1|8,1",
            "2,1|8,1",
            "2,1|9,1",
            "1,1|9,1",
            "1,1|10,1",
            "0,0|10,1",
        ],
    ),
    ExactCase(
        "asymmetric_1_10_surge1",
        (1, 10),
        (1, 10),
        None,
        [
            "1,10|0,0",
            "1,10|1,1",
            "1,9|1,1",
            "1,9|1,2",
            "1,8|1,2",
            "1,8|1,3",
            "1,7|1,3",
            "1,7|1,4",
            "1,6|1,4",
            "1,6|1,5",
            "1,5|1,5",
            "1,5|1,6",
            "1,4|1,6",
            "1,4|1,7",
            "1,3|1,7",
            "1,3|1,8",
            "1,2|1,8",
            "1,2|1,9",
            "1,1|1,9",
            "1,1|1,10",
            "0,0|1,10",
        ],
    ),
    ExactCase(
        "large_10_10_surge1",
        (10, 10),
        (10, 10),
        None,
        [
            "10,10|0,0",
            "10,10|1,1",
            "9,9|1,1",
            "9,9|2,2",
            "8,8|2,2",
            "8,8|3,3",
            "7,7|3,3",
            "7,7|4,4",
            "6,6|4,4",
            "6,6|5,5",
            "5,5|5,5",
            "5,5|6,6",
            "4,4|6,6",
            "4,4|7,7",
            "3,3|7,7",
            "3,3|8,8",
            "2,2|8,8",
            "2,2|9,9",
            "1,1|9,9",
            "1,1|10,10",
            "0,0|10,10",
        ],
    ),
    ExactCase(
        "large_10_10_surge3",
        (10, 10),
        (10, 10),
        (3, 3),
        [
            "10,10|0,0",
            "10,10|3,3",
            "8,8|3,3",
            "8,8|5,5",
            "5,5|8,8",
            "3,3|8,8",
            "3,3|10,10",
            "0,0|10,10",
        ],
    ),
    ExactCase(
        "large_12_6_surge2",
        (12, 6),
        (12, 6),
        (2, 2),
        [
            "12,6|0,0",
            "12,6|2,1",
            "10,5|2,1",
            "10,5|4,2",
            "8,4|4,2",
            "8,4|6,3",
            "6,3|6,3",
            "6,3|8,4",
            "4,2|8,4",
            "4,2|10,5",
            "2,1|10,5",
            "2,1|12,6",
            "0,0|12,6",
        ],
    ),
    ExactCase(
        "scale_up_1_1_to_3_3",
        (1, 1),
        (3, 3),
        None,
        ["1,1|0,0", "1,1|1,1", "1,1|2,2", "1,1|3,3", "0,0|3,3"],
    ),
    ExactCase(
        "scale_up_4_4_to_6_6",
        (4, 4),
        (6, 6),
        None,
        ["4,4|0,0", "4,4|1,1", "4,4|2,2", "4,4|3,3", "3,3|4,4", "2,2|5,5", "1,1|6,6", "0,0|6,6"],
    ),
    ExactCase(
        "scale_down_5_5_to_2_2",
        (5, 5),
        (2, 2),
        None,
        ["5,5|0,0", "4,4|0,0", "3,3|0,0", "2,2|0,0", "2,2|1,1", "1,1|1,1", "1,1|2,2", "0,0|2,2"],
    ),
    ExactCase(
        "mixed_scale_3_5_to_5_3",
        (3, 5),
        (5, 3),
        None,
        [
            "3,5|0,0",
            "3,4|0,0",
            "2,3|0,0",
            "2,3|1,1",
            "2,2|1,1",
            "2,2|2,2",
            "2,2|3,2",
            "1,1|3,2",
            "1,1|4,3",
            "1,1|5,3",
            "0,0|5,3",
        ],
    ),
    ExactCase(
        "asymmetric_2_4_to_4_2",
        (2, 4),
        (4, 2),
        None,
        [
            "2,4|0,0",
            "2,3|0,0",
            "1,2|0,0",
            "1,2|1,1",
            "1,2|2,1",
            "1,1|2,1",
            "1,1|3,2",
            "1,1|4,2",
            "0,0|4,2",
        ],
    ),
    ExactCase(
        "proportional_3_5_to_4_2",
        (3, 5),
        (4, 2),
        None,
        [
            "3,5|0,0",
            "3,4|0,0",
            "2,3|0,0",
            "2,2|0,0",
            "2,2|1,1",
            "2,2|2,1",
            "1,1|2,1",
            "1,1|3,2",
            "1,1|4,2",
            "0,0|4,2",
        ],
    ),
    ExactCase(
        "medium_4_4_surge2",
        (4, 4),
        (4, 4),
        (2, 2),
        ["4,4|0,0", "4,4|2,2", "2,2|2,2", "2,2|4,4", "0,0|4,4"],
    ),
    ExactCase(
        "asymmetric_surge_4_6",
        (4, 6),
        (4, 6),
        (2, 3),
        ["4,6|0,0", "4,6|2,3", "2,3|2,3", "2,3|4,6", "0,0|4,6"],
    ),
    ExactCase(
        "asymmetric_5_3_surge2",
        (5, 3),
        (5, 3),
        (2, 2),
        ["5,3|0,0", "5,3|2,1", "4,2|2,1", "3,2|2,1", "3,2|4,2", "2,1|4,2", "2,1|5,3", "0,0|5,3"],
    ),
    ExactCase(
        "fresh_deploy_0_0_to_3_3",
        (0, 0),
        (3, 3),
        None,
        ["0,0|0,0", "0,0|1,1", "0,0|2,2", "0,0|3,3"],
    ),
    ExactCase("empty_0_0_to_0_0", (0, 0), (0, 0), None, ["0,0|0,0"]),
]


@pytest.mark.parametrize("case", EXACT_SEQUENCES, ids=lambda case: case.name)
def test_compute_all_steps_exact_sequence(case: ExactCase) -> None:
    configs = default_configs(2) if case.max_surge is None else surge(*case.max_surge)
    assert all_steps(case.source, case.target, configs) == [parse(s) for s in case.steps]


def test_exact_sequence_table_has_every_upstream_case() -> None:
    assert len(EXACT_SEQUENCES) == len({case.name for case in EXACT_SEQUENCES}) == 22


# --- Unavailable strategy -----------------------------------------------------------


def test_unavailable_basic_symmetric_4_4() -> None:
    steps = all_steps((4, 4), (4, 4), unavailable(1, 1))
    assert completes(steps, (4, 4))
    assert min(map(total, steps)) < 8


def test_unavailable_basic_step_sequence() -> None:
    steps = all_steps((4, 4), (4, 4), unavailable(1, 1))
    assert any(
        (sum(a.old) - sum(b.old)) > (sum(b.new) - sum(a.new))
        and (b.old[0] < a.old[0] or b.old[1] < a.old[1])
        for a, b in itertools.pairwise(steps)
    ), "no step drains the old revision faster than it grows the new one"


def test_surge_priority_surge_takes_priority_over_unavailable() -> None:
    steps = all_steps((4, 4), (4, 4), [RollingConfig(1, 1), RollingConfig(1, 1)])
    assert completes(steps, (4, 4))
    assert all(total(s) >= 8 for s in steps)


def test_surge_priority_unavailable_when_surge_zero() -> None:
    steps = all_steps((4, 4), (4, 4), unavailable(1, 1))
    assert completes(steps, (4, 4))
    assert min(map(total, steps)) < 8


def test_surge_priority_surge2_behavior() -> None:
    steps = all_steps((6, 6), (6, 6), surge(2, 2))
    assert completes(steps, (6, 6))
    assert all(total(s) >= 12 for s in steps)


def test_surge_priority_unavailable2_behavior() -> None:
    steps = all_steps((6, 6), (6, 6), unavailable(2, 2))
    assert completes(steps, (6, 6))
    assert min(map(total, steps)) < 12


def test_surge_priority_both_surge_and_unavailable_uses_surge() -> None:
    steps = all_steps((6, 6), (6, 6), [RollingConfig(2, 2), RollingConfig(2, 2)])
    assert completes(steps, (6, 6))
    assert all(total(s) >= 12 for s in steps)


def test_mixed_surge_unavailable_role0_surge_role1_unavailable() -> None:
    configs = [RollingConfig(1, 0), RollingConfig(0, 1)]
    assert completes(all_steps((4, 4), (4, 4), configs), (4, 4))


def test_mixed_surge_unavailable_role0_unavailable_role1_surge() -> None:
    configs = [RollingConfig(0, 1), RollingConfig(1, 0)]
    assert completes(all_steps((4, 4), (4, 4), configs), (4, 4))


@pytest.mark.parametrize("sizes", [(6, 2), (2, 6), (8, 4)], ids=str)
def test_mixed_surge_unavailable_asymmetric(sizes: tuple[int, int]) -> None:
    configs = [RollingConfig(1, 0), RollingConfig(0, 1)]
    assert completes(all_steps(sizes, sizes, configs), sizes)


def test_unavailable_edge_cases_scale_up_with_unavailable() -> None:
    assert completes(all_steps((2, 2), (4, 4), unavailable(1, 1)), (4, 4))


def test_unavailable_edge_cases_scale_down_with_unavailable() -> None:
    assert completes(all_steps((4, 4), (2, 2), unavailable(1, 1)), (2, 2))


def test_unavailable_edge_cases_fresh_deploy_with_unavailable() -> None:
    assert completes(all_steps((0, 0), (4, 4), unavailable(1, 1)), (4, 4))


@pytest.mark.parametrize("size,unavail", [(4, 1), (6, 2), (10, 5)], ids=str)
def test_unavailable_edge_cases_no_infinite_loop(size: int, unavail: int) -> None:
    steps = all_steps((size, size), (size, size), unavailable(unavail, unavail))
    assert len(steps) <= size * 4
    assert completes(steps, (size, size))


# --- Helper functions -----------------------------------------------------------------


@pytest.mark.parametrize(
    "max_surge,max_unavailable,expected",
    [(1, 0, 1), (2, 0, 2), (0, 1, 1), (0, 2, 2), (0, 0, 1), (3, 2, 3)],
    ids=str,
)
def test_batch_size(max_surge: int, max_unavailable: int, expected: int) -> None:
    assert batch_size(max_surge, max_unavailable) == expected


@pytest.mark.parametrize(
    "initial,target,configs,expected",
    [
        ((4, 4), (4, 4), default_configs(2), 4),
        ((6, 2), (6, 2), default_configs(2), 6),
        ((4, 4), (4, 4), surge(2, 2), 2),
        ((0, 0), (3, 3), default_configs(2), 3),
    ],
    ids=str,
)
def test_compute_total_steps(
    initial: tuple[int, int], target: tuple[int, int], configs: list[RollingConfig], expected: int
) -> None:
    assert total_steps(initial, target, configs) == expected


def test_correct_abnormal_state_normal() -> None:
    assert correct_growth((2, 2), (2, 2), (4, 4)) is None


def test_correct_abnormal_state_abnormal() -> None:
    assert correct_growth((5, 5), (2, 2), (4, 4)) == Step(old=(4, 4), new=(2, 2))


@pytest.mark.parametrize(
    "current_new",
    [pytest.param((3, 6), id="exactly at target"), pytest.param((4, 7), id="new exceeds target")],
)
def test_compute_next_step_returns_nil_when_done(current_new: tuple[int, int]) -> None:
    assert next_step((3, 6), (0, 0), current_new, (3, 6), default_configs(2)) is None


def test_compute_next_step_fresh_start() -> None:
    step = next_step((4, 4), (4, 4), (0, 0), (4, 4), default_configs(2))
    assert step is not None
    assert step.new[0] > 0 and step.new[1] > 0


def test_compute_next_new_replicas_edge_cases_target_role0_zero() -> None:
    result = next_new((0, 4), (0, 2), 4)
    assert result[0] == 0 and result[1] > 2


def test_compute_next_new_replicas_edge_cases_target_role1_zero() -> None:
    result = next_new((4, 0), (2, 0), 4)
    assert result[0] > 2 and result[1] == 0


def test_compute_next_new_replicas_edge_cases_total_steps_zero() -> None:
    assert next_new((4, 4), (2, 2), 0) == (4, 4)


def test_compute_next_old_replicas_edge_cases_source_role0_zero() -> None:
    result = next_old((0, 4), (0, 3), 4)
    assert result[0] == 0 and result[1] <= 3


def test_compute_next_old_replicas_edge_cases_source_role1_zero() -> None:
    result = next_old((4, 0), (3, 0), 4)
    assert result[0] <= 3 and result[1] == 0


def test_compute_next_old_replicas_edge_cases_total_steps_zero() -> None:
    assert next_old((4, 4), (2, 2), 0) == (0, 0)


# --- N roles -----------------------------------------------------------------------------

# TestNRole_RolloutCompletes: (name, initial old, target, maxSurge, maxUnavailable)
N_ROLE_ROLLOUTS = [
    ("3role_symmetric", [3, 3, 3], [3, 3, 3], [1, 1, 1], [0, 0, 0]),
    ("3role_asymmetric", [6, 3, 2], [6, 3, 2], [2, 1, 1], [0, 0, 0]),
    ("3role_different_surge", [4, 4, 4], [4, 4, 4], [2, 1, 3], [0, 0, 0]),
    ("3role_scale_up", [2, 2, 2], [4, 4, 4], [1, 1, 1], [0, 0, 0]),
    ("3role_scale_down", [4, 4, 4], [2, 2, 2], [1, 1, 1], [0, 0, 0]),
    ("3role_fresh_deploy", [0, 0, 0], [3, 3, 3], [1, 1, 1], [0, 0, 0]),
    ("3role_unavailable", [4, 4, 4], [4, 4, 4], [0, 0, 0], [1, 1, 1]),
    ("3role_mixed_surge_unavail", [4, 4, 4], [4, 4, 4], [1, 0, 2], [0, 1, 0]),
    ("4role_symmetric", [4, 4, 4, 4], [4, 4, 4, 4], [1, 1, 1, 1], [0, 0, 0, 0]),
    ("4role_asymmetric", [8, 4, 2, 1], [8, 4, 2, 1], [2, 2, 1, 1], [0, 0, 0, 0]),
    ("4role_scale_up", [1, 1, 1, 1], [3, 3, 3, 3], [1, 1, 1, 1], [0, 0, 0, 0]),
    ("4role_scale_down", [5, 5, 5, 5], [2, 2, 2, 2], [1, 1, 1, 1], [0, 0, 0, 0]),
    ("4role_fresh_deploy", [0, 0, 0, 0], [4, 4, 4, 4], [1, 1, 1, 1], [0, 0, 0, 0]),
    ("5role_symmetric", [5] * 5, [5] * 5, [1] * 5, [0] * 5),
    ("5role_asymmetric", [10, 5, 3, 2, 1], [10, 5, 3, 2, 1], [2, 2, 1, 1, 1], [0] * 5),
    ("5role_scale_up", [1] * 5, [2] * 5, [1] * 5, [0] * 5),
    ("5role_scale_down", [6] * 5, [3] * 5, [1] * 5, [0] * 5),
    ("5role_fresh_deploy", [0] * 5, [5] * 5, [1] * 5, [0] * 5),
    ("add_role_2to3", [4, 4, 0], [4, 4, 4], [1, 1, 1], [0, 0, 0]),
    ("add_role_3to4", [3, 3, 3, 0], [3, 3, 3, 3], [1] * 4, [0] * 4),
    ("add_role_5to6", [2, 2, 2, 2, 2, 0], [2] * 6, [1] * 6, [0] * 6),
    ("remove_role_3to2", [4, 4, 4], [4, 4, 0], [1, 1, 1], [0, 0, 0]),
    ("remove_role_4to3", [3, 3, 3, 3], [3, 3, 3, 0], [1] * 4, [0] * 4),
    ("rename_role_5to5", [10, 10, 10, 10, 0, 10], [10, 10, 10, 10, 10, 0], [1] * 6, [0] * 6),
    ("scale_down_prefill_up_decode", [10, 2], [6, 8], [2, 2], [0, 0]),
    ("scale_down_both", [10, 10], [4, 4], [2, 2], [0, 0]),
    ("scale_down_asymmetric", [8, 4], [3, 2], [1, 1], [0, 0]),
    ("unavail_asymmetric_5_2", [5, 2], [5, 2], [0, 0], [1, 1]),
]


@pytest.mark.parametrize(
    "initial,target,surges,unavails",
    [c[1:] for c in N_ROLE_ROLLOUTS],
    ids=[c[0] for c in N_ROLE_ROLLOUTS],
)
def test_n_role_rollout_completes(
    initial: list[int], target: list[int], surges: list[int], unavails: list[int]
) -> None:
    configs = [RollingConfig(s, u) for s, u in zip(surges, unavails, strict=True)]
    assert completes(all_steps(initial, target, configs), target)


# TestNRole_SurgeConstraint: (name, initial old, target, maxSurge)
N_ROLE_SURGE = [
    ("3role", [3, 3, 3], [3, 3, 3], [1, 1, 1]),
    ("4role", [4, 4, 4, 4], [4, 4, 4, 4], [1, 1, 1, 1]),
    ("5role", [5] * 5, [5] * 5, [1] * 5),
    ("scale_down_prefill_up_decode", [10, 2], [6, 8], [2, 2]),
    ("scale_down_both", [10, 10], [4, 4], [2, 2]),
    ("scale_down_asymmetric", [8, 4], [3, 2], [1, 1]),
]


@pytest.mark.parametrize(
    "initial,target,surges", [c[1:] for c in N_ROLE_SURGE], ids=[c[0] for c in N_ROLE_SURGE]
)
def test_n_role_surge_constraint(initial: list[int], target: list[int], surges: list[int]) -> None:
    for index, step in enumerate(all_steps(initial, target, surge(*surges))):
        for role, wanted in enumerate(target):
            # Drain-only steps (no new pods yet) may exceed the bound while removing pods.
            if step.new[role]:
                assert step.old[role] + step.new[role] <= wanted + surges[role], (index, role)


# TestNRole_UnavailableConstraint: (name, initial old = target, maxUnavailable)
N_ROLE_UNAVAILABLE = [
    ("symmetric_4_4", [4, 4], [1, 1]),
    ("asymmetric_5_2", [5, 2], [1, 1]),
    ("asymmetric_2_5", [2, 5], [1, 1]),
    ("3role_symmetric", [3, 3, 3], [1, 1, 1]),
]


@pytest.mark.parametrize(
    "sizes,unavails", [c[1:] for c in N_ROLE_UNAVAILABLE], ids=[c[0] for c in N_ROLE_UNAVAILABLE]
)
def test_n_role_unavailable_constraint(sizes: list[int], unavails: list[int]) -> None:
    steps = all_steps(sizes, sizes, unavailable(*unavails))
    assert completes(steps, sizes)
    for index, step in enumerate(steps):
        for role, wanted in enumerate(sizes):
            assert step.old[role] + step.new[role] >= wanted - unavails[role], (index, role)


@pytest.mark.parametrize("roles", [3, 4, 5], ids=lambda n: f"{n}_roles")
def test_n_role_default_config(roles: int) -> None:
    assert default_configs(roles) == [RollingConfig(max_surge=1, max_unavailable=0)] * roles
