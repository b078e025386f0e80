"""The LeaderWorkerSet reconciler's decisions, against the fake API client and caches
seeded with what the cluster holds: which leader workload each group identity gets,
the revision and shared Service it makes, the status it writes, that a pass over an
unchanged cluster writes nothing, and what it does with workloads it cannot use."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.reconcile_errors import ReconcileError
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from leaderworkerset.controllers import revisions as rev
from leaderworkerset.controllers.held import HeldReplacements
from leaderworkerset.controllers.lws import reconciler as reconciler_module
from leaderworkerset.controllers.lws.reconciler import DELETING_REQUEUE, LeaderWorkerSetReconciler
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.controller import Result
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import leader_pod
from tests.toolkit.recorded_events import RecordedEvents
from tests.toolkit.statefulsets import worker_sts

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


async def first_pass(
    lws: JSON, events: RecordedEvents | None = None
) -> tuple[LeaderWorkerSetReconciler, FakeApiClient]:
    """A reconciler that has reconciled `lws` once on an empty cluster."""
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    async with seeded_caches(lws) as caches:
        reconciler = LeaderWorkerSetReconciler(client, caches, events)
        assert await reconciler(KEY) is None
    return reconciler, client


async def pass_over_stored(
    reconciler: LeaderWorkerSetReconciler, client: FakeApiClient, *extra: JSON
) -> Result | None:
    """Another pass, the caches now showing everything the client stores (and `extra`,
    objects other controllers made: pods, worker StatefulSets)."""
    client.calls.clear()
    async with seeded_caches(*client.objects.values(), *extra) as caches:
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
    with pytest.raises(ReconcileError, match="controlled by Thing other"):
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


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_status_write_to_a_deleted_lws_ends_quietly(
    mode: str, workload: Resource, never: Resource
) -> None:
    """Deleted between the cache's read and the write: no error (which the controller
    would log as a failed reconcile); its deletion's event ends the matter."""
    lws = lws_in(mode)
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("replace", "leaderworkersets")] = ApiError(404, {"reason": "NotFound"})
    async with seeded_caches(lws) as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) == Result(requeue=True)


# --- events of the leader workload ---------------------------------------------------------

LEADER_WORD = {c.GROUP_IDENTITY_ORDINAL: "statefulset", c.GROUP_IDENTITY_HASH: "deployment"}


def revision_of(client: FakeApiClient, number: int = 1) -> JSON:
    """The stored ControllerRevision with this revision number."""
    (revision,) = [
        obj
        for (plural, _, _), obj in client.objects.items()
        if plural == "controllerrevisions" and obj["revision"] == number
    ]
    return revision


