"""The soak's churn, drawn from a seed: the run is cut into 5-minute blocks. A churn
block carries out its actions within its first `CHURN_WINDOW` seconds, then waits for
every LeaderWorkerSet to settle (within `SETTLE_BOUND`); a quiet block waits for the
churn before it to finish (see `Watch.rest`), then does nothing for a whole block, so
that the controller's writes in it must be 0. The one-off faults (a controller replica
killed, the API server restarted, a watch compaction, a node down, a rollout started
over another) are dealt to the churn blocks in a fixed order, so a short run meets them
all too, and the leading replica is killed in the first block: memory is judged from a
quarter of the way in (docs/soak.md), after every process has started for the last time
but the standby."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

BLOCK_SECONDS = 300.0
CHURN_WINDOW = 150.0
SETTLE_BOUND = 150.0
NODE_DOWN_SECONDS = 90.0
MID_ROLLOUT_GAP = 20.0
ROUTINE_PER_BLOCK = 4

SCALE = "scale"
ROLLOUT = "rollout"
ROLLOUT_MID = "rollout-over-rollout"
CRASH_WORKER = "worker-crash"
DELETE_LEADER = "leader-deletion"
NODE_DOWN = "node-down"
KILL_LEADER_REPLICA = "kill-leading-replica"
KILL_STANDBY_REPLICA = "kill-standby-replica"
RESTART_APISERVER = "apiserver-restart"
COMPACTION = "watch-compaction"

ROUTINE = (SCALE, SCALE, ROLLOUT, CRASH_WORKER, DELETE_LEADER, DELETE_LEADER)
ONE_OFF = (
    KILL_LEADER_REPLICA,
    RESTART_APISERVER,
    NODE_DOWN,
    ROLLOUT_MID,
    COMPACTION,
    KILL_STANDBY_REPLICA,
    NODE_DOWN,
    ROLLOUT_MID,
)
# Actions aimed at a LeaderWorkerSet, a node, or nothing in particular.
ON_LWS = frozenset({SCALE, ROLLOUT, ROLLOUT_MID, CRASH_WORKER, DELETE_LEADER})
ON_NODE = frozenset({NODE_DOWN})


@dataclass(frozen=True)
class Action:
    at: float  # seconds from the block's start
    kind: str
    target: str = ""
    delta: int = 0  # groups, for a scale


@dataclass(frozen=True)
class Block:
    index: int
    quiet: bool
    actions: tuple[Action, ...] = ()

    @property
    def start_minute(self) -> float:
        return self.index * BLOCK_SECONDS / 60


def quiet_blocks(count: int) -> set[int]:
    """Every fifth block but the first; in a run too short for one, the last."""
    quiet = {b for b in range(1, count) if b % 5 == 0}
    if not quiet and count > 1:
        quiet = {count - 1}
    return quiet


# The relist variant (`--relists`): every churn block also makes every cache list again,
# by these in turn; the standby is not killed, so that both replicas' memory is one
# process's from minute 15 on.
RELISTS = (COMPACTION, RESTART_APISERVER)


def plan(
    minutes: int,
    seed: int,
    lws_names: Sequence[str],
    nodes: Sequence[str],
    relists: bool = False,
) -> list[Block]:
    rng = random.Random(seed)
    count = max(1, round(minutes * 60 / BLOCK_SECONDS))
    quiet = quiet_blocks(count)
    churn = [b for b in range(count) if b not in quiet]
    one_offs: dict[int, list[str]] = {b: [] for b in churn}
    dealt = [k for k in ONE_OFF if k != KILL_STANDBY_REPLICA] if relists else list(ONE_OFF)
    for i, kind in enumerate(dealt):
        one_offs[churn[i % len(churn)]].append(kind)
    if relists:
        for i, block in enumerate(churn):
            kinds = one_offs[block]
            if not any(kind in RELISTS for kind in kinds):
                kinds.append(RELISTS[i % len(RELISTS)])
    blocks = []
    for index in range(count):
        if index in quiet:
            blocks.append(Block(index, True))
            continue
        kinds = one_offs[index] + [rng.choice(ROUTINE) for _ in range(ROUTINE_PER_BLOCK)]
        actions = [
            _action(rng, kind, lws_names, nodes, first=i == 0) for i, kind in enumerate(kinds)
        ]
        blocks.append(Block(index, False, tuple(sorted(actions, key=lambda a: a.at))))
    return blocks


def _action(
    rng: random.Random, kind: str, lws_names: Sequence[str], nodes: Sequence[str], *, first: bool
) -> Action:
    # A node stays down NODE_DOWN_SECONDS and a second rollout follows the first: both
    # start early enough to be over within the churn window.
    latest = CHURN_WINDOW - NODE_DOWN_SECONDS if kind in (NODE_DOWN, ROLLOUT_MID) else CHURN_WINDOW
    at = 0.0 if first else round(rng.uniform(0, latest), 1)
    if kind in ON_LWS:
        delta = rng.choice((-3, -2, -1, 1, 2, 3)) if kind == SCALE else 0
        return Action(at, kind, rng.choice(list(lws_names)), delta)
    if kind in ON_NODE:
        return Action(at, kind, rng.choice(list(nodes)))
    return Action(at, kind)
