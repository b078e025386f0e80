"""The gang story of `lws demo --story gang`: two LeaderWorkerSets compete for a full
cluster, first placed pod by pod, then with `spec.scheduling` as gangs.

Two simulated nodes of 8 GPUs hold four 4-GPU pods. Each LeaderWorkerSet asks for
two groups of three such pods, so one group fits and the other three do not.

- Act 1, without `spec.scheduling`: kube-scheduler places each pod on its own. The
  leaders come first (a group's workers are only made once its leader exists), so the
  four slots go to pieces of groups: each LeaderWorkerSet ends with a group partly
  bound and pods pending that can never be placed, all 16 GPUs held. (Usually all four
  leaders, one pod of each group; a worker made quickly enough may beat the other
  set's second leader, and the picture is still stuck.)
- Act 2, the same two with `scheduling: {}`: each group is a PodGroup of minCount 3.
  One group is placed whole; the others have no pod bound and wait (the gang column
  is `kubectl lws groups`' answer, `group/gang_state.py`). Deleting the LeaderWorkerSet
  whose group runs frees its GPUs, and a waiting group starts whole.

A table is printed whenever what it shows changes and has held for one poll (a gang's
pods are bound one API call each, within milliseconds: a table caught between two
calls would show a half-bound group that never was one to the scheduler). StoryError
when the cluster does not do what the story says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import click

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    LEADERWORKERSETS,
    POD_GROUPS,
    PODS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from leaderworkerset.group.gang_state import gang_of
from leaderworkerset.group.readiness import pod_terminating
from leaderworkerset.group.state import groups_of
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.tables import table
from lws_localcluster.nodesim.nodes import GPU, NodeSpec
from lws_localcluster.nodesim.simulator import NodeSimulator
from lws_localcluster.story import GPUS_PER_NODE, POOL_LABEL, StoryError, pool_nodes

NAMES = ("alpha", "beta")
GROUPS = 2
SIZE = 3
GPUS_PER_POD = 4
NODES = 2
SLOTS = NODES * GPUS_PER_NODE // GPUS_PER_POD
POOL = "gang-story"
POLL = 0.2
# How long a stuck (Act 1) or whole-or-nothing (Act 2) picture must hold to count.
HOLD = 6.0

WHOLE = "whole"
PARTIAL = "partial"
NOT_STARTED = "not started"
GOING = "terminating"


def gang_nodes(pool: str = POOL) -> list[NodeSpec]:
    """Room for SLOTS pods; tainted so that no other pod lands there."""
    return pool_nodes(pool, NODES, f"{pool}-node")


def gang_lws(name: str, namespace: str, pool: str, *, gangs: bool) -> JSON:
    spec: JSON = {
        "replicas": GROUPS,
        "leaderWorkerTemplate": {
            "size": SIZE,
            "workerTemplate": {
                "spec": {
                    "nodeSelector": {POOL_LABEL: pool},
                    "tolerations": [{"key": POOL_LABEL, "value": pool, "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {"cpu": "10m"},
                                "limits": {GPU: str(GPUS_PER_POD)},
                            },
                        }
                    ],
                },
            },
        },
    }
    if gangs:
        spec["scheduling"] = {}
    return {
        "apiVersion": f"{c.GROUP}/v1",
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


@dataclass(frozen=True)
class Row:
    lws: str
    group: str
    bound: int  # pods bound to a node (terminating ones too: they hold their GPUs)
    pending: int  # pods not bound
    placement: str
    gang: str = "-"  # Act 2: the gang state, with the scheduler's reason


Rows = list[Row]


def _placement(bound: int, pending: int, going: bool) -> str:
    if going:
        return GOING
    if bound == 0:
        return NOT_STARTED
    return WHOLE if bound >= SIZE and not pending else PARTIAL


def rows_of(name: str, pods: list[JSON], pod_groups: dict[str, JSON] | None) -> Rows:
    """One row per group of LeaderWorkerSet `name`; `pod_groups` (by name) for the gang
    column, None when the LeaderWorkerSet has no gangs."""
    rows = []
    for group in groups_of(pods):
        members = group.pods
        bound = sum(1 for p in members if (p.get("spec") or {}).get("nodeName"))
        going = any(pod_terminating(p) for p in members)
        cell = "-"
        if pod_groups is not None:
            gang = gang_of(group, name, SIZE, pod_groups)
            if gang is not None:
                reason = f" ({gang.reason})" if gang.reason else ""
                cell = gang.state.value + reason
        placement = _placement(bound, len(members) - bound, going)
        rows.append(Row(name, group.index, bound, len(members) - bound, placement, cell))
    return rows


def render(rows: Rows, gangs: bool, indent: str = "  ") -> str:
    header = ["LWS", "GROUP", "BOUND", "PENDING", "PLACEMENT"] + (["GANG"] if gangs else [])
    cells = []
    for r in rows:
        line = [r.lws, r.group, str(r.bound), str(r.pending), r.placement]
        cells.append(line + ([r.gang] if gangs else []))
    if not cells:
        return f"{indent}(no pods)"
    return table(header, cells, indent=indent)


async def read_rows(api: ApiClient, namespace: str, gangs: bool) -> Rows:
    pod_groups: dict[str, JSON] | None = None
    if gangs:
        listed = (await api.list(POD_GROUPS, namespace)).get("items") or []
        pod_groups = {str(meta_of(g).get("name")): g for g in listed}
    rows: Rows = []
    for name in NAMES:
        selector = f"{c.LABEL_SET_NAME}={name}"
        pods = (await api.list(PODS, namespace, label_selector=selector)).get("items") or []
        rows += rows_of(name, pods, pod_groups)
    return rows


def by_lws(rows: Rows) -> dict[str, Rows]:
    out: dict[str, Rows] = {name: [] for name in NAMES}
    for r in rows:
        out.setdefault(r.lws, []).append(r)
    return out


@dataclass
class Timeline:
    """Seconds since the story began, and the table whenever it changes and holds."""

    api: ApiClient
    namespace: str
    gangs: bool = False
    started: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    shown: Rows | None = None

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.started

    def say(self, text: str) -> None:
        click.echo(f"[{self.now():6.1f}s] {text}")

    async def settled(self, tries: int = 20) -> Rows:
        """The rows once two reads in a row agree (the last read after `tries`)."""
        before = await read_rows(self.api, self.namespace, self.gangs)
        for _ in range(tries):
            await asyncio.sleep(POLL)
            rows = await read_rows(self.api, self.namespace, self.gangs)
            if rows == before:
                break
            before = rows
        return before

    async def until(
        self,
        done: Callable[[Rows], bool],
        caption: Callable[[Rows], str],
        within: float,
        what: str,
        check: Callable[[Rows], None] | None = None,
    ) -> Rows:
        """Show the table whenever it changes, until `done` holds for it; `check` raises
        StoryError on a picture the story says cannot happen."""
        deadline = self.now() + within
        while True:
            rows = await self.settled()
            if rows != self.shown:
                self.shown = rows
                self.say(caption(rows))
                click.echo(render(rows, self.gangs))
            if check is not None:
                check(rows)
            if done(rows):
                return rows
            if self.now() > deadline:
                raise StoryError(f"{what}: not reached within {within:.0f}s")

    async def holds(
        self, still: Callable[[Rows], bool], seconds: float, what: str, caption: str
    ) -> None:
        """The picture keeps `still` for `seconds`; StoryError when it changes."""
        deadline = self.now() + seconds
        while self.now() < deadline:
            rows = await self.settled()
            if not still(rows):
                self.say(f"{what} no longer holds:")
                click.echo(render(rows, self.gangs))
                raise StoryError(f"{what}: did not hold for {seconds:.0f}s")
        self.say(caption)


# --- Act 1 ------------------------------------------------------------------------


def all_stuck(rows: Rows) -> bool:
    """Every slot taken, and no group can complete: each LeaderWorkerSet has a group
    partly bound, and pending pods."""
    if sum(r.bound for r in rows) != SLOTS or len(rows) != len(NAMES) * GROUPS:
        return False
    if sum(r.bound + r.pending for r in rows) != len(NAMES) * GROUPS * SIZE:
        return False
    return all(
        any(r.placement == PARTIAL for r in mine) and any(r.pending for r in mine)
        for mine in by_lws(rows).values()
    )


def _full_but_not_stuck(rows: Rows) -> None:
    """Every pod made and every slot taken settles it: nothing will move. A picture
    other than the stuck one is not the story's."""
    made = sum(r.bound + r.pending for r in rows) == len(NAMES) * GROUPS * SIZE
    if made and sum(r.bound for r in rows) == SLOTS and not all_stuck(rows):
        shape = ", ".join(f"{r.lws}/{r.group} {r.bound}/{SIZE}" for r in rows)
        raise StoryError(f"the cluster filled up without every set partly placed: {shape}")


