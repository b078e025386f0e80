"""The LeaderWorkerSet reconciler's decisions, against the fake API client and caches
seeded with what the cluster holds: which leader workload each group identity gets,
the revision and shared Service it makes, the status it writes, that a pass over an
unchanged cluster writes nothing, and what it does with workloads it cannot use."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api import constants as c
from leaderworkerset.controllers.lws.reconciler import DELETING_REQUEUE, LeaderWorkerSetReconciler
from leaderworkerset.runtime.client import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    STATEFULSETS,
    ApiError,
    Resource,
)
from leaderworkerset.runtime.controller import Result
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object

JSON = dict[str, Any]
KEY = "default/lws"

# Each group identity's leader workload, and the one it must never get.
MODES = [
    pytest.param(c.GROUP_IDENTITY_ORDINAL, STATEFULSETS, DEPLOYMENTS, id="Ordinal"),
    pytest.param(c.GROUP_IDENTITY_HASH, DEPLOYMENTS, STATEFULSETS, id="Hash"),
]


def lws_in(mode: str, **spec: Any) -> JSON:
    return lws_object(groupIdentity=mode, **spec)


def writes(client: FakeApiClient) -> list[tuple[str, str, str]]:
    return [(call.verb, call.plural, call.name) for call in client.writes()]


async def first_pass(lws: JSON) -> tuple[LeaderWorkerSetReconciler, FakeApiClient]:
    """A reconciler that has reconciled `lws` once on an empty cluster."""
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    async with seeded_caches(lws) as caches:
        reconciler = LeaderWorkerSetReconciler(client, caches)
        assert await reconciler(KEY) is None
    return reconciler, client


async def pass_over_stored(
    reconciler: LeaderWorkerSetReconciler, client: FakeApiClient
) -> Result | None:
    """Another pass, the caches now showing everything the client stores."""
    client.calls.clear()
    async with seeded_caches(*client.objects.values()) as caches:
        reconciler.caches = caches
        return await reconciler(KEY)


def applied(client: FakeApiClient, resource: Resource) -> list[JSON]:
    return [call.body for call in client.calls_of("apply", resource.plural)]


# --- what a new LeaderWorkerSet gets -------------------------------------------------------


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_new_lws_gets_a_revision_its_leader_workload_and_the_shared_service(
    mode: str, workload: Resource, never: Resource
) -> None:
    _, client = await first_pass(lws_in(mode, replicas=3))
    assert writes(client) == [
        ("create", "controllerrevisions", client.calls[0].name),
        ("apply", workload.plural, "lws"),
        ("create", "services", "lws"),
        ("replace", "leaderworkersets", "lws"),
    ]
    assert applied(client, never) == []
    (body,) = applied(client, workload)
    assert body["kind"] == workload.kind and body["spec"]["replicas"] == 3
    (revision,) = [call.body for call in client.calls_of("create", "controllerrevisions")]
    key = revision["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH]
    template_labels = body["spec"]["template"]["metadata"]["labels"]
    assert template_labels[c.LABEL_TEMPLATE_REVISION_HASH] == key
    owner = body["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (c.KIND, "uid-lws", True)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_the_status_written_counts_no_ready_group_yet(
    mode: str, workload: Resource, never: Resource
) -> None:
    _, client = await first_pass(lws_in(mode, replicas=3))
    (call,) = client.calls_of("replace", "leaderworkersets")
    assert call.options["subresource"] == "status"
    status = call.body["status"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (0, 0, 0)
    assert status["observedGeneration"] == 1
    assert status["hpaPodSelector"] == (
        f"{c.LABEL_SET_NAME}=lws,{c.LABEL_WORKER_INDEX}={c.LEADER_WORKER_INDEX}"
    )
    conditions = {cond["type"]: cond["status"] for cond in status["conditions"]}
    assert conditions == {c.CONDITION_PROGRESSING: "True"}


async def test_an_unshared_subdomain_gets_no_shared_service() -> None:
    lws = lws_in(
        c.GROUP_IDENTITY_ORDINAL,
        networkConfig={"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA},
    )
    _, client = await first_pass(lws)
    assert client.calls_of("create", "services") == []


# --- nothing changed, nothing written ------------------------------------------------------


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_pass_over_an_unchanged_cluster_writes_nothing(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode))
    assert await pass_over_stored(reconciler, client) is None
    assert writes(client) == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_template_change_makes_a_new_revision_and_applies_its_key(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode))
    (old,) = [call.body for call in client.calls_of("create", "controllerrevisions")]
    stored = client.stored(LEADERWORKERSETS, "lws", "default")
    assert stored is not None
    worker = stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["image"] = "pause:2"
    stored["metadata"]["generation"] = 2

    await pass_over_stored(reconciler, client)
    (new,) = [call.body for call in client.calls_of("create", "controllerrevisions")]
    old_key = old["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH]
    new_key = new["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH]
    assert new_key != old_key
    (body,) = applied(client, workload)
    assert body["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] == new_key
    assert applied(client, never) == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_restarted_process_applies_its_leader_workload_once_and_nothing_else(
    mode: str, workload: Resource, never: Resource
) -> None:
    """A new process cannot know what an earlier one applied (a member no longer set
    would linger), so its first apply goes out; the revision, the Service and the
    status are read from the cluster and left alone."""
    _, client = await first_pass(lws_in(mode))
    async with seeded_caches(lws_in(mode)) as caches:
        fresh = LeaderWorkerSetReconciler(client, caches)
    assert await pass_over_stored(fresh, client) is None
    assert writes(client) == [("apply", workload.plural, "lws")]
    assert await pass_over_stored(fresh, client) is None
    assert writes(client) == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_leader_workload_changed_by_someone_else_is_applied_again(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode, replicas=2))
    live = client.stored(workload, "lws", "default")
    assert live is not None
    client.put(workload, {**live, "spec": {**live["spec"], "replicas": 5}})
    await pass_over_stored(reconciler, client)
    assert writes(client) == [("apply", workload.plural, "lws")]
    (body,) = applied(client, workload)
    assert body["spec"]["replicas"] == 2


# --- workloads it cannot use, and errors ---------------------------------------------------


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_leader_workload_being_deleted_is_waited_out_without_writes(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode))
    live = client.stored(workload, "lws", "default")
    assert live is not None
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await pass_over_stored(reconciler, client) == Result(requeue_after=DELETING_REQUEUE)
    assert writes(client) == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_leader_workload_controlled_by_another_owner_is_not_taken_over(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode))
    live = client.stored(workload, "lws", "default")
    assert live is not None
    live["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Thing",
            "name": "other",
            "uid": "uid-other",
            "controller": True,
        }
    ]
    with pytest.raises(RuntimeError, match="controlled by Thing other"):
        await pass_over_stored(reconciler, client)
    assert writes(client) == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_predecessors_workload_still_being_deleted_is_waited_out_quietly(
    mode: str, workload: Resource, never: Resource
) -> None:
    """An LWS deleted and made again under the same name: the old leader workload, owned
    by the old LWS's uid, is still being deleted. That is a wait, not an ownership error."""
    reconciler, client = await first_pass(lws_in(mode))
    live = client.stored(workload, "lws", "default")
    assert live is not None
    live["metadata"]["ownerReferences"][0]["uid"] = "uid-of-the-deleted-lws"
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await pass_over_stored(reconciler, client) == Result(requeue_after=DELETING_REQUEUE)
    assert writes(client) == []


async def test_a_deleted_lws_is_left_to_garbage_collection() -> None:
    client = FakeApiClient()
    async with seeded_caches() as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) is None
    assert client.calls == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_terminating_namespace_ends_the_pass_quietly(
    mode: str, workload: Resource, never: Resource
) -> None:
    lws = lws_in(mode)
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    terminating = {
        "reason": "Forbidden",
        "message": "namespace default is being terminated",
        "details": {"causes": [{"reason": "NamespaceTerminating"}]},
    }
    client.fail[("create", CONTROLLER_REVISIONS.plural)] = ApiError(403, terminating)
    async with seeded_caches(lws) as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) is None
    assert applied(client, workload) == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_status_conflict_requeues(mode: str, workload: Resource, never: Resource) -> None:
    lws = lws_in(mode)
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("replace", "leaderworkersets")] = ApiError(409, {"reason": "Conflict"})
    async with seeded_caches(lws) as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) == Result(requeue=True)