def key_of(revision: JSON) -> str:
    return str(revision["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH])


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_new_lws_is_told_of_its_revision_and_its_leader_workload(
    mode: str, workload: Resource, never: Resource
) -> None:
    events = RecordedEvents()
    _, client = await first_pass(lws_in(mode), events)
    revision = revision_of(client)
    (creating,) = events.of(c.EVENT_REASON_CREATING_REVISION)
    assert creating.note == (
        f"Creating revision with key {key_of(revision)} for a newly created LeaderWorkerSet"
    )
    (created,) = [e for e in events.told if e.note.startswith("Created leader")]
    assert (created.type, created.reason, created.action) == (
        "Normal",
        c.REASON_GROUPS_PROGRESSING,
        "Create",
    )
    assert created.note == f"Created leader {LEADER_WORD[mode]} lws"
    assert created.related is not None
    assert (created.related["kind"], created.related["name"]) == (
        "ControllerRevision",
        revision["metadata"]["name"],
    )
    for event in events.told:
        assert event.about == (c.KIND, "lws")


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_the_leader_workload_is_announced_once_even_before_the_cache_shows_it(
    mode: str, workload: Resource, never: Resource
) -> None:
    """A second pass whose caches still show nothing this process wrote: the revision
    is found by name and the workload applied again, neither announced a second time
    (the status, read as never written, is)."""
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    first = revision_of(client)
    events.told.clear()
    client.calls.clear()
    async with seeded_caches(lws_in(mode)) as stale:
        reconciler.caches = stale
        assert await reconciler(KEY) is None
    assert events.reasons == [c.REASON_GROUPS_PROGRESSING]
    assert not events.told[0].note.startswith("Created leader")
    assert [(call.verb, call.plural) for call in client.calls[:2]] == [
        ("create", "controllerrevisions"),
        ("get", "controllerrevisions"),
    ]
    (body,) = applied(client, workload)
    assert body["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] == key_of(first)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_predecessors_revision_in_the_way_is_deleted_for_its_own(
    mode: str, workload: Resource, never: Resource
) -> None:
    """A LeaderWorkerSet deleted and made again under its name: the old one's revision
    (same spec, so same name) awaits the collector. The new one must not run on it (its
    groups' pods find only revisions it owns), so it goes, by UID, and a new one is made."""
    old = lws_in(mode)
    old["metadata"]["uid"] = "uid-predecessor"
    _, client = await first_pass(old)
    theirs = revision_of(client)
    theirs = client.put(
        CONTROLLER_REVISIONS, {**theirs, "metadata": {**theirs["metadata"], "uid": "uid-rev"}}
    )
    client.calls.clear()
    async with seeded_caches(lws_in(mode)) as caches:
        reconciler = LeaderWorkerSetReconciler(client, caches)
        assert await reconciler(KEY) is None
    (deleted,) = client.calls_of("delete", "controllerrevisions")
    assert deleted.name == theirs["metadata"]["name"]
    assert deleted.options["preconditions"] == {
        "uid": "uid-rev",
        "resourceVersion": theirs["metadata"]["resourceVersion"],
    }
    ours = revision_of(client)
    assert ours["metadata"]["ownerReferences"][0]["uid"] == "uid-lws"
    (body,) = applied(client, workload)
    assert body["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] == key_of(ours)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_later_pass_over_the_created_workload_announces_nothing(
    mode: str, workload: Resource, never: Resource
) -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    events.told.clear()
    fresh = LeaderWorkerSetReconciler(client, reconciler.caches, events)
    await pass_over_stored(fresh, client)
    assert applied(client, workload) != []  # a new process applies once...
    assert events.told == []  # ...but did not create the workload


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_refused_leader_workload_create_is_told_and_raised(
    mode: str, workload: Resource, never: Resource
) -> None:
    lws = lws_in(mode)
    client, events = FakeApiClient(), RecordedEvents()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("apply", workload.plural)] = ApiError(422, {"message": "spec is invalid"})
    async with seeded_caches(lws) as caches:
        with pytest.raises(ApiError):
            await LeaderWorkerSetReconciler(client, caches, events)(KEY)
    (failed,) = events.of(c.EVENT_REASON_FAILED_CREATE)
    assert (failed.type, failed.action) == ("Warning", "Create")
    assert failed.note == f"Failed to create leader {LEADER_WORD[mode]} lws: spec is invalid"
    assert failed.about == (c.KIND, "lws")
    assert client.calls_of("replace", "leaderworkersets") == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_refused_leader_workload_update_is_told_and_raised(
    mode: str, workload: Resource, never: Resource
) -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode, replicas=2), events)
    stored = client.stored(LEADERWORKERSETS, "lws", "default")
    assert stored is not None
    stored["spec"]["replicas"] = 4
    events.told.clear()
    client.fail[("apply", workload.plural)] = ApiError(422, {"message": "no"})
    with pytest.raises(ApiError):
        await pass_over_stored(reconciler, client)
    (failed,) = events.told
    assert (failed.type, failed.reason, failed.action) == (
        "Warning",
        c.EVENT_REASON_FAILED_UPDATE,
        "Update",
    )
    assert failed.note == f"Failed to update leader {LEADER_WORD[mode]} lws: no"
    assert failed.about == (c.KIND, "lws")


# --- the groups the status counts ----------------------------------------------------------

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def status_written(client: FakeApiClient) -> JSON:
    (call,) = client.calls_of("replace", "leaderworkersets")
    status: JSON = call.body["status"]
    return status


def groups(key: str, count: int, *, ready: bool = True) -> list[JSON]:
    """The leader pods and worker StatefulSets of groups 0..count-1 at revision `key`."""
    made: list[JSON] = []
    for index in range(count):
        made += [leader_pod("lws", index, key, ready), worker_sts("lws", index, key, 2, ready)]
    return made


