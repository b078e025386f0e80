"""`kubectl lws` and the group-replacement reconciler, given the same pods, admit
the same gated leaders and pair each held one with the same tearing-down group.

The scenarios include those where they used to differ, when kubectl paired by
itself: a group whose worker is not deleted yet (its wait has no bound, so it goes
last), a group past its termination overrun and a group whose worker StatefulSet
was orphaned (neither counts in T any more)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import build_caches
from leaderworkerset.controllers.replacement.reconciler import ReplacementReconciler
from leaderworkerset.kubectl.pairing import pair
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import web_hash_lws as hash_lws
from tests.toolkit.pods import WEB_NOW as NOW
from tests.toolkit.pods import web_pod as pod
from tests.toolkit.statefulsets import controller_ref, statefulset

JSON = dict[str, Any]
KEY = "ns/web"


def worker_set(leader: str, key: str, *, orphaned: bool = False) -> JSON:
    return statefulset(
        leader,
        "ns",
        api_version="apps/v1",
        kind="StatefulSet",
        uid=f"uid-sts-{leader}",
        labels={c.LABEL_SET_NAME: "web", c.LABEL_GROUP_INDEX: key, c.LABEL_GROUP_KEY: key},
        owners=None if orphaned else [controller_ref("Pod", leader, f"uid-{leader}")],
    )


def of_set(worker: JSON, leader: str) -> JSON:
    """`worker`, owned by its leader's worker StatefulSet."""
    owned = copy.deepcopy(worker)
    owned["metadata"]["ownerReferences"] = [
        {"kind": "StatefulSet", "name": leader, "uid": f"uid-sts-{leader}", "controller": True}
    ]
    return owned


def gated(*ages: float) -> list[JSON]:
    return [pod(f"g{i}", key=f"{i}" * 40, gated=True, created=age) for i, age in enumerate(ages, 1)]


A, B, C = "a" * 40, "b" * 40, "c" * 40

SCENARIOS: dict[str, tuple[list[JSON], list[JSON]]] = {
    "a worker not deleted yet goes last": (
        [
            pod("a", key=A, deleting=30),
            pod("a-1", key=A, worker=1),
            pod("b-1", key=B, worker=1, deleting=10),
            *gated(50, 40, 20),
        ],
        [],
    ),
    "first due first": (
        [
            pod("a", key=A, deleting=5),
            pod("a-1", key=A, worker=1, deleting=5),
            pod("b", key=B, deleting=60),
            pod("b-1", key=B, worker=1, deleting=60),
            pod("c-1", key=C, worker=1, deleting=30),
            *gated(90, 80, 70),
        ],
        [],
    ),
    "past the termination overrun": (
        [pod("a", key=A, deleting=400), pod("b", key=B, deleting=10), *gated(60, 50)],
        [],
    ),
    "an orphaned worker set": (
        [
            of_set(pod("a-1", key=A, worker=1), "a"),
            pod("b", key=B, deleting=10),
            of_set(pod("b-1", key=B, worker=1, deleting=10), "b"),
            *gated(60, 50),
        ],
        [worker_set("a", A, orphaned=True), worker_set("b", B)],
    ),
    "more tearing down than waiting": (
        [pod("o1", key=A, deleting=9), pod("o2", key=B, deleting=3), *gated(5)],
        [],
    ),
    "nothing tearing down": ([*gated(20, 10)], []),
}


def feed(informer: Any, *objects: JSON) -> None:
    for i, obj in enumerate(objects):
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(i + 1)
        informer._handle_event({"type": "ADDED", "object": obj})


async def as_the_controller(
    lws: JSON, pods: list[JSON], statefulsets: list[JSON]
) -> tuple[set[str], dict[str, str]]:
    """The leaders the reconciler ungates, and the group each held one waits for."""
    client = FakeApiClient()
    caches = build_caches(client)
    feed(caches.leaderworkersets, lws)
    feed(caches.pods, *pods)
    feed(caches.statefulsets, *statefulsets)
    reconciler = ReplacementReconciler(client, caches, clock=NOW.timestamp)
    await reconciler(KEY)
    admitted = {call.name for call in client.calls_of("patch", "pods")}
    held = reconciler.held.get(KEY)
    assert held is not None
    return admitted, dict(zip(held.leaders, held.groups, strict=True))


@pytest.mark.parametrize("immediate", [False, True])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_kubectl_pairs_as_the_controller(scenario: str, immediate: bool) -> None:
    pods, statefulsets = SCENARIOS[scenario]
    policy = c.GROUP_REPLACEMENT_IMMEDIATE if immediate else c.GROUP_REPLACEMENT_POST_TERMINATION
    lws = hash_lws(groupReplacementPolicy=policy)
    admitted, waits_for = await as_the_controller(lws, pods, statefulsets)
    pairing = pair(pods, now=NOW.timestamp(), immediate=immediate, statefulsets=statefulsets)
    assert (pairing.admitting, pairing.waits_for) == (admitted, waits_for)
    assert pairing.gated == len(admitted) + len(waits_for)
