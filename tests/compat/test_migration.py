"""Migration between upstream's Go manager and ours, both ways, with no group restarted.

One manager creates Ordinal LeaderWorkerSets and brings them to Ready; it is stopped
(SIGTERM, as scaling its Deployment to zero does), the webhooks are routed to the
other, and the other starts. Across the handover: no pod replaced (same UIDs), no
revision change (template-revision-hash labels, ControllerRevisions, StatefulSets),
status still Ready. Then a template change rolls under the new manager, and it adds
exactly one revision (a hash mismatch at takeover would have added one more).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from lws_localcluster import manager_process
from lws_localcluster.manager_process import (
    ManagerProcess,
    WebhookTLS,
    install_upstream_needs,
)

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import CONTROLLER_REVISIONS, LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import labels, live_pods, name_of, statefulsets, wait_ready
from tests.toolkit.lws import PAUSE, lws_manifest
from tests.toolkit.waiting import eventually

from .managers import Managers

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]

JSON = dict[str, Any]
REPLICAS = 2
SIZE = 2
# After the new manager answers /readyz it lists, syncs its caches and reconciles
# every LeaderWorkerSet within a few seconds; a hash mismatch would replace pods at
# its first reconcile. Watched this long, the handover must change nothing.
HANDOVER_WATCH = 15.0
READY_WITHIN = 240.0

# The template-revision-hash each manager gave each manifest, before and after the
# template change: (manager, LeaderWorkerSet name, "created" | "rolled") -> hash. Both
# hash the same template, so once both directions ran the two must agree.
HASHES: dict[tuple[str, str, str], str] = {}


def manifests(namespace: str) -> list[JSON]:
    """Ordinal LeaderWorkerSets: with template metadata, without it, and a bare one
    (no template metadata, no container resources)."""
    plain = lws_manifest("plain", namespace, replicas=REPLICAS, size=SIZE)
    labelled = lws_manifest("labelled", namespace, replicas=REPLICAS, size=SIZE)
    labelled["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"app": "compat"},
        "annotations": {"compat.test/kind": "labelled"},
    }
    bare = lws_manifest("bare", namespace, replicas=REPLICAS, size=SIZE)
    bare["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"] = [
        {"name": "main", "image": PAUSE}
    ]
    return [plain, labelled, bare]


@dataclass(frozen=True)
class Snapshot:
    """What a handover must not change, for one LeaderWorkerSet."""

    pods: dict[str, tuple[str, str]]  # name -> (uid, template-revision-hash)
    statefulsets: dict[str, tuple[str, str]]  # name -> (uid, template-revision-hash)
    revisions: dict[str, str]  # ControllerRevision name -> uid

    def hashes(self) -> set[str]:
        return {h for _, h in self.pods.values()}

    def differences(self, later: Snapshot) -> list[str]:
        out = []
        for kind in ("pods", "statefulsets", "revisions"):
            before, after = getattr(self, kind), getattr(later, kind)
            if before != after:
                out.append(f"{kind}: {before} -> {after}")
        return out


async def revisions_of(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    answer = await api.list(CONTROLLER_REVISIONS, namespace)
    return [
        r
        for r in answer.get("items", [])
        if any(o.get("name") == name for o in r["metadata"].get("ownerReferences") or [])
    ]


async def snapshot(api: ApiClient, namespace: str, name: str) -> Snapshot:
    hash_label = c.LABEL_TEMPLATE_REVISION_HASH
    pods = {
        name_of(p): (p["metadata"]["uid"], labels(p).get(hash_label, ""))
        for p in await live_pods(api, namespace, name)
    }
    sets = {
        name_of(s): (s["metadata"]["uid"], labels(s).get(hash_label, ""))
        for s in await statefulsets(api, namespace, name)
    }
    revisions = {name_of(r): r["metadata"]["uid"] for r in await revisions_of(api, namespace, name)}
    return Snapshot(pods, sets, revisions)


async def route_webhooks(api: ApiClient, manager: ManagerProcess, tls: WebhookTLS) -> None:
    """The CRDs, and the webhook configurations calling `manager` with the test CA."""
    await install_upstream_needs(api)
    await manager_process.route_webhooks(api, manager.webhook_port, tls.ca_pem)


class Clock:
    """Wall time of each phase, printed at the end of a direction."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.started = self.last = time.monotonic()
        self.phases: list[tuple[str, float]] = []

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.phases.append((phase, now - self.last))
        self.last = now

    def report(self) -> str:
        lines = [f"{self.title}: {time.monotonic() - self.started:.1f}s wall"]
        lines += [f"  {phase}: {seconds:.1f}s" for phase, seconds in self.phases]
        return "\n".join(lines)


