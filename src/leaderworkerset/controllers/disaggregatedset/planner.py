"""The rolling-update planner: the next step of a rollout of N roles, from counts alone.

A rollout moves every role from its old revisions to the new one together. Between
the start and the end, the new revision's count of role i follows
ceil(k * target_i / steps) and the old revisions' count follows
initial_i - floor(k * initial_i / steps), k = 1..steps, so the roles keep their ratio
all along. The planner keeps no state: it reads where the rollout is from the current
counts and returns the next counts. Each step changes either the new revision or the
old ones (a step may move both only when the surge limit would otherwise stall the
rollout). Per role:

- maxSurge: old + new never exceeds target + maxSurge once new pods exist;
- maxUnavailable: old + new never drops below target - maxUnavailable, when the role
  had at least its target to start with;
- no orphans: an old revision is drained to zero in all its roles at once, or kept
  with at least one replica in each.

The batch of a role is its maxSurge, else its maxUnavailable, else 1, and the number
of steps is the largest ceil(max(initial, target) / batch) over the roles. Upstream's
algorithm (v0.10.0 planner.go), step for step; its test cases are ours too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Replicas = tuple[int, ...]


@dataclass(frozen=True)
class RollingConfig:
    """A role's rollout limits, as numbers of replicas (percentages already resolved)."""

    max_surge: int = 1
    max_unavailable: int = 0


@dataclass(frozen=True)
class Step:
    """The counts to scale to: the old revisions' (all together) and the new one's, per role."""

    old: Replicas
    new: Replicas


def default_configs(roles: int) -> list[RollingConfig]:
    """maxSurge 1, maxUnavailable 0 for every role."""
    return [RollingConfig() for _ in range(roles)]


def batch_size(max_surge: int, max_unavailable: int) -> int:
    if max_surge > 0:
        return max_surge
    return max(1, max_unavailable)


