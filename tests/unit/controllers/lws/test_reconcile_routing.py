"""Which leader workload a LeaderWorkerSet reconcile applies (Hash: a Deployment,
Ordinal: a StatefulSet), and when it applies none: a workload of that name controlled
by someone else, or one being deleted."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.reconcile_errors import ReconcileError
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.controllers.lws.reconciler import DELETING_REQUEUE, LeaderWorkerSetReconciler
from leaderworkerset.runtime.controller import Result
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.recorded_events import RecordedEvents

JSON = dict[str, Any]
KEY = "default/lws"


def an_lws(mode: str) -> JSON:
    return lws_object("lws", replicas=2, size=2, groupIdentity=mode)


def workload(kind: str, owner_uid: str, deleting: bool = False) -> JSON:
    meta: JSON = {
        "name": "lws",
        "namespace": "default",
        "labels": {c.LABEL_SET_NAME: "lws"},
        "ownerReferences": [
            {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND,
                "name": "lws",
                "uid": owner_uid,
                "controller": True,
            }
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": {}, "status": {}}


async def reconcile(*objects: JSON) -> tuple[FakeApiClient, RecordedEvents, Result | None]:
    client, events = FakeApiClient(), RecordedEvents()
    for obj in objects:
        if obj["kind"] == c.KIND:
            client.put(LEADERWORKERSETS, obj)
    async with seeded_caches(*objects) as caches:
        lws = LeaderWorkerSetReconciler(client, caches, events)
        result = await lws(KEY)
    return client, events, result


@pytest.mark.parametrize(
    ("mode", "plural"),
    [(c.GROUP_IDENTITY_HASH, "deployments"), (c.GROUP_IDENTITY_ORDINAL, "statefulsets")],
)
async def test_each_mode_applies_its_own_leader_workload(mode: str, plural: str) -> None:
    client, events, result = await reconcile(an_lws(mode))
    assert result is None
    # The revision first, then the workload, the shared Service and the status.
    assert [(call.verb, call.plural) for call in client.calls] == [
        ("create", "controllerrevisions"),
        ("apply", plural),
        ("create", "services"),
        ("replace", "leaderworkersets"),
    ]
    assert events.reasons[0] == c.EVENT_REASON_CREATING_REVISION


@pytest.mark.parametrize(
    ("mode", "kind"),
    [(c.GROUP_IDENTITY_HASH, "Deployment"), (c.GROUP_IDENTITY_ORDINAL, "StatefulSet")],
)
async def test_a_leader_workload_controlled_by_someone_else_is_refused(
    mode: str, kind: str
) -> None:
    lws = an_lws(mode)
    with pytest.raises(ReconcileError, match=f"{kind} default/lws exists and is controlled"):
        await reconcile(lws, workload(kind, "uid-of-an-older-lws"))


@pytest.mark.parametrize(
    ("mode", "kind"),
    [(c.GROUP_IDENTITY_HASH, "Deployment"), (c.GROUP_IDENTITY_ORDINAL, "StatefulSet")],
)
async def test_a_leader_workload_being_deleted_is_waited_out(mode: str, kind: str) -> None:
    lws = an_lws(mode)
    own = workload(kind, lws["metadata"]["uid"], deleting=True)
    client, _, result = await reconcile(lws, own)
    assert result == Result(requeue_after=DELETING_REQUEUE)
    assert client.calls == []


async def test_a_deleted_lws_is_left_to_garbage_collection() -> None:
    client, events, result = await reconcile()
    assert (client.calls, events.reasons, result) == ([], [], None)