def as_the_statefulset_controller_left_it(client: FakeApiClient, **spec: Any) -> JSON:
    """The applied leader StatefulSet with its status (and `spec` members changed)."""
    sts = client.stored(STATEFULSETS, "lws", "default")
    assert sts is not None
    sts["spec"].update(spec)
    sts["status"] = {"replicas": sts["spec"]["replicas"]}
    return sts


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_ready_groups_of_the_current_revision_make_the_lws_available(
    mode: str, workload: Resource, never: Resource
) -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode, replicas=2), events)
    key = key_of(revision_of(client))
    if mode == c.GROUP_IDENTITY_ORDINAL:
        as_the_statefulset_controller_left_it(client)
    events.told.clear()
    # Another LWS's groups and a StatefulSet of this LWS that is no group are not counted.
    others = [leader_pod("other", 0, key), worker_sts("other", 0, key)]
    await pass_over_stored(reconciler, client, *groups(key, 2), *others)
    status = status_written(client)
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (2, 2, 2)
    conditions = {cond["type"]: cond["status"] for cond in status["conditions"]}
    assert conditions == {c.CONDITION_AVAILABLE: "True", c.CONDITION_PROGRESSING: "False"}
    for cond in status["conditions"]:
        assert TIMESTAMP.match(cond["lastTransitionTime"]), cond
    (changed,) = events.told
    assert (changed.reason, changed.action) == (c.REASON_ALL_GROUPS_READY, "Update")
    assert changed.note.endswith("with 2 groups ready of total 2 groups")
    assert changed.about == (c.KIND, "lws")


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_groups_of_an_older_revision_are_ready_but_not_updated(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode, replicas=2))
    if mode == c.GROUP_IDENTITY_ORDINAL:
        as_the_statefulset_controller_left_it(client)
    await pass_over_stored(reconciler, client, *groups("older", 2))
    status = status_written(client)
    assert (status["readyReplicas"], status["updatedReplicas"]) == (2, 0)
    assert {cond["type"] for cond in status["conditions"]} >= {c.CONDITION_UPDATE_IN_PROGRESS}


async def test_ordinal_worker_statefulsets_are_the_ones_with_a_group_index() -> None:
    """A group is counted only with its worker StatefulSet: the leader StatefulSet, the
    one StatefulSet without a group index, is not a group's."""
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL, replicas=2))
    key = key_of(revision_of(client))
    as_the_statefulset_controller_left_it(client)
    pods = [leader_pod("lws", 0, key), leader_pod("lws", 1, key)]
    await pass_over_stored(reconciler, client, *pods, worker_sts("lws", 0, key))
    status = status_written(client)
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (2, 1, 1)


async def test_an_ordinal_status_counts_the_leader_statefulsets_replicas() -> None:
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL, replicas=2))
    key = key_of(revision_of(client))
    sts = as_the_statefulset_controller_left_it(client)
    sts["status"]["replicas"] = 3  # a surge replica
    await pass_over_stored(reconciler, client, *groups(key, 2))
    assert status_written(client)["replicas"] == 3


async def test_a_leader_without_a_usable_group_index_is_left_out_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL, replicas=2))
    key = key_of(revision_of(client))
    as_the_statefulset_controller_left_it(client)
    odd = leader_pod("lws", "x", key, name="lws-odd")
    with caplog.at_level(logging.WARNING, logger=reconciler_module.__name__):
        await pass_over_stored(reconciler, client, *groups(key, 1), odd)
    assert status_written(client)["readyReplicas"] == 1
    (warning,) = [r for r in caplog.records if r.name == reconciler_module.__name__]
    assert warning.getMessage() == "leader pod has no usable group index; left out of status"
    assert (warning.__dict__["lws"], warning.__dict__["pod"]) == ("default/lws", "lws-odd")


async def test_hash_groups_count_their_leaders_readiness_and_revision() -> None:
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_HASH, replicas=3))
    key = key_of(revision_of(client))
    leaders = [
        leader_pod("lws", 0, key, name="lws-a"),
        leader_pod("lws", 1, key, ready=False, name="lws-b"),
        leader_pod("lws", 2, "older", name="lws-c"),
    ]
    await pass_over_stored(reconciler, client, *leaders)
    status = status_written(client)
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (3, 2, 2)