def _act1_caption(rows: Rows) -> str:
    if all_stuck(rows):
        partial = sum(1 for r in rows if r.placement == PARTIAL)
        whole = sum(1 for r in rows if r.placement == WHOLE)
        pending = sum(r.pending for r in rows)
        return (
            f"stuck: all {SLOTS * GPUS_PER_POD} GPUs are held by {partial} partly placed "
            f"group(s) and {whole} whole one(s); {pending} pods pending can never be placed"
        )
    return "pods placed one by one as they come"


async def act_one(timeline: Timeline, api: ApiClient, namespace: str, pool: str) -> None:
    timeline.say("Act 1: without spec.scheduling, each pod is scheduled on its own")
    await asyncio.gather(
        *(api.create(LEADERWORKERSETS, gang_lws(n, namespace, pool, gangs=False)) for n in NAMES)
    )
    timeline.say(f"created {' and '.join(NAMES)}: {GROUPS} groups of {SIZE} pods each")
    await timeline.until(all_stuck, _act1_caption, 60, "partial placement", _full_but_not_stuck)
    await timeline.holds(
        all_stuck,
        HOLD,
        "the partial placement",
        f"nothing moves for {HOLD:.0f}s: no group can start, and none gives its GPUs back",
    )


# --- Act 2 ------------------------------------------------------------------------