async def watch_unchanged(
    api: ApiClient, namespace: str, before: dict[str, Snapshot], creator: str
) -> None:
    """Snapshots taken again and again for HANDOVER_WATCH seconds; fails at once on
    any difference."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANDOVER_WATCH
    while loop.time() < deadline:
        for name, earlier in before.items():
            diffs = earlier.differences(await snapshot(api, namespace, name))
            assert not diffs, f"{name} changed at the handover from {creator}: {diffs}"
        await asyncio.sleep(0.5)


async def roll_template(
    api: ApiClient, namespace: str, name: str, before: Snapshot, creator: str
) -> str:
    """A worker-template change rolls every group to one new revision, under the new
    manager; the only revisions ever made are the old one and the new one."""
    patch = {
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {"metadata": {"annotations": {"compat.test/rollout": "1"}}}
            }
        }
    }
    await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace)
    old_uids = {uid for uid, _ in before.pods.values()}
    (old_hash,) = before.hashes()

    async def rolled() -> Snapshot | None:
        now = await snapshot(api, namespace, name)
        hashes = now.hashes()
        if (
            len(now.pods) == REPLICAS * SIZE
            and len(hashes) == 1
            and hashes != {old_hash}
            and not old_uids & {uid for uid, _ in now.pods.values()}
        ):
            return now
        return None

    after = await eventually(rolled, within=READY_WITHIN, interval=0.5, what=f"{name} rolled")
    await wait_ready(api, namespace, name, REPLICAS, within=READY_WITHIN)
    (new_hash,) = after.hashes()
    made = {
        labels(r).get(c.LABEL_TEMPLATE_REVISION_HASH, "")
        for r in await revisions_of(api, namespace, name)
    }
    assert made <= {old_hash, new_hash}, f"{name}: revisions {made}, old {old_hash}"
    assert new_hash in made, f"{name}: no ControllerRevision for {new_hash}: {made}"
    return new_hash


def same_hashes() -> None:
    """The two managers hash each template alike, once both have hashed it."""
    for name in ("plain", "labelled", "bare"):
        for when in ("created", "rolled"):
            go, ours = HASHES.get(("go", name, when)), HASHES.get(("ours", name, when))
            if go is None or ours is None:
                continue
            # Templates without metadata or container resources included: our
            # webhook stores what upstream's typed round trip adds.
            assert go == ours, f"{name} ({when}): go hashes {go}, ours {ours}"
            print(f"hash {name} {when}: go = ours = {go}")


async def migrate(
    api: ApiClient,
    managers: Managers,
    namespace: str,
    first: Callable[[], ManagerProcess],
    second: Callable[[], ManagerProcess],
    creator: str,
) -> None:
    clock = Clock(f"{creator} -> {'ours' if creator == 'go' else 'go'}")
    old = first()
    await route_webhooks(api, old, managers.tls)
    old.start()
    await old.wait_ready()
    clock.lap(f"{old.name} started")

    bodies = manifests(namespace)
    for body in bodies:
        await api.create(LEADERWORKERSETS, copy.deepcopy(body))
    names = [name_of(b) for b in bodies]
    await asyncio.gather(
        *(wait_ready(api, namespace, n, REPLICAS, within=READY_WITHIN) for n in names)
    )
    before = {n: await snapshot(api, namespace, n) for n in names}
    for n in names:
        stored = (await api.get(LEADERWORKERSETS, n, namespace))["spec"]["leaderWorkerTemplate"]
        worker = stored["workerTemplate"]
        print(
            f"{n} as stored via {old.name}'s webhook: workerTemplate.metadata="
            f"{worker.get('metadata', '<absent>')}, containers[0].resources="
            f"{worker['spec']['containers'][0].get('resources', '<absent>')}"
        )
    for n, snap in before.items():
        assert len(snap.pods) == REPLICAS * SIZE and len(snap.hashes()) == 1, (n, snap)
        assert snap.revisions, f"{old.name} made no ControllerRevision for {n}"
    clock.lap(f"{len(names)} LeaderWorkerSets created and Ready under {old.name}")
    for n, snap in before.items():
        (HASHES[(old.name, n, "created")],) = snap.hashes()

    assert await old.stop() == 0, f"{old.name} did not exit cleanly:\n{old.log_tail()}"
    new = second()
    await route_webhooks(api, new, managers.tls)
    new.start()
    await new.wait_ready()
    clock.lap(f"handover: {old.name} stopped, {new.name} started")

    await watch_unchanged(api, namespace, before, creator)
    for n in names:
        await wait_ready(api, namespace, n, REPLICAS, within=READY_WITHIN)
    clock.lap(f"handover watched ({HANDOVER_WATCH:.0f}s), status still Ready")

    after_handover = {n: await snapshot(api, namespace, n) for n in names}
    rolled = await asyncio.gather(
        *(roll_template(api, namespace, n, after_handover[n], creator) for n in names)
    )
    for n, new_hash in zip(names, rolled, strict=True):
        HASHES[(new.name, n, "rolled")] = new_hash
    clock.lap(f"template change rolled under {new.name}")
    assert new.running(), f"{new.name} exited:\n{new.log_tail()}"

    print(clock.report())
    same_hashes()


async def test_go_to_ours(namespace: str, managers: Managers, nodesim_api: ApiClient) -> None:
    await migrate(nodesim_api, managers, namespace, managers.go, managers.ours, "go")


async def test_ours_to_go(namespace: str, managers: Managers, nodesim_api: ApiClient) -> None:
    await migrate(nodesim_api, managers, namespace, managers.ours, managers.go, "ours")
