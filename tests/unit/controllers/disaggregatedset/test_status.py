"""The DisaggregatedSet's status.observedGeneration: the generation of the spec the pass
acted on, in the same status write as the rest, and a write of its own when only the
generation moved (a spec change that changes no count and no condition)."""

from __future__ import annotations

import copy

from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.disaggregatedset.reconciler import DisaggregatedSetReconciler
from leaderworkerset.controllers.disaggregatedset.status import RoleCounts, set_status
from tests.toolkit.caches import seeded_ds_caches
from tests.toolkit.disaggregatedset import cached_role, ds_object, revision_of_object
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import ds_owned_lws

NOW = "2026-12-06T10:00:00Z"
LATER = "2026-12-06T10:05:00Z"


def _typed(doc: JSON) -> DisaggregatedSet:
    ds, errors = DisaggregatedSet.from_json(doc)
    assert errors == []
    return ds


def _status(doc: JSON, current: JSON | None = None, now: str = NOW) -> JSON:
    counts = {"prefill": RoleCounts(2, 2, 2, 2), "decode": RoleCounts(1, 1, 1, 1)}
    targets = {"prefill": 2, "decode": 1}
    return set_status(_typed(doc), counts, targets, False, current, now)


def test_the_status_carries_the_generation_it_was_computed_for() -> None:
    doc = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    doc["metadata"]["generation"] = 7
    status = _status(doc)
    assert status["observedGeneration"] == 7
    assert {x["observedGeneration"] for x in status["conditions"]} == {7}


def test_a_new_generation_alone_changes_only_the_generations() -> None:
    """The counts and condition statuses stay; lastTransitionTime stays too."""
    doc = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    first = _status(doc)
    doc["metadata"]["generation"] = 2
    second = _status(doc, first, now=LATER)
    assert second["observedGeneration"] == 2
    assert second["roleStatuses"] == first["roleStatuses"]
    assert [(x["status"], x["lastTransitionTime"]) for x in second["conditions"]] == [
        (x["status"], x["lastTransitionTime"]) for x in first["conditions"]
    ]


def test_an_object_without_a_generation_gets_no_observed_generation() -> None:
    doc = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    del doc["metadata"]["generation"]
    assert "observedGeneration" not in _status(doc)


async def _pass(ds: JSON, *others: JSON) -> FakeApiClient:
    client = FakeApiClient()
    async with seeded_ds_caches(ds, *others) as caches:
        await DisaggregatedSetReconciler(client, caches)("ns/llm")
    return client


async def test_a_spec_change_that_changes_nothing_else_is_written_once() -> None:
    ds = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    revision = revision_of_object(ds)
    lwss = [ds_owned_lws("llm", revision, "prefill", 2), ds_owned_lws("llm", revision, "decode", 1)]
    first = await _pass(ds, *lwss)
    [write] = first.calls_of("patch", "disaggregatedsets")
    assert write.body["status"]["observedGeneration"] == 1
    services = [x.body for x in first.calls_of("create", "services")]
    settled = {**ds, "status": write.body["status"]}
    assert (await _pass(settled, *lwss, *services)).writes() == []

    # A new generation whose change reaches no object the set owns (the revision, the
    # LeaderWorkerSets and the counts are the same): one status write, raising it.
    bumped = copy.deepcopy(settled)
    bumped["metadata"]["generation"] = 2
    assert revision_of_object(bumped) == revision
    client = await _pass(bumped, *lwss, *services)
    [write] = client.writes()
    assert (write.verb, write.options.get("subresource")) == ("patch", "status")
    assert write.body["status"]["observedGeneration"] == 2
    assert {x["observedGeneration"] for x in write.body["status"]["conditions"]} == {2}

    settled = {**bumped, "status": write.body["status"]}
    assert (await _pass(settled, *lwss, *services)).writes() == []
