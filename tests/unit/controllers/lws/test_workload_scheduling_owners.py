"""Whose Workload and PodGroups the scheduling step uses: a PodGroup (or Workload) under
a name this LeaderWorkerSet needs but does not control holds the leader workload, with
WorkloadSchedulingReady False naming the object and its owner, and a retry; a PodGroup
it controls is used as it is, even when its spec is not what it would make now."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    LEADERWORKERSETS,
    POD_GROUPS,
    STATEFULSETS,
)
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.lws.workload_scheduling import (
    RETRY_AFTER,
    SchedulingOutcome,
    WorkloadScheduler,
)
from leaderworkerset.controllers.revisions import snapshot_key
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.group.workload_objects import (
    GroupRevision,
    pod_group,
    pod_group_template,
    workload,
)
from tests.toolkit.caches import StaticLister, started
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.recorded_events import RecordedEvents

JSON = dict[str, Any]
SUPPORT = SchedulingSupport("kubernetes", True, True)
REVISION = "rev1"
GROUP_0 = f"lws-0-{REVISION}"
PLANNED = [GroupRevision("0", REVISION), GroupRevision("1", REVISION)]


@contextlib.asynccontextmanager
async def caches_with(*objects: JSON) -> AsyncIterator[LwsCaches]:
    """The controller's caches with the Workload API's informers, holding `objects`
    (the PodGroup cache, as the real one, only those with the set-name label)."""
    async with started(build_caches(StaticLister(objects), workload_api=True)) as caches:
        yield caches


def gang_lws() -> JSON:
    return lws_object(scheduling={})


def our_workload(lws: JSON) -> JSON:
    body = workload(view_of(lws))
    body["metadata"]["ownerReferences"][0]["uid"] = lws["metadata"]["uid"]
    return body


def config_map_owner(name: str = "other", uid: str = "uid-other") -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": True}


def stray_pod_group(name: str, owner: JSON | None, *, labelled: bool = True) -> JSON:
    """A PodGroup someone else made under `name`."""
    meta: JSON = {"name": name, "namespace": "default"}
    if labelled:
        meta["labels"] = {c.LABEL_SET_NAME: "lws"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": POD_GROUPS.api_version,
        "kind": POD_GROUPS.kind,
        "metadata": meta,
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
    }


def scheduler_of(client: FakeApiClient, caches: LwsCaches) -> WorkloadScheduler:
    return WorkloadScheduler(client=client, caches=caches, support=SUPPORT)


def created_pod_groups(client: FakeApiClient) -> list[str]:
    return [call.name for call in client.calls_of("create", POD_GROUPS.plural)]


def assert_held_by(outcome: SchedulingOutcome | None, *says: str) -> None:
    assert outcome is not None
    assert (outcome.ready, outcome.blocked) == (False, True)
    assert outcome.reason == s.REASON_INVALID_SCHEDULING_CONFIGURATION
    assert outcome.requeue_after == RETRY_AFTER
    for text in says:
        assert text in outcome.message, outcome.message


async def test_a_cached_pod_group_of_another_owner_holds_the_leader_workload() -> None:
    lws = gang_lws()
    stray = stray_pod_group(GROUP_0, config_map_owner())
    client = FakeApiClient()
    client.put(POD_GROUPS, stray)
    async with caches_with(lws, our_workload(lws), stray) as caches:
        outcome = await scheduler_of(client, caches).reconcile(view_of(lws), PLANNED)
    assert_held_by(
        outcome,
        f"PodGroup default/{GROUP_0} exists and is not controlled by this LeaderWorkerSet",
        "its controller is ConfigMap other (uid uid-other)",
    )
    # Neither adopted, edited nor deleted, and no second one tried under its name.
    assert GROUP_0 not in created_pod_groups(client)
    assert [x.verb for x in client.writes() if x.name == GROUP_0] == []
    kept = client.stored(POD_GROUPS, GROUP_0, "default")
    assert kept is not None and kept["metadata"]["ownerReferences"] == [config_map_owner()]


async def test_an_unlabelled_stray_the_cache_never_shows_is_read_after_the_create_fails() -> None:
    """The PodGroup cache selects by the set-name label: a stranger's PodGroup without it
    shows only as AlreadyExists, and is then read from the API server and judged."""
    lws = gang_lws()
    client = FakeApiClient()
    client.put(POD_GROUPS, stray_pod_group(GROUP_0, config_map_owner(), labelled=False))
    async with caches_with(lws, our_workload(lws)) as caches:
        assert caches.pod_groups is not None
        assert caches.pod_groups.get("default", GROUP_0) is None
        outcome = await scheduler_of(client, caches).reconcile(view_of(lws), PLANNED)
    assert_held_by(outcome, f"PodGroup default/{GROUP_0}", "ConfigMap other")
    assert created_pod_groups(client) == [GROUP_0]
    assert [x.name for x in client.calls_of("get", POD_GROUPS.plural)] == [GROUP_0]


async def test_a_pod_group_without_a_controller_is_not_adopted() -> None:
    lws = gang_lws()
    stray = stray_pod_group(GROUP_0, None)
    client = FakeApiClient()
    async with caches_with(lws, our_workload(lws), stray) as caches:
        outcome = await scheduler_of(client, caches).reconcile(view_of(lws), PLANNED)
    assert_held_by(outcome, f"PodGroup default/{GROUP_0}", "it has no controller")
    assert client.writes() == []


async def test_a_deleted_predecessors_pod_group_is_waited_for() -> None:
    """An LWS deleted and made again under its name needs the same PodGroup names (the
    revision key does not cover spec.scheduling): the old one's wait for the collector."""
    lws = gang_lws()
    old_owner = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": "lws",
        "uid": "uid-of-the-deleted-one",
        "controller": True,
    }
    stray = stray_pod_group(GROUP_0, old_owner)
    client = FakeApiClient()
    async with caches_with(lws, our_workload(lws), stray) as caches:
        outcome = await scheduler_of(client, caches).reconcile(view_of(lws), PLANNED)
    assert_held_by(
        outcome,
        "its controller is LeaderWorkerSet lws (uid uid-of-the-deleted-one)",
        "a deleted LeaderWorkerSet of this name",
        "garbage collector",
    )
    assert client.writes() == []


