"""The Hash group-ready gate: read from the worker pods, the worker events that wake the
leader for it, and the condition written to the leader only when it changes."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.pod.group_ready import (
    REASON_WORKERS_NOT_READY,
    REASON_WORKERS_READY,
    GroupReadyWrites,
    group_ready_patch,
    sync_group_ready,
)
from leaderworkerset.controllers.pod.triggers import WORKER_READINESS_CHANGED, hash_leader_of_worker
from leaderworkerset.group.readiness import worker_pods_ready
from leaderworkerset.runtime.client import STRATEGIC_MERGE_PATCH, ApiError
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import NOW, leader_pod
from tests.toolkit.statefulsets import worker_sts

KEY = "rev1"
NS = "default"


def workers_set(size: int = 4) -> JSON:
    # Its status lags: the StatefulSet controller has not counted any pod Ready yet.
    sts = worker_sts("lws", 0, KEY, size=size, ready=False)
    sts["metadata"]["uid"] = "sts-uid"
    return sts


def worker(index: int, *, ready: bool = True, **meta: Any) -> JSON:
    pod = leader_pod("lws", 0, meta.pop("key", KEY), ready=ready, name=f"lws-0-{index}")
    pod["metadata"]["labels"][c.LABEL_WORKER_INDEX] = str(index)
    pod["metadata"]["annotations"] = {c.ANNOTATION_LEADER_NAME: "lws-0"}
    pod["metadata"]["ownerReferences"] = [
        {"kind": "StatefulSet", "uid": meta.pop("owner", "sts-uid"), "controller": True}
    ]
    pod["metadata"].update(meta)
    return pod


async def ready(sts: JSON | None, *workers: JSON) -> bool:
    """The gate as the pod reconciler reads it: the pods the cache files under the
    worker StatefulSet (the leader's group is cached too, and must not count)."""
    leader = leader_pod("lws", 0, KEY)
    async with seeded_caches(leader, *([sts] if sts else []), *workers) as caches:
        pods = caches.controlled_pods(sts) if sts else []
        return worker_pods_ready(leader, sts, pods)


async def test_ready_when_every_worker_pod_is_though_the_statefulset_status_lags() -> None:
    assert await ready(workers_set(), *map(worker, (1, 2, 3)))


async def test_not_ready_while_a_worker_is_missing_unready_or_going() -> None:
    sts = workers_set()
    assert not await ready(sts, worker(1), worker(2))
    assert not await ready(sts, worker(1), worker(2), worker(3, ready=False))
    assert not await ready(sts, worker(1), worker(2), worker(3, deletionTimestamp=NOW))


async def test_pods_of_another_revision_or_owner_do_not_count() -> None:
    sts = workers_set()
    assert not await ready(sts, worker(1), worker(2), worker(3, key="rev0"))
    assert not await ready(sts, worker(1), worker(2), worker(3, owner="other-uid"))
    # A worker StatefulSet of another revision than its leader's is never ready.
    old = worker_sts("lws", 0, "rev0", size=4, ready=False)
    old["metadata"]["uid"] = "sts-uid"
    assert not await ready(old, *map(worker, (1, 2, 3)))
    assert not await ready(None, *map(worker, (1, 2, 3)))


def test_a_worker_turning_ready_unready_or_going_wakes_its_leader() -> None:
    changed = WORKER_READINESS_CHANGED
    assert changed.update is not None and changed.delete is not None
    assert changed.create is not None and not changed.create(worker(1))
    assert changed.update(worker(1, ready=False), worker(1))
    assert changed.update(worker(1), worker(1, ready=False))
    assert not changed.update(worker(1), worker(1))
    assert changed.delete(worker(1))
    # A leader's own events reach the pod reconciler anyway.
    leader = leader_pod("lws", 0, KEY)
    assert not changed.update(leader_pod("lws", 0, KEY, ready=False), leader)
    assert not changed.delete(leader)


async def test_only_a_hash_leader_is_woken() -> None:
    hashed = lws_object("lws", groupIdentity=c.GROUP_IDENTITY_HASH)
    ordinal = lws_object("ord")
    async with seeded_caches(hashed, ordinal) as caches:
        keys = hash_leader_of_worker(caches)
        assert list(keys(worker(1))) == ["default/lws-0"]
        other = worker(1)
        other["metadata"]["labels"][c.LABEL_SET_NAME] = "ord"
        assert list(keys(other)) == []
        gone = worker(1)
        gone["metadata"]["labels"][c.LABEL_SET_NAME] = "deleted"
        assert list(keys(gone)) == []


def test_a_written_condition_is_not_written_again_before_the_cache_shows_it() -> None:
    writes = GroupReadyWrites()
    leader = leader_pod("lws", 0, KEY)
    leader["metadata"]["resourceVersion"] = "10"
    assert not writes.written(leader, "True")
    writes.wrote(leader, "True")
    # The cache still holds the pod as it was before the write.
    assert writes.written(leader, "True")
    assert not writes.written(leader, "False")
    # A newer pod in the cache speaks for itself, whatever it says.
    leader["metadata"]["resourceVersion"] = "11"
    assert not writes.written(leader, "True")
    assert writes.unseen == {}
    writes.wrote(leader, "False")
    writes.forget(leader)
    assert writes.unseen == {}


# --- writing the condition ----------------------------------------------------------------------
def gated_leader(condition: str | None) -> JSON:
    leader = leader_pod("lws", 0, KEY)
    leader["spec"]["readinessGates"] = [{"conditionType": c.CONDITION_GROUP_READY}]
    if condition is not None:
        conditions = leader["status"]["conditions"]
        conditions.append({"type": c.CONDITION_GROUP_READY, "status": condition})
    return leader


def group_of(ready: bool) -> JSON:
    return worker_sts("lws", 0, KEY, size=2, ready=ready)


@pytest.mark.parametrize(
    ("condition", "ready", "written"),
    [
        # Absent reads as not ready already: only a True needs writing at first.
        (None, True, "True"),
        (None, False, None),
        ("False", True, "True"),
        ("True", False, "False"),
        ("True", True, None),
        ("False", False, None),
    ],
)
async def test_the_condition_is_written_only_when_it_changes(
    condition: str | None, ready: bool, written: str | None
) -> None:
    client = FakeApiClient()
    changed = await sync_group_ready(client, gated_leader(condition), group_of(ready))
    assert changed == (written is not None)
    if written is None:
        assert client.calls == []
        return
    (call,) = client.calls
    assert (call.verb, call.plural, call.name, call.namespace) == ("patch", "pods", "lws-0", NS)
    assert call.options == {"subresource": "status", "content_type": STRATEGIC_MERGE_PATCH}
    (entry,) = call.body["status"]["conditions"]
    reason = REASON_WORKERS_READY if written == "True" else REASON_WORKERS_NOT_READY
    assert (entry["type"], entry["status"], entry["reason"]) == (
        c.CONDITION_GROUP_READY,
        written,
        reason,
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["lastTransitionTime"])


async def test_a_leader_without_the_gate_is_left_alone() -> None:
    client = FakeApiClient()
    assert not await sync_group_ready(client, leader_pod("lws", 0, KEY), group_of(True))
    assert client.calls == []


async def test_a_leader_gone_before_the_write_is_no_error_and_no_write() -> None:
    client = FakeApiClient()
    client.fail[("patch", "pods")] = ApiError(404, {"reason": "NotFound"})
    assert not await sync_group_ready(client, gated_leader(None), group_of(True))
    client.fail[("patch", "pods")] = ApiError(500, {"message": "boom"})
    with pytest.raises(ApiError):
        await sync_group_ready(client, gated_leader(None), group_of(True))


async def test_a_write_the_cache_has_not_shown_is_not_repeated() -> None:
    client, writes = FakeApiClient(), GroupReadyWrites()
    assert await sync_group_ready(client, gated_leader(None), group_of(True), writes=writes)
    assert not await sync_group_ready(client, gated_leader(None), group_of(True), writes=writes)
    assert len(client.calls) == 1


def test_the_patch_carries_the_moment_given() -> None:
    moment = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)
    (entry,) = group_ready_patch(False, moment)["status"]["conditions"]
    assert entry["lastTransitionTime"] == "2026-03-04T05:06:07Z"
    assert entry["reason"] == REASON_WORKERS_NOT_READY