def _never_partial(rows: Rows) -> None:
    for r in rows:
        if r.placement == PARTIAL:
            raise StoryError(f"{r.lws} group {r.group} is partly placed under gangs")


def one_whole(rows: Rows) -> bool:
    """One group whole, every other group complete in pods and with none bound."""
    if len(rows) != len(NAMES) * GROUPS or any(r.bound + r.pending != SIZE for r in rows):
        return False
    whole = [r for r in rows if r.placement == WHOLE]
    waiting = [r for r in rows if r.placement == NOT_STARTED]
    return len(whole) == 1 and len(waiting) == len(rows) - 1


def _act2_caption(rows: Rows) -> str:
    if one_whole(rows):
        whole = next(r for r in rows if r.placement == WHOLE)
        free = (SLOTS - SIZE) * GPUS_PER_POD
        return (
            f"{whole.lws} group {whole.group} placed whole; the other groups have no pod "
            f"bound and wait, leaving {free} GPUs free rather than starting half a group"
        )
    if any(r.gang.startswith("WaitingForMembers") for r in rows):
        return "groups coming up: a gang is not tried until all its pods exist"
    return "gangs placed whole or not at all"


async def act_two(timeline: Timeline, api: ApiClient, namespace: str, pool: str) -> None:
    timeline.say("Act 2: the same two with spec.scheduling: {} (a gang of 3 per group)")
    timeline.gangs, timeline.shown = True, None
    await asyncio.gather(
        *(api.create(LEADERWORKERSETS, gang_lws(n, namespace, pool, gangs=True)) for n in NAMES)
    )
    rows = await timeline.until(
        one_whole, _act2_caption, 30, "one group whole, the rest waiting", _never_partial
    )
    await timeline.holds(
        one_whole, HOLD, "one group whole", f"it holds for {HOLD:.0f}s: no group half placed"
    )
    placed = next(r.lws for r in rows if r.placement == WHOLE)
    waiting = next(n for n in NAMES if n != placed)
    await delete_lws(api, namespace, placed)
    timeline.say(f"deleted {placed}: its GPUs free up as its pods go")

    def gone(rows: Rows) -> bool:
        return not any(r.lws == placed for r in rows)

    def going(rows: Rows) -> str:
        if gone(rows):
            return f"{placed}'s pods are gone: its GPUs are free for {waiting}'s gangs"
        return f"{placed}'s pods terminating"

    await timeline.until(gone, going, 60, f"{placed} gone", _never_partial)
    freed = timeline.now()

    def started(rows: Rows) -> bool:
        return any(r.lws == waiting and r.placement == WHOLE for r in rows)

    rows = await timeline.until(
        started,
        lambda rows: f"{waiting} starts a group whole" if started(rows) else f"{waiting} waiting",
        60,
        f"{waiting} placed",
        _never_partial,
    )
    group = next(r.group for r in rows if r.lws == waiting and r.placement == WHOLE)
    timeline.say(
        f"{waiting} group {group} started whole {timeline.now() - freed:.1f}s after the "
        f"last of {placed}'s pods was gone; its other group waits for room"
    )