async def test_a_held_replacement_is_reported_in_the_hash_status() -> None:
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_HASH, replicas=1))
    reconciler.held.publish(KEY, HeldReplacements(("lws-new",), ("0123456789abcdef",)))
    await pass_over_stored(reconciler, client)
    status = status_written(client)
    (held,) = [cond for cond in status["conditions"] if cond["type"] == "GroupReplacementHeld"]
    assert held["status"] == "True"
    assert held["message"].endswith("lws-new waits for group 01234567")
    assert TIMESTAMP.match(held["lastTransitionTime"])


async def test_another_lws_held_replacements_are_not_this_ones() -> None:
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_HASH, replicas=1))
    reconciler.held.publish("default/other", HeldReplacements(("x",), ("y",)))
    assert await pass_over_stored(reconciler, client) is None
    assert writes(client) == []


# --- the observations kept between passes, and forgetting a deleted LWS --------------------


def group_gauge(registry: CollectorRegistry, mode: str, state: str) -> float | None:
    labels = {"namespace": "default", "leaderworkerset": "lws", "group_identity": mode}
    return registry.get_sample_value("lws_groups", {**labels, "state": state})


@pytest.mark.parametrize("gone", ["deleted", "being deleted"])
@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_what_is_kept_of_an_lws_goes_with_it(
    mode: str, workload: Resource, never: Resource, gone: str
) -> None:
    reconciler, client = await first_pass(lws_in(mode, replicas=2))
    # The reconciler's own group metrics: nothing another test counted.
    metrics = reconciler.group_metrics.registry
    key = key_of(revision_of(client))
    if mode == c.GROUP_IDENTITY_ORDINAL:
        as_the_statefulset_controller_left_it(client)
    await pass_over_stored(reconciler, client, *groups(key, 2))
    # The group observations of the last pass, per LWS, and its group gauges.
    assert set(reconciler._observations) == {KEY}
    assert set(reconciler._observations[KEY]) == {"lws-0", "lws-1"}
    assert group_gauge(metrics, mode, "ready") == 2

    if gone == "deleted":
        client.objects.pop(("leaderworkersets", "default", "lws"))
    else:
        stored = client.stored(LEADERWORKERSETS, "lws", "default")
        assert stored is not None
        stored["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await pass_over_stored(reconciler, client, *groups(key, 2)) is None
    assert client.calls == []
    assert reconciler._observations == {}
    assert group_gauge(metrics, mode, "ready") is None


# --- revisions: adopting a workload, updates, a cache that lags ------------------------------


def change_template(client: FakeApiClient) -> JSON:
    """A new worker image in the stored LWS (generation 2); the LWS as stored."""
    stored = client.stored(LEADERWORKERSETS, "lws", "default")
    assert stored is not None
    stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = (
        "pause:2"
    )
    stored["metadata"]["generation"] = 2
    return stored


def workload_at(client: FakeApiClient, workload: Resource, key: str) -> JSON:
    """The stored leader workload, relabelled as running revision `key` (a copy)."""
    live = client.stored(workload, "lws", "default")
    assert live is not None
    relabelled = copy.deepcopy(live)
    relabelled["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = key
    relabelled["spec"]["template"]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = key
    return relabelled


def applied_key(client: FakeApiClient, workload: Resource) -> str:
    (body,) = applied(client, workload)
    return str(body["spec"]["template"]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH])


async def pass_over(
    reconciler: LeaderWorkerSetReconciler, client: FakeApiClient, *cached: JSON
) -> Result | None:
    """Another pass, the caches showing only `cached`: they lag behind the server."""
    client.calls.clear()
    async with seeded_caches(*cached) as caches:
        reconciler.caches = caches
        return await reconciler(KEY)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_adopted_workloads_revision_is_asked_of_the_server_before_making_it(
    mode: str, workload: Resource, never: Resource
) -> None:
    """A leader workload at a revision the cache does not hold: the server has it (the
    cache lags), so it is read and kept, not written again under that key."""
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    lws = client.stored(LEADERWORKERSETS, "lws", "default")
    assert lws is not None
    client.put(CONTROLLER_REVISIONS, rev.new_revision(lws, 2, key_override="adopted"))
    events.told.clear()
    await pass_over(reconciler, client, lws, workload_at(client, workload, "adopted"))

    (listed,) = client.calls_of("list", "controllerrevisions")
    assert listed.namespace == "default"
    assert listed.options["label_selector"] == (
        f"{c.LABEL_SET_NAME}=lws,{c.LABEL_TEMPLATE_REVISION_HASH}=adopted"
    )
    assert client.calls_of("create", "controllerrevisions") == []
    assert events.told == []
    assert applied_key(client, workload) == "adopted"


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_adopted_workloads_missing_revision_is_made_under_its_key(
    mode: str, workload: Resource, never: Resource
) -> None:
    """Neither the cache nor the server has the workload's revision: it is made from
    the spec under the workload's key (the name still carries the content hash)."""
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    lws = client.stored(LEADERWORKERSETS, "lws", "default")
    assert lws is not None
    gone = revision_of(client)
    client.objects.pop(("controllerrevisions", "default", gone["metadata"]["name"]))
    events.told.clear()
    await pass_over(reconciler, client, lws, workload_at(client, workload, "adopted"))

    assert len(client.calls_of("list", "controllerrevisions")) == 1
    (created,) = client.calls_of("create", "controllerrevisions")
    assert key_of(created.body) == "adopted"
    (told_,) = events.told
    assert told_.reason == c.EVENT_REASON_CREATING_REVISION
    assert told_.note == "Creating missing revision with key adopted for existing LeaderWorkerSet"
    assert told_.about == (c.KIND, "lws")
    assert applied_key(client, workload) == "adopted"


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_update_is_told_with_its_new_revision(
    mode: str, workload: Resource, never: Resource
) -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    change_template(client)
    events.told.clear()
    await pass_over_stored(reconciler, client)
    new = revision_of(client, 2)
    (creating,) = events.of(c.EVENT_REASON_CREATING_REVISION)
    assert creating.note == f"Creating revision with key {key_of(new)} for updated LWS"
    assert creating.related is not None
    assert (creating.related["kind"], creating.related["name"]) == (
        "ControllerRevision",
        new["metadata"]["name"],
    )
    assert creating.about == (c.KIND, "lws")
    assert applied_key(client, workload) == key_of(new)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_updates_revision_already_made_is_reused_while_the_workload_lags(
    mode: str, workload: Resource, never: Resource
) -> None:
    """The cache shows the new revision but the leader workload of before the update."""
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    before = copy.deepcopy(client.stored(workload, "lws", "default"))
    lws = change_template(client)
    await pass_over_stored(reconciler, client)
    old, new = revision_of(client, 1), revision_of(client, 2)
    events.told.clear()
    assert before is not None
    await pass_over(reconciler, client, lws, old, new, before)
    assert client.calls_of("create", "controllerrevisions") == []
    assert events.of(c.EVENT_REASON_CREATING_REVISION) == []
    assert all(
        body["spec"]["template"]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH]
        == key_of(new)
        for body in applied(client, workload)
    )


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_updates_revision_made_by_an_earlier_pass_is_found_by_name(
    mode: str, workload: Resource, never: Resource
) -> None:
    """The cache shows neither the new revision nor the workload moved to it: creating
    the revision again collides by name, and the stored one is used, not announced."""
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(mode), events)
    before = copy.deepcopy(client.stored(workload, "lws", "default"))
    lws = change_template(client)
    await pass_over_stored(reconciler, client)
    old, new = revision_of(client, 1), revision_of(client, 2)
    events.told.clear()
    assert before is not None
    await pass_over(reconciler, client, lws, old, before)
    (create,) = client.calls_of("create", "controllerrevisions")
    assert create.name == new["metadata"]["name"]
    (get,) = client.calls_of("get", "controllerrevisions")
    assert (get.name, get.namespace) == (new["metadata"]["name"], "default")
    assert events.of(c.EVENT_REASON_CREATING_REVISION) == []
    assert applied_key(client, workload) == key_of(new)


