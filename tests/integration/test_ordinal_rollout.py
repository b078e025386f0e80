"""Ordinal mode, rolling updates against the real control plane.

A `RolloutRecorder` watches the LWS's pods, StatefulSets and the LWS itself from
before the template change, so every intermediate state the API server stored is
seen (not just samples of it): how many groups were unavailable at once, the order
in which leaders moved to the new revision key, the leader StatefulSet's
(partition, replicas) trajectory and the conditions the status went through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS, STATEFULSETS, Resource
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import (
    JSON,
    condition,
    get_lws,
    labels,
    live_pods,
    name_of,
    revisions,
    statefulsets,
    wait_ready,
)
from tests.toolkit.lws import PAUSE, lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROLLOUT_WITHIN = 180.0


# --- reading objects -------------------------------------------------------------------------
def key_of(obj: JSON) -> str:
    return labels(obj).get(c.LABEL_TEMPLATE_REVISION_HASH, "")


def uid_of(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def terminating(obj: JSON) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def pod_summary(pod: JSON) -> str:
    """`name:key:state` with state T(erminating) and R(eady) or the phase."""
    phase = str((pod.get("status") or {}).get("phase", "?"))
    state = ("T" if terminating(pod) else "") + ("R" if is_ready(pod) else phase)
    return f"{name_of(pod)}:{key_of(pod)}:{state}"


def sts_shape(sts: JSON) -> tuple[int, int]:
    """(partition, replicas) of the leader StatefulSet."""
    spec = sts.get("spec") or {}
    rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
    return int(rolling.get("partition", 0)), int(spec.get("replicas", 1))


def group_of(name: str, lws: str) -> tuple[int, int] | None:
    """(group, worker index) of a pod name `<lws>-<i>` or `<lws>-<i>-<j>`."""
    if not name.startswith(lws + "-"):
        return None
    parts = name[len(lws) + 1 :].split("-")
    if not all(p.isdigit() for p in parts) or len(parts) > 2:
        return None
    return int(parts[0]), int(parts[1]) if len(parts) == 2 else 0


# --- watching a rollout ----------------------------------------------------------------------
@dataclass
class RolloutRecorder:
    """Every state of one LWS's pods, leader StatefulSet and status, from the moment it
    is entered. Pod-derived figures are recomputed after every pod event (one watch
    stream, so in the order the API server stored them)."""

    api: ApiClient
    namespace: str
    name: str
    replicas: int  # R: groups [0, R) are the desired ones
    size: int
    pods: dict[str, JSON] = field(default_factory=dict)
    max_unavailable: int = 0  # desired groups not fully ready at once
    min_ready: int | None = None  # groups (surge included) fully ready at once
    # (group, key) in the order leaders carrying that key first appeared
    leader_keys: list[tuple[int, str]] = field(default_factory=list)
    leader_uids: dict[int, list[str]] = field(default_factory=dict)
    sts_trajectory: list[tuple[int, int]] = field(default_factory=list)
    conditions_seen: set[tuple[str, str]] = field(default_factory=set)
    trace: list[str] = field(default_factory=list)
    # resourceVersion of every object last seen, to tell when the watches caught up
    versions: dict[tuple[str, str], str] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def __aenter__(self) -> RolloutRecorder:
        selector = f"{c.LABEL_SET_NAME}={self.name}"
        pods, sets, lws = await self._read()
        for pod in pods.get("items", []):
            self._seen(PODS, pod)
            self.pods[name_of(pod)] = pod
        self._pods_changed()
        for sts in sets.get("items", []):
            self._seen(STATEFULSETS, sts)
            self._sts_event(sts)
        self._seen(LEADERWORKERSETS, lws)
        self._lws_event(lws)
        self._tasks = [
            asyncio.create_task(
                self._watch(PODS, pods, selector, self._pod_event), name="rec-pods"
            ),
            asyncio.create_task(
                self._watch(STATEFULSETS, sets, selector, self._sts_event), name="rec-sts"
            ),
            asyncio.create_task(
                self._watch(
                    LEADERWORKERSETS,
                    {"metadata": lws["metadata"]},
                    None,
                    self._lws_event,
                    field_selector=f"metadata.name={self.name}",
                ),
                name="rec-lws",
            ),
        ]
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        try:
            if exc_type is None:
                await self.synced()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _read(self) -> tuple[JSON, JSON, JSON]:
        selector = f"{c.LABEL_SET_NAME}={self.name}"
        pods = await self.api.list(PODS, self.namespace, label_selector=selector)
        sets = await self.api.list(STATEFULSETS, self.namespace, label_selector=selector)
        lws = await get_lws(self.api, self.namespace, self.name)
        return pods, sets, lws

    def _seen(self, resource: Resource, obj: JSON) -> None:
        key = (resource.plural, name_of(obj))
        if obj.get("deleted"):
            self.versions.pop(key, None)
        else:
            self.versions[key] = str(obj["metadata"].get("resourceVersion"))

    async def synced(self, within: float = 60.0) -> None:
        """Until the watches have delivered everything a fresh read shows: then the
        recorded history includes the state the test just waited for."""

        async def probe() -> bool:
            self.check()
            pods, sets, lws = await self._read()
            now = {
                (resource.plural, name_of(obj)): str(obj["metadata"].get("resourceVersion"))
                for resource, items in ((PODS, pods["items"]), (STATEFULSETS, sets["items"]))
                for obj in items
            }
            now[(LEADERWORKERSETS.plural, self.name)] = str(lws["metadata"]["resourceVersion"])
            return now == self.versions

        await eventually(probe, within=within, what="the recorder's watches to catch up")

    def check(self) -> None:
        """Fail fast when a watch died (the recorded figures would be incomplete)."""
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise AssertionError(f"recorder watch {task.get_name()} failed") from (
                    task.exception()
                )

    async def _watch(
        self,
        resource: Resource,
        listed: JSON,
        label_selector: str | None,
        handle: Callable[[JSON], None],
        *,
        field_selector: str | None = None,
    ) -> None:
        version = (listed.get("metadata") or {}).get("resourceVersion")
        while True:  # the server ends a watch after its timeout; resume from there
            async for event in self.api.watch(
                resource,
                self.namespace,
                resource_version=version,
                label_selector=label_selector,
                field_selector=field_selector,
                bookmarks=True,
            ):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise AssertionError(f"watch of {resource.plural} failed: {obj}")
                version = (obj.get("metadata") or {}).get("resourceVersion", version)
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    obj = {**obj, "deleted": True}
                self._seen(resource, obj)
                handle(obj)

    # -- pods --------------------------------------------------------------------------
    def _pod_event(self, pod: JSON) -> None:
        if pod.get("deleted"):
            self.pods.pop(name_of(pod), None)
        else:
            self.pods[name_of(pod)] = pod
            where = group_of(name_of(pod), self.name)
            if where is not None and where[1] == 0:
                group, key = where[0], key_of(pod)
                if (group, key) not in self.leader_keys:
                    self.leader_keys.append((group, key))
        self._pods_changed()

    def _pods_changed(self) -> None:
        ready = self.ready_groups()
        unavailable = sum(1 for i in range(self.replicas) if i not in ready)
        pods = " ".join(pod_summary(p) for _, p in sorted(self.pods.items()))
        self._note(f"ready groups {sorted(ready)}: {pods}")
        self.max_unavailable = max(self.max_unavailable, unavailable)
        self.min_ready = len(ready) if self.min_ready is None else min(self.min_ready, len(ready))
        for pod in self.pods.values():
            where = group_of(name_of(pod), self.name)
            if where is not None and where[1] == 0:
                uids = self.leader_uids.setdefault(where[0], [])
                if uid_of(pod) not in uids:
                    uids.append(uid_of(pod))

    def ready_groups(self) -> set[int]:
        """Groups whose N pods all exist, are not terminating, and are Running+Ready."""
        members: dict[int, set[int]] = {}
        for name, pod in self.pods.items():
            where = group_of(name, self.name)
            if where is None or terminating(pod) or not is_ready(pod):
                continue
            members.setdefault(where[0], set()).add(where[1])
        return {g for g, m in members.items() if m >= set(range(self.size))}

    def _note(self, what: str) -> None:
        self.trace.append(f"{asyncio.get_running_loop().time():.3f} {what}")

    def timeline(self) -> str:
        """Everything recorded, for assertion messages."""
        return "\n".join(self.trace)

    def update_order(self, key: str) -> list[int]:
        """Groups in the order their leader first carried `key`."""
        return [g for g, k in self.leader_keys if k == key]

    # -- leader StatefulSet and status ---------------------------------------------------
    def _sts_event(self, sts: JSON) -> None:
        if name_of(sts) != self.name or sts.get("deleted"):
            return
        shape = sts_shape(sts)
        self._note(f"leader sts (partition, replicas) = {shape}")
        if not self.sts_trajectory or self.sts_trajectory[-1] != shape:
            self.sts_trajectory.append(shape)

    def _lws_event(self, lws: JSON) -> None:
        for cond in (lws.get("status") or {}).get("conditions") or []:
            self.conditions_seen.add((str(cond.get("type")), str(cond.get("status"))))


# --- driving an LWS --------------------------------------------------------------------------
def container(version: str) -> JSON:
    return {
        "name": "main",
        "image": PAUSE,
        "resources": {"requests": {"cpu": "10m"}},
        "env": [{"name": "VERSION", "value": version}],
    }


async def change_template(api: ApiClient, namespace: str, name: str, version: str) -> None:
    """A worker template change (a new env value): a new revision, a rollout."""
    patch = {
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [container(version)]}}
            }
        }
    }
    await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace)


async def leader_sts(api: ApiClient, namespace: str, name: str) -> JSON:
    return await api.get(STATEFULSETS, name, namespace)


async def current_key(api: ApiClient, namespace: str, name: str) -> str:
    return key_of(await leader_sts(api, namespace, name))


async def create_settled(api: ApiClient, manifest: JSON) -> str:
    """Create the LWS, wait until all its groups are ready; its revision key."""
    meta = manifest["metadata"]
    await api.create(LEADERWORKERSETS, manifest)
    await wait_ready(api, meta["namespace"], meta["name"], manifest["spec"]["replicas"])
    return await current_key(api, meta["namespace"], meta["name"])


async def wait_new_key(api: ApiClient, namespace: str, name: str, old: str) -> str:
    async def probe() -> str | None:
        key = await current_key(api, namespace, name)
        return key if key and key != old else None

    return await eventually(probe, within=60, what=f"{name}: a revision other than {old}")


async def revision_keys(api: ApiClient, namespace: str, name: str) -> list[str]:
    return sorted(key_of(r) for r in await revisions(api, namespace, name))


async def wait_rolled_out(
    api: ApiClient,
    namespace: str,
    name: str,
    replicas: int,
    size: int,
    key: str,
    *,
    within: float = ROLLOUT_WITHIN,
) -> JSON:
    """Until every desired group is ready on `key`, the status says so for the current
    generation, the leader StatefulSet is back to (0, R) and only `key`'s revision is
    left. Returns the LWS."""

    async def probe() -> JSON | None:
        lws = await get_lws(api, namespace, name)
        status = lws.get("status") or {}
        if not (
            status.get("observedGeneration") == lws["metadata"]["generation"]
            and status.get("readyReplicas") == replicas
            and status.get("updatedReplicas") == replicas
            and status.get("replicas") == replicas
            and condition(lws, c.CONDITION_AVAILABLE) == "True"
        ):
            return None
        if sts_shape(await leader_sts(api, namespace, name)) != (0, replicas):
            return None
        pods = await live_pods(api, namespace, name)
        if len(pods) != replicas * size or any(key_of(p) != key for p in pods):
            return None
        if await revision_keys(api, namespace, name) != [key]:
            return None
        return lws

    try:
        return await eventually(probe, within=within, what=f"{name} rolled out to {key}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{await describe(api, namespace, name)}") from None


async def describe(api: ApiClient, namespace: str, name: str) -> str:
    """The state of an LWS's objects, for the message of a rollout that did not end."""
    lws = await get_lws(api, namespace, name)
    lines = [f"lws generation {lws['metadata']['generation']} status {lws.get('status')}"]
    for sts in await statefulsets(api, namespace, name):
        lines.append(
            f"sts {name_of(sts)} key={key_of(sts)} shape={sts_shape(sts)} "
            f"deleting={terminating(sts)} status={sts.get('status')}"
        )
    pods = await api.list(PODS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    lines.extend(
        f"pod {pod_summary(p)} uid={uid_of(p)} node={p['spec'].get('nodeName')}"
        for p in pods.get("items", [])
    )
    lines.append(f"revisions {await revision_keys(api, namespace, name)}")
    return "\n".join(lines)


def desired_names(name: str, replicas: int, size: int) -> set[str]:
    return {f"{name}-{i}" for i in range(replicas)} | {
        f"{name}-{i}-{j}" for i in range(replicas) for j in range(1, size)
    }


async def pods_by_name(api: ApiClient, namespace: str, name: str) -> dict[str, JSON]:
    return {name_of(p): p for p in await live_pods(api, namespace, name)}


def strategy(max_unavailable: Any = 1, max_surge: Any = 0, partition: int = 0) -> JSON:
    return {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {
            "maxUnavailable": max_unavailable,
            "maxSurge": max_surge,
            "partition": partition,
        },
    }


# --- 1. the default strategy -----------------------------------------------------------------
async def test_rolling_update_default_max_unavailable(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name, r, size = nodesim_api, "roll", 4, 2
    old = await create_settled(api, lws_manifest(name, namespace, replicas=r, size=size))
    assert await revision_keys(api, namespace, name) == [old]

    async with RolloutRecorder(api, namespace, name, r, size) as rec:
        await change_template(api, namespace, name, "v2")
        new = await wait_new_key(api, namespace, name, old)
        # Both revisions exist while the rollout runs: old groups are rebuilt from theirs.
        assert sorted(await revision_keys(api, namespace, name)) == sorted([old, new])
        lws = await wait_rolled_out(api, namespace, name, r, size, new)

    # Highest index first, one group at a time, never more than maxUnavailable down.
    assert rec.update_order(new) == [3, 2, 1, 0], rec.timeline()
    assert rec.max_unavailable == 1, rec.timeline()
    assert rec.sts_trajectory == [(0, 4), (4, 4), (3, 4), (2, 4), (1, 4), (0, 4)], rec.timeline()
    # Each leader was replaced exactly once (no second restart of a rolled group).
    assert {g: len(u) for g, u in rec.leader_uids.items()} == {g: 2 for g in range(r)}
    assert (c.CONDITION_UPDATE_IN_PROGRESS, "True") in rec.conditions_seen
    assert condition(lws, c.CONDITION_UPDATE_IN_PROGRESS) == "False"
    assert condition(lws, c.CONDITION_PROGRESSING) == "False"

    pods = await pods_by_name(api, namespace, name)
    assert set(pods) == desired_names(name, r, size)
    for pod in pods.values():
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
        assert env.get("VERSION") == "v2", name_of(pod)
    worker_sets = [
        s
        for s in (await api.list(STATEFULSETS, namespace)).get("items", [])
        if c.LABEL_GROUP_INDEX in labels(s)
    ]
    assert sorted(name_of(s) for s in worker_sets) == [f"{name}-{i}" for i in range(r)]
    assert {key_of(s) for s in worker_sets} == {new}
    # The truncation keeps the final revision object, not a new one with the same key.
    (final,) = await revisions(api, namespace, name)
    assert final["revision"] == 2


# --- 2. maxSurge -----------------------------------------------------------------------------
async def test_rolling_update_with_surge(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name, r, size = nodesim_api, "surge", 3, 2
    manifest = lws_manifest(name, namespace, replicas=r, size=size, rolloutStrategy=strategy(0, 1))
    old = await create_settled(api, manifest)

    async with RolloutRecorder(api, namespace, name, r, size) as rec:
        await change_template(api, namespace, name, "v2")
        new = await wait_new_key(api, namespace, name, old)
        surge = await eventually(
            lambda: api.get_or_none(PODS, f"{name}-3", namespace),
            within=60,
            what="the surge leader",
        )
        assert key_of(surge) == new  # created at the new template
        await wait_rolled_out(api, namespace, name, r, size, new)

    # Surge group first (it is above the partition), then 2, 1, 0; then it goes away.
    assert rec.update_order(new) == [3, 2, 1, 0], rec.timeline()
    assert rec.sts_trajectory == [(0, 3), (3, 4), (2, 4), (1, 4), (0, 4), (0, 3)], rec.timeline()
    # maxUnavailable 0: never fewer than R groups ready.
    assert rec.min_ready is not None and rec.min_ready >= r, rec.timeline()
    assert await api.get_or_none(STATEFULSETS, f"{name}-3", namespace) is None
    assert set(await pods_by_name(api, namespace, name)) == desired_names(name, r, size)


# --- 3. maxUnavailable and maxSurge together --------------------------------------------------
async def test_rolling_update_unavailable_and_surge(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name, r, size = nodesim_api, "both", 4, 2
    manifest = lws_manifest(name, namespace, replicas=r, size=size, rolloutStrategy=strategy(2, 2))
    old = await create_settled(api, manifest)

    async with RolloutRecorder(api, namespace, name, r, size) as rec:
        await change_template(api, namespace, name, "v2")
        new = await wait_new_key(api, namespace, name, old)
        await wait_rolled_out(api, namespace, name, r, size, new)

    # case 2 writes (4, 6): two surge groups, then back to R.
    assert rec.sts_trajectory[:2] == [(0, 4), (4, 6)], rec.timeline()
    assert max(replicas for _, replicas in rec.sts_trajectory) == 6
    assert rec.sts_trajectory[-1] == (0, 4), rec.timeline()
    # The bound is on ready groups, surge groups included: once both surge groups are
    # ready the step (maxUnavailable + maxSurge = 4) may take every desired group down
    # at once (upstream's rollout-strategy docs, stage 5), so there is no bound on the
    # desired groups alone.
    assert rec.min_ready is not None and rec.min_ready >= 2, rec.timeline()
    assert set(rec.update_order(new)) == {0, 1, 2, 3, 4, 5}
    assert set(await pods_by_name(api, namespace, name)) == desired_names(name, r, size)


# --- 4. groups already unready when the rollout starts -------------------------------
@pytest.mark.parametrize(
    ("replicas", "unready"),
    [
        pytest.param(3, [2], id="top-group-unready"),
        pytest.param(2, [0, 1], id="every-group-unready"),
    ],
)
async def test_rollout_with_unready_groups(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    replicas: int,
    unready: list[int],
) -> None:
    """Groups that are unready at the top of the range cost no availability to update,
    so they never block the rollout (with maxUnavailable 1 an unready group in the
    middle would: it already uses the whole budget)."""
    api, name, size = nodesim_api, "sick", 2
    old = await create_settled(api, lws_manifest(name, namespace, replicas=replicas, size=size))
    sick = {g: f"{name}-{g}-1" for g in unready}
    before = await pods_by_name(api, namespace, name)
    for pod in sick.values():
        await node_simulator.set_container_ready(namespace, pod, False)

    async def degraded() -> bool:
        lws = await get_lws(api, namespace, name)
        return (lws.get("status") or {}).get("readyReplicas") == replicas - len(unready)

    await eventually(degraded, within=60, what="the sick groups reported unready")

    await change_template(api, namespace, name, "v2")
    new = await wait_new_key(api, namespace, name, old)
    await wait_rolled_out(api, namespace, name, replicas, size, new)

    after = await pods_by_name(api, namespace, name)
    for pod in sick.values():
        # The unready worker was replaced by a fresh (ready) one on the new revision.
        assert uid_of(after[pod]) != uid_of(before[pod])
        assert key_of(after[pod]) == new and is_ready(after[pod])


# --- 5. a second template change mid-rollout -----------------------------------------
async def test_template_change_during_rollout(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name, r, size = nodesim_api, "twice", 4, 2
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=r, size=size))
    await wait_ready(api, namespace, name, r)
    v1 = await current_key(api, namespace, name)

    async with RolloutRecorder(api, namespace, name, r, size) as rec:
        await change_template(api, namespace, name, "v2")
        v2 = await wait_new_key(api, namespace, name, v1)

        async def group_3_on_v2() -> bool:
            pod = await api.get_or_none(PODS, f"{name}-3", namespace)
            return pod is not None and key_of(pod) == v2 and is_ready(pod)

        await eventually(group_3_on_v2, within=60, what="group 3 updated to v2")
        partition_before, _ = sts_shape(await leader_sts(api, namespace, name))
        assert partition_before < r  # the first rollout has made progress
        await change_template(api, namespace, name, "v3")
        v3 = await wait_new_key(api, namespace, name, v2)

        async def three_revisions() -> list[str] | None:
            keys = await revision_keys(api, namespace, name)
            return keys if len(keys) == 3 else None

        assert sorted(await eventually(three_revisions, within=30, what="3 revisions")) == sorted(
            [v1, v2, v3]
        )
        await wait_rolled_out(api, namespace, name, r, size, v3)

    partitions = [p for p, _ in rec.sts_trajectory]
    # The partition went down for v2, was reset to R for v3, and came down to 0.
    first_low = next(i for i, p in enumerate(partitions) if 0 < p < r)
    assert r in partitions[first_low:], partitions
    assert partitions[-1] == 0
    # (No bound on unavailable groups here: resetting the partition to R replaces
    # group 3 at once, even if group 2 was mid-update to v2 at that moment.)
    assert rec.update_order(v3) == [3, 2, 1, 0], rec.timeline()
    (final,) = await revisions(api, namespace, name)
    assert key_of(final) == v3 and final["revision"] == 3


# --- 6. the partition --------------------------------------------------------------------------
async def test_partition_holds_lower_groups(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name, r, size = nodesim_api, "part", 4, 2
    manifest = lws_manifest(
        name, namespace, replicas=r, size=size, rolloutStrategy=strategy(partition=2)
    )
    old = await create_settled(api, manifest)
    assert sts_shape(await leader_sts(api, namespace, name)) == (2, r)

    async with RolloutRecorder(api, namespace, name, r, size) as rec:
        await change_template(api, namespace, name, "v2")
        new = await wait_new_key(api, namespace, name, old)

        async def paused_available() -> JSON | None:
            lws = await get_lws(api, namespace, name)
            status = lws.get("status") or {}
            if (
                status.get("observedGeneration") == lws["metadata"]["generation"]
                and status.get("updatedReplicas") == 2
                and status.get("readyReplicas") == r
                and condition(lws, c.CONDITION_AVAILABLE) == "True"
            ):
                return lws
            return None

        await eventually(paused_available, within=ROLLOUT_WITHIN, what="groups 2,3 rolled")
        await rec.synced()
        pods = await pods_by_name(api, namespace, name)
        for i in range(r):
            expected = new if i >= 2 else old
            for j in range(size):
                pod = pods[f"{name}-{i}" if j == 0 else f"{name}-{i}-{j}"]
                assert key_of(pod) == expected, name_of(pod)
        assert sts_shape(await leader_sts(api, namespace, name)) == (2, r)
        # The old revision is kept: groups 0 and 1 are rebuilt from it.
        assert sorted(await revision_keys(api, namespace, name)) == sorted([old, new])
        assert rec.update_order(new) == [3, 2], rec.timeline()
        assert [p for p, _ in rec.sts_trajectory] == [2, 4, 3, 2]

        patch = {"spec": {"rolloutStrategy": strategy(partition=0)}}
        await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace)
        await wait_rolled_out(api, namespace, name, r, size, new)

    assert rec.update_order(new) == [3, 2, 1, 0], rec.timeline()
    assert [p for p, _ in rec.sts_trajectory] == [2, 4, 3, 2, 1, 0]
    assert rec.max_unavailable == 1, rec.timeline()


# --- 7. the controller restarted mid-rollout ---------------------------------------------------
async def test_controller_restart_mid_rollout(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name, r, size = nodesim_api, "crash", 4, 2
    old = await create_settled(api, lws_manifest(name, namespace, replicas=r, size=size))

    async with RolloutRecorder(api, namespace, name, r, size) as rec:
        await change_template(api, namespace, name, "v2")
        new = await wait_new_key(api, namespace, name, old)

        async def top_two_rolled() -> dict[str, JSON] | None:
            pods = await pods_by_name(api, namespace, name)
            group = [f"{name}-{i}{s}" for i in (2, 3) for s in ("", "-1")]
            if all(n in pods and key_of(pods[n]) == new and is_ready(pods[n]) for n in group):
                return pods
            return None

        rolled = await eventually(top_two_rolled, within=ROLLOUT_WITHIN, what="groups 2,3 rolled")
        # Group 0 still runs the old revision (it is next-but-one in line): the crash
        # lands mid-rollout.
        assert key_of(rolled[f"{name}-0"]) == old
        kept = {n: uid_of(p) for n, p in rolled.items() if n.startswith((f"{name}-2", f"{name}-3"))}
        await lws_controller.restart(crash=True)
        await wait_rolled_out(api, namespace, name, r, size, new)

    pods = await pods_by_name(api, namespace, name)
    assert {n: uid_of(pods[n]) for n in kept} == kept
    assert {g: len(u) for g, u in rec.leader_uids.items()} == {g: 2 for g in range(r)}
    assert rec.max_unavailable == 1, rec.timeline()
    assert rec.update_order(new) == [3, 2, 1, 0], rec.timeline()
