"""Group teardown beside the garbage collector (group_teardown.py): the leader first in
the foreground, then its own worker StatefulSet (foreground), its pods and its Services,
each by UID; nothing of a newer leader of the same name; nothing when the leader's
DELETE is refused; a foreground-deleting leader resumed once, again after a failure;
a leader deleted alone in the background resumed too, unless its dependents are to be
orphaned or it goes with its LeaderWorkerSet."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.resources import DEPLOYMENTS, STATEFULSETS
from leaderworkerset.controllers.pod.group_teardown import (
    FOREGROUND_FINALIZER,
    GroupTeardown,
    deleting_in_foreground,
)
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import NOW, leader_pod, lws_labels, pod
from tests.toolkit.statefulsets import leader_sts, worker_sts

JSON = dict[str, Any]
LEADER_REF = {"apiVersion": "v1", "kind": "Pod", "name": "lws-0", "uid": "uid-lws-0"}
LEADER_SET_REF = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws", "uid": "uid-ls"}
ORDINAL: LwsView = view_of(lws_object())


LWS_REF = {"apiVersion": c.API_VERSION, "kind": c.KIND, "name": "lws", "uid": ORDINAL.uid}


def leader_set(**meta: Any) -> JSON:
    """The leader StatefulSet that made lws-0."""
    sts = owned(leader_sts("lws", "rev", 2), LWS_REF)
    sts["metadata"].update({"uid": "uid-ls", **meta})
    return sts


def deployment(**meta: Any) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "lws",
            "namespace": "default",
            "uid": "uid-deploy",
            "labels": {c.LABEL_SET_NAME: "lws"},
            "ownerReferences": [{**LWS_REF, "controller": True}],
            **meta,
        },
    }


def owned(obj: JSON, owner: JSON) -> JSON:
    obj["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    return obj


def group(*, sts_owner_uid: str = "uid-lws-0") -> tuple[JSON, JSON, list[JSON], JSON]:
    """Leader lws-0, its worker StatefulSet, workers lws-0-1 (live), lws-0-2 (already
    terminating) and lws-0-3 (live), its per-group Service."""
    leader = owned(leader_pod("lws", 0, "rev"), LEADER_SET_REF)
    sts = owned(worker_sts("lws", 0, "rev", size=4), {**LEADER_REF, "uid": sts_owner_uid})
    sts["metadata"].update(uid="uid-sts", resourceVersion="7")
    sts_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws-0", "uid": "uid-sts"}
    workers = [
        owned(
            pod(
                f"lws-0-{i}",
                "default",
                api_version="v1",
                kind="Pod",
                uid=f"uid-lws-0-{i}",
                deleted=NOW if i == 2 else None,
                labels=lws_labels("lws", worker=str(i), group_index="0"),
            ),
            sts_ref,
        )
        for i in (1, 2, 3)
    ]
    service = owned(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "lws-0",
                "namespace": "default",
                "uid": "uid-svc",
                "resourceVersion": "8",
                "labels": {c.LABEL_SET_NAME: "lws"},
            },
        },
        LEADER_REF,
    )
    return leader, sts, workers, service


def deletes(client: FakeApiClient) -> list[tuple[str, str, str | None, str]]:
    """(plural, name, propagation, uid precondition) of each DELETE, in order."""
    return [
        (
            call.plural,
            call.name,
            call.options["propagation_policy"],
            call.options["preconditions"]["uid"],
        )
        for call in client.calls_of("delete")
    ]


async def test_the_leader_then_its_dependents_each_by_uid() -> None:
    leader, sts, workers, service = group()
    client = FakeApiClient()
    async with seeded_caches(leader, sts, *workers, service) as caches:
        await GroupTeardown(client, caches).tear_down(leader)
    found = deletes(client)
    assert found[0] == ("pods", "lws-0", "Foreground", "uid-lws-0")
    assert set(found[1:]) == {
        ("statefulsets", "lws-0", "Foreground", "uid-sts"),
        ("pods", "lws-0-1", None, "uid-lws-0-1"),
        ("pods", "lws-0-3", None, "uid-lws-0-3"),
        ("services", "lws-0", None, "uid-svc"),
    }, "the terminating lws-0-2 is left to finish"
    # The StatefulSet before its pods: it must not make them again.
    assert found.index(("statefulsets", "lws-0", "Foreground", "uid-sts")) < found.index(
        ("pods", "lws-0-1", None, "uid-lws-0-1")
    )


async def test_a_newer_leaders_statefulset_of_the_same_name_is_left_alone() -> None:
    leader, sts, workers, _ = group(sts_owner_uid="uid-lws-0-newer")
    client = FakeApiClient()
    async with seeded_caches(leader, sts, *workers) as caches:
        await GroupTeardown(client, caches).tear_down(leader)
    assert deletes(client) == [("pods", "lws-0", "Foreground", "uid-lws-0")]


@pytest.mark.parametrize("status", [409, 500])
async def test_a_refused_leader_delete_takes_nothing_with_it(status: int) -> None:
    leader, sts, workers, service = group()
    client = FakeApiClient()
    client.fail[("delete", "pods")] = ApiError(status, {"message": "no"})
    async with seeded_caches(leader, sts, *workers, service) as caches:
        with pytest.raises(ApiError):
            await GroupTeardown(client, caches).tear_down(leader)
    assert [call.plural for call in client.calls_of("delete")] == ["pods"]


async def test_without_parallel_teardown_only_the_leader() -> None:
    leader, sts, workers, service = group()
    client = FakeApiClient()
    async with seeded_caches(leader, sts, *workers, service) as caches:
        teardown = GroupTeardown(client, caches, parallel=False)
        await teardown.tear_down(leader)
        leader["metadata"].update(deletionTimestamp=NOW, finalizers=[FOREGROUND_FINALIZER])
        await teardown.resume(leader, ORDINAL)
    assert deletes(client) == [("pods", "lws-0", "Foreground", "uid-lws-0")]


def foreground_deleting(leader: JSON) -> JSON:
    leader["metadata"].update(deletionTimestamp=NOW, finalizers=[FOREGROUND_FINALIZER])
    return leader


async def test_a_foreground_deleting_leader_is_resumed_once() -> None:
    leader, sts, workers, service = group()
    foreground_deleting(leader)
    client = FakeApiClient()
    async with seeded_caches(leader, sts, *workers, service) as caches:
        teardown = GroupTeardown(client, caches)
        await teardown.resume(leader, ORDINAL)
        await teardown.resume(leader, ORDINAL)  # its next status write
    assert sorted(deletes(client)) == [
        ("pods", "lws-0-1", None, "uid-lws-0-1"),
        ("pods", "lws-0-3", None, "uid-lws-0-3"),
        ("services", "lws-0", None, "uid-svc"),
        ("statefulsets", "lws-0", "Foreground", "uid-sts"),
    ]


# A leader deleted in the background by someone else: its workers go at once, its
# Service when it is gone (the collector's), so that a surge rollout shows the old
# groups' Services beside the new ones'.
DEPENDENTS = [
    ("pods", "lws-0-1", None, "uid-lws-0-1"),
    ("pods", "lws-0-3", None, "uid-lws-0-3"),
    ("statefulsets", "lws-0", "Foreground", "uid-sts"),
]


@pytest.mark.parametrize(
    "meta",
    [{}, {"finalizers": [FOREGROUND_FINALIZER]}],
    ids=["alive", "finalizer-only"],
)
async def test_a_leader_not_being_deleted_is_not_resumed(meta: JSON) -> None:
    leader, sts, workers, service = group()
    leader["metadata"].update(meta)
    assert not deleting_in_foreground(leader)
    client = FakeApiClient()
    async with seeded_caches(leader, leader_set(), sts, *workers, service) as caches:
        await GroupTeardown(client, caches).resume(leader, ORDINAL)
    assert client.calls_of("delete") == []


async def test_a_leader_deleted_alone_in_the_background_is_resumed() -> None:
    """`kubectl delete pod`, an eviction, its StatefulSet rolling it: the collector would
    take its worker StatefulSet only once it is gone."""
    leader, sts, workers, service = group()
    leader["metadata"].update(deletionTimestamp=NOW)
    client = FakeApiClient()
    client.put(STATEFULSETS, leader_set())
    async with seeded_caches(leader, leader_set(), sts, *workers, service) as caches:
        teardown = GroupTeardown(client, caches)
        await teardown.resume(leader, ORDINAL)
        await teardown.resume(leader, ORDINAL)  # its next status write
    assert sorted(deletes(client)) == DEPENDENTS
    # At the versions cached: orphaning (the collector's, for --cascade=orphan) moves it.
    for call in client.calls_of("delete"):
        if call.plural != "pods":
            assert "resourceVersion" in call.options["preconditions"], call.plural
    assert len(client.calls_of("get", "statefulsets")) == 1


async def test_dependents_orphaned_before_the_cache_shows_it_are_kept() -> None:
    """The collector has orphaned the worker StatefulSet and dropped the leader's orphan
    finalizer; the cache shows the second, not yet the first. The DELETE at the cached
    version is refused: nothing else goes, and a later event tries again."""
    leader, sts, workers, service = group()
    leader["metadata"].update(deletionTimestamp=NOW)
    client = FakeApiClient()
    client.put(STATEFULSETS, leader_set())
    client.fail[("delete", "statefulsets")] = ApiError(409, {"reason": "Conflict"})
    async with seeded_caches(leader, leader_set(), sts, *workers, service) as caches:
        teardown = GroupTeardown(client, caches)
        await teardown.resume(leader, ORDINAL)
        assert "uid-lws-0" not in teardown.torn_down
    assert client.calls_of("delete", "pods") == []


@pytest.mark.parametrize(
    ("leader_meta", "set_meta", "live_meta", "lws_meta"),
    [
        ({"finalizers": ["orphan"]}, {}, {}, {}),  # orphaning: kept on purpose
        ({}, {"deletionTimestamp": NOW}, {}, {}),  # the leader StatefulSet goes too
        ({}, {"uid": "uid-another-ls"}, {}, {}),  # its StatefulSet is gone, a new one cached
        ({}, {}, {"deletionTimestamp": NOW}, {}),  # the cache has not seen that yet
        ({}, {}, None, {}),  # nor that it is gone
        ({}, {}, {}, {"deletionTimestamp": NOW}),  # the LeaderWorkerSet goes (foreground)
    ],
    ids=[
        "orphan",
        "leader-set-deleted",
        "leader-set-replaced",
        "leader-set-deleted-uncached",
        "leader-set-gone-uncached",
        "lws-deleted",
    ],
)
async def test_a_background_deletion_that_is_not_the_leaders_alone_is_left_to_the_collector(
    leader_meta: JSON, set_meta: JSON, live_meta: JSON | None, lws_meta: JSON
) -> None:
    leader, sts, workers, service = group()
    leader["metadata"].update(deletionTimestamp=NOW, **leader_meta)
    lws = lws_object()
    lws["metadata"].update(lws_meta)
    client = FakeApiClient()
    if live_meta is not None:
        client.put(STATEFULSETS, leader_set(**{**set_meta, **live_meta}))
    async with seeded_caches(leader, leader_set(**set_meta), sts, *workers, service) as caches:
        await GroupTeardown(client, caches).resume(leader, view_of(lws))
    assert client.calls_of("delete") == []


@pytest.mark.parametrize(
    ("deployment_meta", "resumed"),
    [({}, True), ({"deletionTimestamp": NOW}, False)],
    ids=["deployment-stays", "deployment-deleted"],
)
async def test_a_hash_leader_deleted_in_the_background(
    deployment_meta: JSON, resumed: bool
) -> None:
    """Its ReplicaSet is not cached: the leader Deployment says whether the LWS goes."""
    leader, sts, workers, service = group()
    leader["metadata"].update(deletionTimestamp=NOW)
    hashed = view_of(lws_object(groupIdentity=c.GROUP_IDENTITY_HASH))
    client = FakeApiClient()
    client.put(DEPLOYMENTS, deployment(**deployment_meta))
    seeded = (leader, deployment(), sts, *workers, service)
    async with seeded_caches(*seeded) as caches:
        await GroupTeardown(client, caches).resume(leader, hashed)
    assert sorted(deletes(client)) == (DEPENDENTS if resumed else [])


async def test_a_failed_dependent_delete_is_tried_again_and_gone_ones_skipped() -> None:
    leader, sts, workers, service = group()
    foreground_deleting(leader)
    client = FakeApiClient()
    client.fail[("delete", "pods")] = ApiError(500, {"message": "etcd timeout"})
    client.fail[("delete", "services")] = ApiError(404, {"reason": "NotFound"})
    async with seeded_caches(leader, sts, *workers, service) as caches:
        teardown = GroupTeardown(client, caches)
        await teardown.resume(leader, ORDINAL)  # logged, not raised: the collector is the fallback
        assert "uid-lws-0" not in teardown.torn_down
        client.fail.clear()
        client.calls.clear()
        await teardown.resume(leader, ORDINAL)
        assert "uid-lws-0" in teardown.torn_down
    assert ("pods", "lws-0-1", None, "uid-lws-0-1") in deletes(client)
