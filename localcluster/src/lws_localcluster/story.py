"""The Hash-mode story of `lws demo --story hash`: a full cluster, a crash, a
replacement that waits behind its scheduling gate until the group it replaces is gone.

Interchangeable (Hash) groups under PostTermination: when a worker crashes, the
controller deletes the group's leader (RecreateGroupOnPodRestart), the leader
Deployment creates a new leader at once, and that leader is held by the
`group-replacement` scheduling gate until every pod of the old group has terminated.
On a cluster with room for exactly the groups it runs, that is what keeps the new
group from claiming GPUs the old one still holds. The old pods take a few seconds to
terminate here (a simulated graceful shutdown), long enough to see the gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import click

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, name_of
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.group.roles import group_key, is_worker
from leaderworkerset.runtime.client import ApiClient, ApiError
from lws_localcluster.groups import (
    GATED,
    KEY_PREFIX,
    READY,
    TEARING_DOWN,
    GroupRow,
    read_groups,
    render,
)
from lws_localcluster.nodesim.nodes import GPU, NodeSpec
from lws_localcluster.nodesim.pods import TERMINATION_DELAY_ANNOTATION
from lws_localcluster.nodesim.simulator import NodeSimulator

NAME = "hash-story"
GROUPS = 3
SIZE = 2
GPUS_PER_POD = 4
GPUS_PER_NODE = 8
TERMINATION_SECONDS = 4
POOL_LABEL = "nodesim.leaderworkerset.dev/pool"
POOL = "hash-story"
POLL = 0.2

Rows = list[GroupRow]


class StoryError(RuntimeError):
    pass


def pool_nodes(pool: str, count: int, prefix: str) -> list[NodeSpec]:
    """`count` nodes of GPUS_PER_NODE GPUs named `<prefix>-<i>`, labelled and tainted
    with `pool`, so that only a story's pods (which select and tolerate it) land there."""
    return [
        NodeSpec(
            name=f"{prefix}-{i}",
            gpus=GPUS_PER_NODE,
            labels={POOL_LABEL: pool},
            taints=[{"key": POOL_LABEL, "value": pool, "effect": "NoSchedule"}],
        )
        for i in range(count)
    ]


def story_nodes() -> list[NodeSpec]:
    """Exactly enough GPUs for GROUPS groups; tainted so that no other pod lands there."""
    return pool_nodes(POOL, GROUPS * SIZE * GPUS_PER_POD // GPUS_PER_NODE, "story-node")


def story_lws(namespace: str) -> JSON:
    return {
        "apiVersion": f"{c.GROUP}/v1",
        "kind": c.KIND,
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "replicas": GROUPS,
            "groupIdentity": c.GROUP_IDENTITY_HASH,
            "groupReplacementPolicy": "PostTermination",
            "leaderWorkerTemplate": {
                "size": SIZE,
                "workerTemplate": {
                    "metadata": {
                        "annotations": {TERMINATION_DELAY_ANNOTATION: str(TERMINATION_SECONDS)}
                    },
                    "spec": {
                        "nodeSelector": {POOL_LABEL: POOL},
                        "tolerations": [{"key": POOL_LABEL, "value": POOL, "effect": "NoSchedule"}],
                        "containers": [
                            {
                                "name": "server",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"limits": {GPU: str(GPUS_PER_POD)}},
                            }
                        ],
                    },
                },
            },
        },
    }


@dataclass
class Timeline:
    """Seconds since the story began, and the group table each time it changes."""

    api: ApiClient
    namespace: str
    started: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    last: tuple[tuple[str, str, int, str], ...] | None = None

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.started

    def say(self, text: str) -> None:
        click.echo(f"[{self.now():6.1f}s] {text}")

    async def until(
        self,
        done: Callable[[Rows], bool],
        caption: Callable[[Rows], str],
        within: float,
        what: str,
        check: Callable[[Rows], None] | None = None,
    ) -> Rows:
        """Show the table whenever it changes, until ``done`` holds for it."""
        deadline = self.now() + within
        while True:
            _, rows = await read_groups(self.api, self.namespace, NAME)
            shape = tuple((r.group, r.state, r.ready, r.leader_node) for r in rows)
            if shape != self.last:
                self.last = shape
                self.say(caption(rows))
                click.echo(render(rows))
            if check is not None:
                check(rows)
            if done(rows):
                return rows
            if self.now() > deadline:
                raise StoryError(f"{what}: not reached within {within:.0f}s")
            await asyncio.sleep(POLL)