async def test_a_revision_the_server_refuses_fails_the_pass() -> None:
    lws = lws_in(c.GROUP_IDENTITY_ORDINAL)
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("create", "controllerrevisions")] = ApiError(500, {"message": "etcd"})
    async with seeded_caches(lws) as caches:
        with pytest.raises(ApiError, match="etcd"):
            await LeaderWorkerSetReconciler(client, caches)(KEY)
    assert writes(client) == [("create", "controllerrevisions", client.calls[0].name)]


# --- the Ordinal rollout -------------------------------------------------------------------


async def test_an_ordinal_template_change_starts_the_rollout_at_the_top() -> None:
    """Every group is outdated: the partition goes to the replicas and comes down as
    groups are updated (rolling_update.py)."""
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL, replicas=3))
    key = key_of(revision_of(client))
    as_the_statefulset_controller_left_it(client)
    change_template(client)
    await pass_over_stored(reconciler, client, *groups(key, 3))
    (body,) = applied(client, STATEFULSETS)
    assert body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    assert body["spec"]["replicas"] == 3


async def test_updated_groups_move_the_partition_down_and_say_so() -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL, replicas=3), events)
    key = key_of(revision_of(client))
    sts = as_the_statefulset_controller_left_it(client)
    sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 2
    client.put(STATEFULSETS, sts)
    events.told.clear()
    await pass_over_stored(reconciler, client, *groups(key, 3))
    (body,) = applied(client, STATEFULSETS)
    assert body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
    assert body["spec"]["replicas"] == 3
    (moved,) = events.of(c.REASON_GROUPS_UPDATING)
    assert moved.note == "Updating replicas 0 to 1 (inclusive)"
    assert moved.about == (c.KIND, "lws")