# --- the story ------------------------------------------------------------------


async def _delete(api: ApiClient, resource: Resource, name: str, namespace: str) -> None:
    try:
        await api.delete(resource, name, namespace)
    except ApiError as err:
        if not err.not_found:
            raise


async def delete_lws(api: ApiClient, namespace: str, name: str) -> None:
    """The LeaderWorkerSet, its leader StatefulSet and Service (named like it) and its
    ControllerRevisions. The garbage collector would delete them too, but on a fresh
    cluster it left them for 34 s: it picks up a newly installed kind (the CRD) at its
    periodic resync of the served resources (every 30 s) and misses a deletion before
    then. From the StatefulSet on it goes at once (it watches StatefulSets and pods from
    the start).

    Act 2 recreates the set under the same name, with the same revision key
    (spec.scheduling is not part of the revision). The controller deletes a deleted
    set's ControllerRevision or Service in the new one's way by UID and makes its own,
    so deleting those here only tidies. It does not take over the old leader
    StatefulSet: the new set's passes fail until it is gone, hence its deletion here.
    A Workload or PodGroups of a deleted set with spec.scheduling are left to the
    collector; until it removes them, the new set waits with WorkloadSchedulingReady
    False (InvalidSchedulingConfiguration, naming the object and its deleted owner)."""
    await _delete(api, LEADERWORKERSETS, name, namespace)
    await _delete(api, STATEFULSETS, name, namespace)
    await _delete(api, SERVICES, name, namespace)
    selector = f"{c.LABEL_SET_NAME}={name}"
    revisions = await api.list(CONTROLLER_REVISIONS, namespace, label_selector=selector)
    for revision in revisions.get("items") or []:
        await _delete(api, CONTROLLER_REVISIONS, str(meta_of(revision).get("name")), namespace)


async def _delete_all(api: ApiClient, namespace: str, within: float = 120) -> None:
    """The story's LeaderWorkerSets deleted and their pods gone."""
    for name in NAMES:
        await delete_lws(api, namespace, name)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    selector = f"{c.LABEL_SET_NAME} in ({','.join(NAMES)})"
    while (await api.list(PODS, namespace, label_selector=selector)).get("items"):
        if loop.time() > deadline:
            raise StoryError(f"the pods of {', '.join(NAMES)} still there after {within:.0f}s")
        await asyncio.sleep(POLL)


async def gang_story(
    api: ApiClient, sim: NodeSimulator, namespace: str = "default", pool: str = POOL
) -> None:
    """Tell the story; StoryError if it does not happen as told. The nodes are named
    and labelled after `pool`, and stay."""
    for spec in gang_nodes(pool):
        await sim.add_node(spec)
    timeline = Timeline(api, namespace)
    timeline.say(
        f"{NODES} nodes with {GPUS_PER_NODE} {GPU} each: room for {SLOTS} pods of "
        f"{GPUS_PER_POD} GPUs, so for one group of {SIZE} and not two"
    )
    await _delete_all(api, namespace)
    await act_one(timeline, api, namespace, pool)
    await _delete_all(api, namespace)
    timeline.say(f"deleted {' and '.join(NAMES)}; their pods are gone")
    await act_two(timeline, api, namespace, pool)
