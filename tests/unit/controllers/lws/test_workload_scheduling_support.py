"""Why the LWS reconciler refuses spec.scheduling: the WorkloadSchedulingReady reasons of
upstream #982 for each missing piece (provider, gate, cluster API), and what a refusing
reconciler writes (the condition and an event, once) and does not (the leader workload)."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.lws.workload_scheduling import support_refusal
from leaderworkerset.group.options import ControllerOptions
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.recorded_events import RecordedEvents

JSON = dict[str, Any]
KEY = "default/lws"


@pytest.mark.parametrize(
    ("support", "reason", "says"),
    [
        (SchedulingSupport(), s.REASON_UNSUPPORTED_PROVIDER_CAPABILITY, "schedulerProvider"),
        (
            SchedulingSupport(provider="kubernetes"),
            s.REASON_INVALID_SCHEDULING_CONFIGURATION,
            "WorkloadAwareScheduling",
        ),
        (
            SchedulingSupport(provider="kubernetes", feature_gate=True, api_available=False),
            s.REASON_API_NOT_AVAILABLE,
            "--runtime-config=scheduling.k8s.io/v1beta1=true",
        ),
    ],
    ids=["no-provider", "gate-off", "no-api"],
)
def test_each_missing_piece_blocks_the_leader_workload_with_its_reason(
    support: SchedulingSupport, reason: str, says: str
) -> None:
    outcome = support_refusal(support)
    assert outcome is not None
    assert outcome.blocked and not outcome.ready
    assert outcome.reason == reason
    assert says in outcome.message
    cond = outcome.condition(7, "2026-12-06T00:00:00Z")
    assert (cond["type"], cond["status"], cond["observedGeneration"]) == (
        "WorkloadSchedulingReady",
        "False",
        7,
    )


def test_a_served_api_or_volcano_is_no_refusal() -> None:
    assert support_refusal(SchedulingSupport("kubernetes", True, True)) is None
    assert support_refusal(SchedulingSupport("volcano")) is None


# --- the reconciler's refusal: nothing the scheduler could place piecemeal ------------------

NO_API = SchedulingSupport(provider="kubernetes", feature_gate=True, api_available=False)


def scheduling_condition(client: FakeApiClient) -> JSON:
    stored = client.stored(LEADERWORKERSETS, "lws", "default")
    assert stored is not None
    conditions = (stored.get("status") or {}).get("conditions") or []
    (found,) = [x for x in conditions if x["type"] == s.CONDITION_WORKLOAD_SCHEDULING_READY]
    return dict(found)


@pytest.mark.parametrize(
    ("mode", "workload"),
    [
        pytest.param(c.GROUP_IDENTITY_ORDINAL, STATEFULSETS, id="Ordinal"),
        pytest.param(c.GROUP_IDENTITY_HASH, DEPLOYMENTS, id="Hash"),
    ],
)
async def test_without_the_api_the_leader_workload_waits_and_the_status_says_why_once(
    mode: str, workload: Resource
) -> None:
    """The controller of a cluster without the Workload API (no scheduler step wired, as
    `setup_controllers` leaves it): no leader workload, WorkloadSchedulingReady False
    APINotAvailable, one Warning event; a pass over what it wrote writes nothing more."""
    lws = lws_object(groupIdentity=mode, scheduling={})
    client, events = FakeApiClient(), RecordedEvents()
    client.put(LEADERWORKERSETS, lws)
    options = ControllerOptions(scheduling=NO_API)
    async with seeded_caches(lws) as caches:
        reconciler = LeaderWorkerSetReconciler(client, caches, events, options=options)
        assert reconciler.scheduler is None
        assert await reconciler(KEY) is None
    assert client.calls_of("apply", workload.plural) == []
    assert client.calls_of(None, SERVICES.plural) == []
    assert [(x.verb, x.plural) for x in client.writes()] == [
        ("create", CONTROLLER_REVISIONS.plural),
        ("replace", LEADERWORKERSETS.plural),
    ]
    (status_write,) = client.calls_of("replace", LEADERWORKERSETS.plural)
    assert status_write.options["subresource"] == "status"
    cond = scheduling_condition(client)
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "False",
        s.REASON_API_NOT_AVAILABLE,
        1,
    )
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in cond["message"]
    # The revision is made (and told) as for any LWS; only the workload waits.
    assert events.reasons == [c.EVENT_REASON_CREATING_REVISION, s.REASON_API_NOT_AVAILABLE]
    (warning,) = events.of_type("Warning")
    assert (warning.reason, warning.subject) == (s.REASON_API_NOT_AVAILABLE, "LeaderWorkerSet/lws")
    assert warning.note == cond["message"]

    client.calls.clear()
    async with seeded_caches(*client.objects.values()) as caches:
        reconciler.caches = caches
        assert await reconciler(KEY) is None
    assert client.writes() == []
    assert len(events.told) == 2
    assert scheduling_condition(client) == cond


async def test_a_delegated_lws_is_held_rather_than_given_a_second_workload() -> None:
    """KEP-6089: with the parent's group-template-name annotation the parent owns the
    Workload; this controller makes none and says why."""
    from leaderworkerset.api.leaderworkerset.view import view_of
    from leaderworkerset.controllers.lws.workload_scheduling import WorkloadScheduler
    from tests.toolkit.lws import lws_object

    obj = lws_object("child", scheduling={})
    obj["metadata"]["annotations"] = {s.ANNOTATION_GROUP_TEMPLATE_NAME: "decode"}
    scheduler = WorkloadScheduler(
        client=None,  # type: ignore[arg-type]  # never reached: nothing is written
        caches=None,  # type: ignore[arg-type]
        support=SchedulingSupport("kubernetes", True, True),
    )
    outcome = await scheduler.reconcile(view_of(obj), [])
    assert outcome is not None and outcome.blocked
    assert outcome.reason == s.REASON_PARENT_WORKLOAD_NOT_READY
    assert s.ANNOTATION_GROUP_TEMPLATE_NAME in outcome.message


async def test_a_held_lws_still_answers_each_spec_change_with_its_generation() -> None:
    """While the workload waits, status.observedGeneration follows metadata.generation
    (in the write of the condition), and a resync writes nothing."""
    lws = lws_object(scheduling={})
    client = FakeApiClient()
    client.put(LEADERWORKERSETS, lws)
    options = ControllerOptions(scheduling=NO_API)

    async def one_pass() -> None:
        async with seeded_caches(*client.objects.values()) as caches:
            reconciler = LeaderWorkerSetReconciler(client, caches, options=options)
            assert await reconciler(KEY) is None

    def stored() -> JSON:
        found = client.stored(LEADERWORKERSETS, "lws", "default")
        assert found is not None
        return found

    await one_pass()
    assert stored()["status"]["observedGeneration"] == 1
    edited = stored()
    edited["spec"]["replicas"] = 3
    edited["metadata"]["generation"] = 2
    client.put(LEADERWORKERSETS, edited)
    client.calls.clear()
    await one_pass()
    (write,) = client.writes()
    assert (write.verb, write.options["subresource"]) == ("replace", "status")
    assert stored()["status"]["observedGeneration"] == 2
    assert scheduling_condition(client)["observedGeneration"] == 2
    client.calls.clear()
    await one_pass()
    assert client.writes() == []
