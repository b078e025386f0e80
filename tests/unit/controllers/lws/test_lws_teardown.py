"""Deleting a deleted LeaderWorkerSet's groups beside the garbage collector
(lws_teardown.py): every level at once, each object by UID, only down the owner chain
of the UID that was deleted; nothing when the option is off, when the leader
StatefulSet is no longer that UID's on the server (orphaned, or a new LeaderWorkerSet's),
or when it changed between the read and the DELETE. When the collector deleted the
leader StatefulSet first, the rest still goes at once, each leader read again."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import PODS, STATEFULSETS
from leaderworkerset.controllers.lws.lws_teardown import DELETE_TRIES, LwsTeardown
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.pods import lws_labels, pod
from tests.toolkit.statefulsets import controller_ref, statefulset

JSON = dict[str, Any]
NS = "default"


def lws(uid: str = "uid-lws") -> JSON:
    return {
        "apiVersion": f"{c.GROUP}/v1",
        "kind": c.KIND,
        "metadata": {"name": "lws", "namespace": NS, "uid": uid},
    }


def sts(name: str, uid: str, owner: JSON) -> JSON:
    return statefulset(
        name,
        NS,
        api_version="apps/v1",
        kind="StatefulSet",
        uid=uid,
        labels={c.LABEL_SET_NAME: "lws"},
        owners=[owner],
    )


def member(name: str, owner: JSON, worker: str) -> JSON:
    return pod(
        name,
        NS,
        api_version="v1",
        kind="Pod",
        uid=f"uid-{name}",
        labels=lws_labels("lws", worker=worker, group_index=name.split("-")[1]),
        owners=[owner],
    )


def one_group(lws_uid: str = "uid-lws") -> list[JSON]:
    """Leader StatefulSet `lws`, leader lws-0, its worker StatefulSet lws-0, worker lws-0-1."""
    leader_set = sts("lws", "uid-leader-sts", controller_ref(c.KIND, "lws", lws_uid))
    leader = member("lws-0", controller_ref("StatefulSet", "lws", "uid-leader-sts"), "0")
    worker_set = sts("lws-0", "uid-worker-sts", controller_ref("Pod", "lws-0", "uid-lws-0"))
    worker = member("lws-0-1", controller_ref("StatefulSet", "lws-0", "uid-worker-sts"), "1")
    return [leader_set, leader, worker_set, worker]


def deletes(client: FakeApiClient) -> set[tuple[str, str, str]]:
    return {
        (call.plural, call.name, call.options["preconditions"]["uid"])
        for call in client.calls_of("delete")
    }


async def test_every_level_of_the_deleted_uid_at_once() -> None:
    objects = one_group()
    client = FakeApiClient()
    live = client.put(STATEFULSETS, objects[0])
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
        await teardown.tear_down(f"{NS}/lws")  # told once
    assert deletes(client) == {
        ("statefulsets", "lws", "uid-leader-sts"),
        ("pods", "lws-0", "uid-lws-0"),
        ("statefulsets", "lws-0", "uid-worker-sts"),
        ("pods", "lws-0-1", "uid-lws-0-1"),
    }
    assert len(client.calls_of("delete")) == 4
    (leader_set_delete,) = [c for c in client.calls_of("delete") if c.name == "lws"]
    assert leader_set_delete.options["preconditions"] == {
        "uid": "uid-leader-sts",
        "resourceVersion": live["metadata"]["resourceVersion"],
    }
    # The StatefulSets before the pods they would otherwise make again.
    order = [(call.plural, call.name) for call in client.calls_of("delete")]
    assert order.index(("statefulsets", "lws-0")) < order.index(("pods", "lws-0-1"))


async def test_off_by_default() -> None:
    objects = one_group()
    client = FakeApiClient()
    client.put(STATEFULSETS, objects[0])
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
    assert client.calls == []


async def test_a_new_leaderworkersets_groups_are_left_alone() -> None:
    """The cache already holds the new LeaderWorkerSet of the same name's objects."""
    objects = one_group(lws_uid="uid-lws-new")
    client = FakeApiClient()
    client.put(STATEFULSETS, objects[0])
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws("uid-lws-old"))
        await teardown.tear_down(f"{NS}/lws")
    assert client.calls_of("delete") == []


async def test_an_orphaned_leader_set_is_left_alone() -> None:
    """`--cascade=orphan`: the server's copy lost its owner, the cache's not yet."""
    objects = one_group()
    client = FakeApiClient()
    orphaned = dict(objects[0], metadata={**objects[0]["metadata"], "ownerReferences": []})
    client.put(STATEFULSETS, orphaned)
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
    assert client.calls_of("delete") == []


async def test_a_leader_set_changed_after_every_read_is_left_alone() -> None:
    objects = one_group()
    client = FakeApiClient()
    client.put(STATEFULSETS, objects[0])
    client.fail[("delete", "statefulsets")] = ApiError(409, {"reason": "Conflict"})
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
    assert [call.name for call in client.calls_of("delete")] == ["lws"] * DELETE_TRIES


async def test_a_leader_set_written_between_the_read_and_the_delete_is_read_again() -> None:
    """Its controller wrote the status meanwhile: a 409 that says nothing of ownership."""
    objects = one_group()
    client = FakeApiClient()
    client.put(STATEFULSETS, objects[0])

    async def status_written_once(call: Call) -> None:
        if call.verb == "delete" and len(client.calls_of("delete")) == 1:
            raise ApiError(409, {"reason": "Conflict"})

    client.on_call = status_written_once
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
    assert ("pods", "lws-0-1", "uid-lws-0-1") in deletes(client)
    assert len(client.calls_of("get", "statefulsets")) == 2


async def test_a_failure_is_logged_not_raised() -> None:
    objects = one_group()
    client = FakeApiClient()
    client.put(STATEFULSETS, objects[0])
    client.fail[("delete", "pods")] = ApiError(500, {"message": "etcd timeout"})
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")  # the collector still does it all
    assert ("statefulsets", "lws-0", "uid-worker-sts") in deletes(client)


async def test_the_rest_goes_at_once_after_the_collector_deleted_the_leader_set() -> None:
    """The collector's first hop won the race: the set is gone on the server, its
    leader not yet marked. The leader is deleted at the version read, then its group."""
    objects = one_group()
    client = FakeApiClient()
    live_leader = client.put(PODS, objects[1])
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
    assert deletes(client) == {
        ("pods", "lws-0", "uid-lws-0"),
        ("statefulsets", "lws-0", "uid-worker-sts"),
        ("pods", "lws-0-1", "uid-lws-0-1"),
    }
    (leader_delete,) = [
        c for c in client.calls_of("delete") if (c.plural, c.name) == ("pods", "lws-0")
    ]
    assert (
        leader_delete.options["preconditions"]["resourceVersion"]
        == (live_leader["metadata"]["resourceVersion"])
    )


async def test_a_leader_orphaned_with_its_deleted_set_is_left_alone() -> None:
    """`--cascade=orphan` on the leader StatefulSet: gone, and its pods lost their owner
    on the server while the cache still shows it."""
    objects = one_group()
    client = FakeApiClient()
    client.put(PODS, dict(objects[1], metadata={**objects[1]["metadata"], "ownerReferences": []}))
    async with seeded_caches(*objects) as caches:
        teardown = LwsTeardown(client, caches, enabled=True)
        teardown.remember(lws())
        await teardown.tear_down(f"{NS}/lws")
    assert client.calls_of("delete") == []