async def test_the_pass_after_the_stray_is_gone_makes_the_pod_group() -> None:
    lws = gang_lws()
    client = FakeApiClient()
    client.put(POD_GROUPS, stray_pod_group(GROUP_0, config_map_owner(), labelled=False))
    async with caches_with(lws, our_workload(lws)) as caches:
        scheduler = scheduler_of(client, caches)
        assert_held_by(await scheduler.reconcile(view_of(lws), PLANNED), "ConfigMap other")
        del client.objects[(POD_GROUPS.plural, "default", GROUP_0)]
        client.calls.clear()
        outcome = await scheduler.reconcile(view_of(lws), PLANNED)
    assert outcome is not None and outcome.ready and not outcome.blocked
    assert sorted(created_pod_groups(client)) == [GROUP_0, f"lws-1-{REVISION}"]
    made = client.stored(POD_GROUPS, GROUP_0, "default")
    assert made is not None
    assert made["metadata"]["ownerReferences"][0]["uid"] == lws["metadata"]["uid"]


async def test_a_pod_group_of_this_lws_is_used_whatever_its_spec() -> None:
    """One this LWS controls is not judged by its spec: PodGroup specs are immutable but
    for minCount, and an old revision's groups are made from an older template."""
    lws = gang_lws()
    view = view_of(lws)
    ours = pod_group(view, pod_group_template(view), "0", REVISION)
    ours["metadata"]["ownerReferences"][0]["uid"] = lws["metadata"]["uid"]
    ours["spec"]["schedulingPolicy"] = {"gang": {"minCount": 7}}
    ours["spec"]["priorityClassName"] = "older"
    ours["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    client = FakeApiClient()
    async with caches_with(lws, our_workload(lws), ours) as caches:
        outcome = await scheduler_of(client, caches).reconcile(view, PLANNED)
    assert outcome is not None and outcome.ready
    assert outcome.reason == s.REASON_READY
    assert created_pod_groups(client) == [f"lws-1-{REVISION}"]
    assert [x for x in client.writes() if x.name == GROUP_0] == []


async def test_an_already_exists_for_a_pod_group_of_this_lws_is_fine() -> None:
    """The cache has not shown one this LWS made (a previous process, a lagging watch)."""
    lws = gang_lws()
    view = view_of(lws)
    ours = pod_group(view, pod_group_template(view), "0", REVISION)
    ours["metadata"]["ownerReferences"][0]["uid"] = lws["metadata"]["uid"]
    client = FakeApiClient()
    client.put(POD_GROUPS, ours)
    async with caches_with(lws, our_workload(lws)) as caches:
        outcome = await scheduler_of(client, caches).reconcile(view, PLANNED)
    assert outcome is not None and outcome.ready
    assert sorted(created_pod_groups(client)) == [GROUP_0, f"lws-1-{REVISION}"]


async def test_a_workload_of_another_owner_names_it_and_is_retried() -> None:
    lws = gang_lws()
    theirs = our_workload(lws)
    theirs["metadata"]["ownerReferences"] = [config_map_owner("keeper", "uid-keeper")]
    client = FakeApiClient()
    async with caches_with(lws, theirs) as caches:
        outcome = await scheduler_of(client, caches).reconcile(view_of(lws), PLANNED)
    assert_held_by(
        outcome,
        "Workload default/lws exists and is not controlled by this LeaderWorkerSet",
        "its controller is ConfigMap keeper (uid uid-keeper)",
    )
    assert client.writes() == []


# --- the reconciler: the leader workload waits, the status says why -------------------------


async def test_the_reconciler_makes_no_leader_statefulset_while_a_stray_holds_group_0() -> None:
    lws = gang_lws()
    group_0 = f"lws-0-{snapshot_key(lws)}"
    stray = stray_pod_group(group_0, config_map_owner())
    client, events = FakeApiClient(), RecordedEvents()
    client.put(LEADERWORKERSETS, lws)
    options = ControllerOptions(scheduling=SUPPORT)
    async with caches_with(lws, our_workload(lws), stray) as caches:
        reconciler = LeaderWorkerSetReconciler(
            client, caches, events, options=options, scheduler=scheduler_of(client, caches)
        )
        result = await reconciler("default/lws")
    assert result is not None and result.requeue_after == RETRY_AFTER
    assert client.calls_of("apply", STATEFULSETS.plural) == []
    assert group_0 not in created_pod_groups(client)
    assert [x.plural for x in client.writes()] == [
        CONTROLLER_REVISIONS.plural,
        LEADERWORKERSETS.plural,
    ]
    stored = client.stored(LEADERWORKERSETS, "lws", "default")
    assert stored is not None
    (cond,) = [
        x
        for x in stored["status"]["conditions"]
        if x["type"] == s.CONDITION_WORKLOAD_SCHEDULING_READY
    ]
    assert (cond["status"], cond["reason"]) == ("False", s.REASON_INVALID_SCHEDULING_CONFIGURATION)
    assert f"PodGroup default/{group_0}" in cond["message"]
    assert "ConfigMap other" in cond["message"]
    assert s.REASON_INVALID_SCHEDULING_CONFIGURATION in events.reasons