async def test_outdated_groups_keep_the_partition_where_it_is() -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL, replicas=3), events)
    sts = as_the_statefulset_controller_left_it(client)
    sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 2
    client.put(STATEFULSETS, sts)
    events.told.clear()
    await pass_over_stored(reconciler, client, *groups("older", 3))
    (body,) = applied(client, STATEFULSETS)
    assert body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert [e for e in events.told if e.note.startswith(("Updating", "Pausing"))] == []


# --- the shared Service --------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_the_shared_service_selects_every_pod_of_the_lws(
    mode: str, workload: Resource, never: Resource
) -> None:
    _, client = await first_pass(lws_in(mode))
    (create,) = client.calls_of("create", "services")
    service = create.body
    assert (service["metadata"]["name"], service["metadata"]["namespace"]) == ("lws", "default")
    assert service["spec"]["selector"] == {c.LABEL_SET_NAME: "lws"}
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["ownerReferences"][0]["uid"] == "uid-lws"


async def test_a_shared_service_the_cache_does_not_show_yet_is_left_alone() -> None:
    events = RecordedEvents()
    reconciler, client = await first_pass(lws_in(c.GROUP_IDENTITY_ORDINAL), events)
    lws = client.stored(LEADERWORKERSETS, "lws", "default")
    sts = client.stored(STATEFULSETS, "lws", "default")
    assert lws is not None and sts is not None
    events.told.clear()
    assert await pass_over(reconciler, client, lws, sts, revision_of(client)) is None
    assert len(client.calls_of("create", "services")) == 1  # answered AlreadyExists
    assert events.told == []


async def test_a_predecessors_shared_service_is_replaced_at_once() -> None:
    """Made again under its name, the LeaderWorkerSet finds the old one's Service in its
    cache: it goes (by UID) and the new one's is made, not a collector's pass later.
    A Service of that name that no LeaderWorkerSet controls is left alone."""
    old = lws_in(c.GROUP_IDENTITY_ORDINAL)
    old["metadata"]["uid"] = "uid-predecessor"
    _, client = await first_pass(old)
    theirs = client.stored(SERVICES, "lws", "default")
    assert theirs is not None
    theirs = client.put(SERVICES, {**theirs, "metadata": {**theirs["metadata"], "uid": "uid-svc"}})
    client.calls.clear()
    async with seeded_caches(lws_in(c.GROUP_IDENTITY_ORDINAL), theirs) as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) is None
    (deleted,) = client.calls_of("delete", "services")
    assert deleted.options["preconditions"] == {
        "uid": "uid-svc",
        "resourceVersion": theirs["metadata"]["resourceVersion"],
    }
    ours = client.stored(SERVICES, "lws", "default")
    assert ours is not None and ours["metadata"]["ownerReferences"][0]["uid"] == "uid-lws"

    # One made after this LeaderWorkerSet is a later one's: this view is stale.
    later = {
        **theirs,
        "metadata": {**theirs["metadata"], "creationTimestamp": "2099-01-01T00:00:00Z"},
    }
    client.put(SERVICES, later)
    client.calls.clear()
    made = lws_in(c.GROUP_IDENTITY_ORDINAL)
    made["metadata"]["creationTimestamp"] = "2026-12-06T10:00:00Z"
    async with seeded_caches(made, later) as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) is None
    assert client.calls_of("delete", "services") == []

    users = {**ours, "metadata": {**ours["metadata"], "ownerReferences": []}}
    client.put(SERVICES, users)
    client.calls.clear()
    async with seeded_caches(lws_in(c.GROUP_IDENTITY_ORDINAL), users) as caches:
        assert await LeaderWorkerSetReconciler(client, caches)(KEY) is None
    assert client.calls_of("delete", "services") == []
    assert client.calls_of("create", "services") == []