def total_steps(
    initial_old: Sequence[int], target: Sequence[int], configs: Sequence[RollingConfig]
) -> int:
    steps = 0
    for initial, wanted, config in zip(initial_old, target, configs, strict=True):
        batch = batch_size(config.max_surge, config.max_unavailable)
        steps = max(steps, -(-max(initial, wanted, 0) // batch))
    return steps


def next_new(target: Sequence[int], current_new: Sequence[int], steps: int) -> Replicas:
    """The new revision's counts one step past the least advanced role."""
    if steps == 0:
        return tuple(target)

    def step_of(current: int, wanted: int) -> int:
        return steps if wanted == 0 else int(current * steps / wanted)

    following = min([steps, *map(step_of, current_new, target)]) + 1
    return tuple(
        max(min(math.ceil(following * wanted / steps), wanted), current)
        for wanted, current in zip(target, current_new, strict=True)
    )


def next_old(initial_old: Sequence[int], current_old: Sequence[int], steps: int) -> Replicas:
    """The old revisions' counts one step past the most advanced role's drain."""
    if steps == 0:
        return tuple(0 for _ in initial_old)
    reached = 0
    for initial, current in zip(initial_old, current_old, strict=True):
        if initial:
            reached = max(reached, int((initial - current) * steps / initial))
    following = reached + 1
    return tuple(
        min(max(0, initial - math.floor(following * initial / steps)), current)
        for initial, current in zip(initial_old, current_old, strict=True)
    )


def next_step(
    initial_old: Sequence[int],
    current_old: Sequence[int],
    current_new: Sequence[int],
    target: Sequence[int],
    configs: Sequence[RollingConfig],
) -> Step | None:
    """The next step of a rollout, or None when there is nothing left to do.

    `initial_old` is what the old revisions had when the rollout began (their
    initial-replicas annotations), `current_old` what they have now, summed over all
    old revisions; `current_new` and `target` are the new revision's counts."""
    if _complete(current_old, current_new, target):
        return None
    steps = total_steps(initial_old, target, configs)
    if steps == 0:
        return None
    correction = correct_growth(current_old, current_new, initial_old)
    if correction is not None:
        return correction
    if all(n >= t for n, t in zip(current_new, target, strict=True)):
        return Step(old=tuple(0 for _ in initial_old), new=tuple(current_new))
    new = next_new(target, current_new, steps)
    minimum_old = _minimum_old(initial_old, current_new, target, configs)
    return (
        _scale_up(current_old, current_new, new, target, configs)
        or _proportional_drain(
            initial_old, current_old, current_new, target, minimum_old, steps, configs
        )
        or _forced_drain(current_old, new, initial_old, target, configs)
    )


def all_steps(
    initial_old: Sequence[int], target: Sequence[int], configs: Sequence[RollingConfig]
) -> list[Step]:
    """A whole rollout, every step applied at once (for tests and documentation): the
    first entry is the starting point."""
    old, new = tuple(initial_old), tuple(0 for _ in initial_old)
    steps = [Step(old=old, new=new)]
    for _ in range(max([0, *initial_old, *target]) * 2 + 10):
        step = next_step(initial_old, old, new, target, configs)
        if step is None:
            break
        steps.append(step)
        old, new = step.old, step.new
    return steps


def _complete(old: Sequence[int], new: Sequence[int], target: Sequence[int]) -> bool:
    return all(o == 0 and n >= t for o, n, t in zip(old, new, target, strict=True))


def correct_growth(
    current_old: Sequence[int], current_new: Sequence[int], initial_old: Sequence[int]
) -> Step | None:
    """Old revisions never grow during a rollout: one that did is put back first."""
    capped = tuple(min(i, o) for i, o in zip(initial_old, current_old, strict=True))
    if capped == tuple(current_old):
        return None
    return Step(old=capped, new=tuple(current_new))


def _minimum_old(
    initial_old: Sequence[int],
    current_new: Sequence[int],
    target: Sequence[int],
    configs: Sequence[RollingConfig],
) -> list[int]:
    """Old replicas a role must keep to honour maxUnavailable (roles that started with
    at least their target)."""
    return [
        max(0, wanted - config.max_unavailable - new) if initial >= wanted else 0
        for initial, new, wanted, config in zip(
            initial_old, current_new, target, configs, strict=True
        )
    ]


def _scale_up(
    current_old: Sequence[int],
    current_new: Sequence[int],
    new: Sequence[int],
    target: Sequence[int],
    configs: Sequence[RollingConfig],
) -> Step | None:
    if not any(n > c for n, c in zip(new, current_new, strict=True)):
        return None
    for old, n, wanted, config in zip(current_old, new, target, configs, strict=True):
        if wanted and old + n > wanted + config.max_surge:
            return None
    return Step(old=tuple(current_old), new=tuple(new))


def _proportional_drain(
    initial_old: Sequence[int],
    current_old: Sequence[int],
    current_new: Sequence[int],
    target: Sequence[int],
    minimum_old: Sequence[int],
    steps: int,
    configs: Sequence[RollingConfig],
) -> Step | None:
    old = [
        max(o, m)
        for o, m in zip(next_old(initial_old, current_old, steps), minimum_old, strict=True)
    ]
    _prevent_orphans(old, current_new, initial_old, target, configs)
    if not any(o < c for o, c in zip(old, current_old, strict=True)):
        return None
    return Step(old=tuple(old), new=tuple(current_new))


def _forced_drain(
    current_old: Sequence[int],
    new: Sequence[int],
    initial_old: Sequence[int],
    target: Sequence[int],
    configs: Sequence[RollingConfig],
) -> Step | None:
    """Drain the old revisions to what the surge limit allows with the next new counts,
    and scale those up in the same step: the way out when neither alone may move."""
    old = []
    for current, n, initial, wanted, config in zip(
        current_old, new, initial_old, target, configs, strict=True
    ):
        kept = max(0, min(current, wanted + config.max_surge - n))
        if initial >= wanted:
            kept = max(kept, max(0, wanted - config.max_unavailable - n))
        old.append(kept)
    if not any(o < c for o, c in zip(old, current_old, strict=True)):
        return None
    _prevent_orphans(old, new, initial_old, target, configs)
    return Step(old=tuple(old), new=tuple(new))


def _prevent_orphans(
    old: list[int],
    new: Sequence[int],
    initial_old: Sequence[int],
    target: Sequence[int],
    configs: Sequence[RollingConfig],
) -> None:
    """When some roles of the old revisions would reach zero and others not, drain them
    all if maxUnavailable allows it, else keep one replica of each drained role."""
    started = [i for i, initial in enumerate(initial_old) if initial]
    drained = [i for i in started if old[i] == 0]
    if not drained or len(drained) == len(started):
        return
    if _may_drain_all(new, initial_old, target, configs):
        old[:] = [0] * len(old)
        return
    for i in drained:
        old[i] = 1


def _may_drain_all(
    new: Sequence[int],
    initial_old: Sequence[int],
    target: Sequence[int],
    configs: Sequence[RollingConfig],
) -> bool:
    return all(
        n >= wanted - config.max_unavailable
        for n, initial, wanted, config in zip(new, initial_old, target, configs, strict=True)
        if initial >= wanted
    )