def _all_ready(rows: Rows) -> bool:
    return len(rows) == GROUPS and all(r.state == READY for r in rows)


def _coming_up(rows: Rows) -> str:
    if _all_ready(rows):
        return f"all {GROUPS} groups Ready"
    if any(r.state == GATED for r in rows):
        # A new group has no predecessor: the controller lifts its gate at once.
        return "groups coming up (each new leader passes the gate; none has to wait)"
    return "groups coming up"


def _caption(rows: Rows) -> str:
    states = [r.state for r in rows]
    if GATED in states and TEARING_DOWN in states:
        return "the replacement is Gated: it waits until the old group is gone"
    if GATED in states:
        return "the old group is gone; the replacement is about to be admitted"
    if TEARING_DOWN in states:
        return "the crashed group is TearingDown"
    if _all_ready(rows):
        return f"all {GROUPS} groups Ready"
    return "groups coming up"


# One piece: the story reads top to bottom as the timeline it prints.
async def hash_story(api: ApiClient, sim: NodeSimulator, namespace: str = "default") -> None:
    """Tell the story; StoryError if it does not happen as told."""
    nodes = story_nodes()
    for spec in nodes:
        await sim.add_node(spec)
    timeline = Timeline(api, namespace)
    timeline.say(
        f"{len(nodes)} nodes with {GPUS_PER_NODE} {GPU} each; a group is {SIZE} pods of "
        f"{GPUS_PER_POD} GPUs, so exactly {GROUPS} groups fit"
    )
    try:
        await api.delete(LEADERWORKERSETS, NAME, namespace)
    except ApiError as err:
        if not err.not_found:
            raise
    await api.create(LEADERWORKERSETS, story_lws(namespace))
    timeline.say(
        f"created LeaderWorkerSet {namespace}/{NAME}: Hash identity, PostTermination, "
        f"{GROUPS} groups of {SIZE}"
    )
    rows = await timeline.until(_all_ready, _coming_up, 180, "all groups Ready")

    victim = rows[0].group
    worker = await _a_worker_of(api, namespace, victim)
    await sim.restart_container(namespace, worker)
    timeline.say(
        f"worker {worker} of group {victim} crashes (restartCount 1); the group is recreated"
    )
    before = {r.group for r in rows}

    def replacement(rows: Rows) -> GroupRow | None:
        fresh = [r for r in rows if r.group not in before]
        return fresh[0] if fresh else None

    def gated(rows: Rows) -> bool:
        new = replacement(rows)
        return new is not None and new.state == GATED

    await timeline.until(gated, _caption, 60, "the replacement gated")
    gated_at = timeline.now()

    def admitted_only_after_the_old_group(rows: Rows) -> None:
        new = replacement(rows)
        old_left = any(r.group == victim for r in rows)
        if new is not None and new.state != GATED and old_left:
            raise StoryError(f"replacement {new.group} admitted while group {victim} remained")

    def back_to_full(rows: Rows) -> bool:
        return _all_ready(rows) and victim not in {r.group for r in rows}

    await timeline.until(
        lambda rows: not gated(rows) and victim not in {r.group for r in rows},
        _caption,
        60,
        "the gate lifted",
        admitted_only_after_the_old_group,
    )
    admitted_at = timeline.now()
    await timeline.until(
        back_to_full, _caption, 120, "all groups Ready again", admitted_only_after_the_old_group
    )
    timeline.say(
        f"the replacement waited gated about {admitted_at - gated_at:.1f}s, until the old "
        f"group's {SIZE} pods had terminated; all {GROUPS} groups Ready again"
    )


async def _a_worker_of(api: ApiClient, namespace: str, prefix: str) -> str:
    selector = f"{c.LABEL_SET_NAME}={NAME}"
    pods = (await api.list(PODS, namespace, label_selector=selector)).get("items") or []
    for pod in pods:
        if is_worker(pod) and (group_key(pod) or "")[:KEY_PREFIX] == prefix:
            return name_of(pod)
    raise StoryError(f"group {prefix} has no worker pod")