async def test_a_refused_shared_service_is_told_and_raised() -> None:
    lws = lws_in(c.GROUP_IDENTITY_ORDINAL)
    client, events = FakeApiClient(), RecordedEvents()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("create", "services")] = ApiError(403, {"message": "quota exceeded"})
    async with seeded_caches(lws) as caches:
        with pytest.raises(ApiError, match="quota"):
            await LeaderWorkerSetReconciler(client, caches, events)(KEY)
    (failed,) = events.of(c.EVENT_REASON_FAILED_CREATE)
    assert failed.note == "Failed to create headless service for error: quota exceeded"
    assert failed.about == (c.KIND, "lws")
    assert client.calls_of("replace", "leaderworkersets") == []


# --- the status write and old revisions ----------------------------------------------------


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_status_conflict_is_not_announced(
    mode: str, workload: Resource, never: Resource
) -> None:
    lws = lws_in(mode)
    client, events = FakeApiClient(), RecordedEvents()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("replace", "leaderworkersets")] = ApiError(409, {"reason": "Conflict"})
    async with seeded_caches(lws) as caches:
        assert await LeaderWorkerSetReconciler(client, caches, events)(KEY) == Result(requeue=True)
    assert [e.note for e in events.told if e.action == "Update"] == []


async def test_a_status_write_the_server_refuses_fails_the_pass() -> None:
    lws = lws_in(c.GROUP_IDENTITY_HASH)
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("replace", "leaderworkersets")] = ApiError(500, {"message": "etcd"})
    async with seeded_caches(lws) as caches:
        with pytest.raises(ApiError, match="etcd"):
            await LeaderWorkerSetReconciler(client, caches)(KEY)


async def rolled_out(
    mode: str, workload: Resource
) -> tuple[LeaderWorkerSetReconciler, FakeApiClient, list[JSON]]:
    """An LWS of 2 groups updated to a second revision; the groups at that revision,
    ready, for the caller to show to the next pass."""
    reconciler, client = await first_pass(lws_in(mode, replicas=2))
    change_template(client)
    await pass_over_stored(reconciler, client)
    key = key_of(revision_of(client, 2))
    if mode == c.GROUP_IDENTITY_ORDINAL:
        sts = as_the_statefulset_controller_left_it(client)
        sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 0
        client.put(STATEFULSETS, sts)
    return reconciler, client, groups(key, 2)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_finished_rollout_deletes_the_old_revisions(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client, updated = await rolled_out(mode, workload)
    old = revision_of(client, 1)
    assert await pass_over_stored(reconciler, client, *updated) is None
    (delete,) = client.calls_of("delete", "controllerrevisions")
    assert (delete.name, delete.namespace) == (old["metadata"]["name"], "default")


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_unfinished_rollout_keeps_the_old_revisions(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client, _ = await rolled_out(mode, workload)
    await pass_over_stored(reconciler, client, *groups(key_of(revision_of(client, 1)), 2))
    assert client.calls_of("delete", "controllerrevisions") == []


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_old_revision_already_gone_is_not_an_error(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client, updated = await rolled_out(mode, workload)
    client.fail[("delete", "controllerrevisions")] = ApiError(404, {"reason": "NotFound"})
    assert await pass_over_stored(reconciler, client, *updated) is None
    assert len(client.calls_of("delete", "controllerrevisions")) == 1


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_old_revision_the_server_will_not_delete_fails_the_pass(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client, updated = await rolled_out(mode, workload)
    client.fail[("delete", "controllerrevisions")] = ApiError(500, {"message": "etcd"})
    with pytest.raises(ApiError, match="etcd"):
        await pass_over_stored(reconciler, client, *updated)


async def test_an_api_error_other_than_a_terminating_namespace_fails_the_pass() -> None:
    lws = lws_in(c.GROUP_IDENTITY_ORDINAL)
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    client.fail[("create", "controllerrevisions")] = ApiError(
        403, {"reason": "Forbidden", "message": "not allowed"}
    )
    async with seeded_caches(lws) as caches:
        with pytest.raises(ApiError, match="not allowed"):
            await LeaderWorkerSetReconciler(client, caches)(KEY)


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_the_group_gauges_count_outdated_unready_groups_as_updating(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode, replicas=2))
    metrics = reconciler.group_metrics.registry
    if mode == c.GROUP_IDENTITY_ORDINAL:
        as_the_statefulset_controller_left_it(client)
    await pass_over_stored(reconciler, client, *groups("older", 2, ready=False))
    assert group_gauge(metrics, mode, "updating") == 2
    assert group_gauge(metrics, mode, "not_ready") == 0


# --- more of what the server sees ----------------------------------------------------------


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_the_leader_workload_is_applied_as_this_controllers_field_manager(
    mode: str, workload: Resource, never: Resource
) -> None:
    _, client = await first_pass(lws_in(mode))
    (call,) = client.calls_of("apply", workload.plural)
    assert call.options == {"field_manager": c.FIELD_MANAGER, "force": True}


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_a_workload_the_server_normalised_is_not_applied_again(
    mode: str, workload: Resource, never: Resource
) -> None:
    """The server may keep a member in another spelling than the one applied; the object
    at the version our apply was answered with is ours, whatever it looks like."""
    lws = lws_in(mode, pod_spec={"terminationGracePeriodSeconds": 30})
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)

    async def normalise(call: Call) -> JSON | None:
        if call.verb != "apply":
            return None
        kept = copy.deepcopy(call.body)
        kept["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "30"
        return client.put(workload, kept)

    client.on_call = normalise
    async with seeded_caches(lws) as caches:
        reconciler = LeaderWorkerSetReconciler(client, caches)
        assert await reconciler(KEY) is None
    await pass_over_stored(reconciler, client)
    assert applied(client, workload) == []


async def test_a_workload_of_another_owner_is_named_in_the_error() -> None:
    lws = lws_in(c.GROUP_IDENTITY_ORDINAL)
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "lws",
            "namespace": "default",
            "labels": {c.LABEL_SET_NAME: "lws"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "u", "controller": True}
            ],
        },
    }
    async with seeded_caches(lws, sts) as caches:
        with pytest.raises(ReconcileError) as raised:
            await LeaderWorkerSetReconciler(FakeApiClient(), caches)(KEY)
    assert str(raised.value) == (
        "StatefulSet default/lws exists and is controlled by Thing t, not by this LeaderWorkerSet"
    )


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_update_right_after_adopting_a_stored_revision_is_numbered_after_it(
    mode: str, workload: Resource, never: Resource
) -> None:
    reconciler, client = await first_pass(lws_in(mode))
    lws = client.stored(LEADERWORKERSETS, "lws", "default")
    assert lws is not None
    client.put(CONTROLLER_REVISIONS, rev.new_revision(lws, 5, key_override="adopted"))
    changed = change_template(client)
    await pass_over(reconciler, client, changed, workload_at(client, workload, "adopted"))
    (created,) = client.calls_of("create", "controllerrevisions")
    assert created.body["revision"] == 6


@pytest.mark.parametrize(("mode", "workload", "never"), MODES)
async def test_an_updates_revision_written_by_another_serializer_is_reused(
    mode: str, workload: Resource, never: Resource
) -> None:
    """A revision under the update's key whose data differs only in how it is
    serialized (Go writes null and empty members the API server omits) is that
    update's revision, not a reason to make another."""
    reconciler, client = await first_pass(lws_in(mode))
    old = revision_of(client)
    before = copy.deepcopy(client.stored(workload, "lws", "default"))
    assert before is not None
    changed = change_template(client)
    go_written = rev.new_revision(changed, 2)
    template = go_written["data"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["metadata"] = {"creationTimestamp": None}
    template["spec"]["containers"][0]["resources"] = {}
    assert not rev.equal(go_written, rev.new_revision(changed, 2))
    client.put(CONTROLLER_REVISIONS, go_written)
    await pass_over(reconciler, client, changed, old, go_written, before)
    assert client.calls_of("create", "controllerrevisions") == []
    assert applied_key(client, workload) == key_of(go_written)
