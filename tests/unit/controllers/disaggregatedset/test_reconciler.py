"""The DisaggregatedSet reconciler over seeded caches and a fake API server: what it
writes for each state, and that a pass over a settled set writes nothing."""

from __future__ import annotations

import pytest

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.objects import JSON, name_of
from leaderworkerset.api.resources import (
    DISAGGREGATEDSETS,
    LEADERWORKERSETS,
    ROLE_SCALERS,
    SERVICES,
)
from leaderworkerset.controllers.disaggregatedset import reconciler as reconciler_module
from leaderworkerset.controllers.disaggregatedset.observed import observed_lws
from leaderworkerset.controllers.disaggregatedset.reconciler import DisaggregatedSetReconciler
from leaderworkerset.controllers.disaggregatedset.rollout import ObservedLWS
from tests.toolkit.caches import seeded_ds_caches
from tests.toolkit.disaggregatedset import UID, cached_role, ds_object, revision_of_object
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import ds_owned_lws
from tests.toolkit.recorded_events import RecordedEvents


async def reconcile(*objects: dict) -> tuple[FakeApiClient, RecordedEvents, object]:
    client, recorder = FakeApiClient(), RecordedEvents()
    async with seeded_ds_caches(*objects) as caches:
        result = await DisaggregatedSetReconciler(client, caches, recorder)("ns/llm")
    return client, recorder, result


async def test_a_new_set_gets_one_leaderworkerset_per_role_at_its_target() -> None:
    ds = ds_object(cached_role("prefill", 3), cached_role("decode", 1))
    revision = revision_of_object(ds)
    client, _, result = await reconcile(ds)
    created = {x.name: x.body for x in client.calls_of("create", "leaderworkersets")}
    assert set(created) == {f"llm-0-{revision}-prefill", f"llm-0-{revision}-decode"}
    assert created[f"llm-0-{revision}-prefill"]["spec"]["replicas"] == 3
    assert created[f"llm-0-{revision}-decode"]["metadata"]["ownerReferences"][0]["uid"] == UID
    # Nothing is ready: no Service yet.
    assert not client.calls_of("create", "services")
    assert result is None


async def test_services_follow_readiness_and_a_settled_set_is_not_written() -> None:
    ds = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    revision = revision_of_object(ds)
    lwss = [ds_owned_lws("llm", revision, "prefill", 2), ds_owned_lws("llm", revision, "decode", 1)]
    client, _, _ = await reconcile(ds, *lwss)
    services = [x.body for x in client.calls_of("create", "services")]
    assert sorted(s["metadata"]["name"] for s in services) == [
        f"llm-0-{revision}-decode-prv",
        f"llm-0-{revision}-prefill-prv",
    ]
    [status_write] = client.calls_of("patch", "disaggregatedsets")
    assert status_write.options.get("subresource") == "status"

    # The same state, with what the first pass wrote: nothing more to write.
    settled = {**ds, "status": status_write.body["status"]}
    again, _, _ = await reconcile(settled, *lwss, *services)
    assert again.writes() == []


async def test_a_template_change_starts_a_rollout() -> None:
    old = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    old_revision = revision_of_object(old)
    ds = ds_object(
        cached_role("prefill", 2, image="pause:2"), cached_role("decode", 1, image="pause:2")
    )
    revision = revision_of_object(ds)
    lwss = [
        ds_owned_lws("llm", old_revision, "prefill", 2),
        ds_owned_lws("llm", old_revision, "decode", 1),
    ]
    client, recorder, result = await reconcile(ds, *lwss)
    annotated = {
        x.name: x.body["metadata"]["annotations"][c.ANNOTATION_INITIAL_REPLICAS]
        for x in client.calls_of("patch", "leaderworkersets")
    }
    assert annotated == {
        f"llm-0-{old_revision}-prefill": "2",
        f"llm-0-{old_revision}-decode": "1",
    }
    created = {
        x.name: x.body["spec"]["replicas"] for x in client.calls_of("create", "leaderworkersets")
    }
    assert created == {f"llm-0-{revision}-prefill": 0, f"llm-0-{revision}-decode": 0}
    assert recorder.reasons == ["RollingUpdateStarted"]
    assert getattr(result, "requeue_after", None) == 1.0


async def test_a_rollout_step_scales_both_revisions_and_records_it() -> None:
    old = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    old_revision = revision_of_object(old)
    ds = ds_object(
        cached_role("prefill", 2, image="pause:2"), cached_role("decode", 1, image="pause:2")
    )
    revision = revision_of_object(ds)
    started = {c.ANNOTATION_INITIAL_REPLICAS: "2"}
    lwss = [
        ds_owned_lws("llm", old_revision, "prefill", 2, annotations=started),
        ds_owned_lws(
            "llm", old_revision, "decode", 1, annotations={c.ANNOTATION_INITIAL_REPLICAS: "1"}
        ),
        ds_owned_lws("llm", revision, "prefill", 0, created="2026-01-02T00:00:00Z"),
        ds_owned_lws("llm", revision, "decode", 0, created="2026-01-02T00:00:00Z"),
    ]
    client, recorder, _ = await reconcile(ds, *lwss)
    scaled = {
        x.name: x.body["spec"]["replicas"] for x in client.calls_of("patch", "leaderworkersets")
    }
    # maxSurge 1: the first step grows the new revision by one group per role.
    assert scaled == {f"llm-0-{revision}-prefill": 1, f"llm-0-{revision}-decode": 1}
    assert recorder.reasons == ["ScalingUp", "ScalingUp"]


async def test_drained_revision_is_deleted_with_its_services() -> None:
    old = ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    old_revision = revision_of_object(old)
    ds = ds_object(
        cached_role("prefill", 2, image="pause:2"), cached_role("decode", 1, image="pause:2")
    )
    revision = revision_of_object(ds)
    lwss = [
        ds_owned_lws("llm", old_revision, "prefill", 0),
        ds_owned_lws("llm", old_revision, "decode", 0),
        ds_owned_lws("llm", revision, "prefill", 2),
        ds_owned_lws("llm", revision, "decode", 1),
    ]
    old_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"llm-0-{old_revision}-prefill-prv",
            "namespace": "ns",
            "labels": {
                c.LABEL_SET_NAME: "llm",
                c.LABEL_ROLE: "prefill",
                c.LABEL_REVISION: old_revision,
                c.LABEL_SLICE: "0",
            },
        },
    }
    client, recorder, _ = await reconcile(ds, *lwss, old_service)
    deleted = {(x.plural, x.name) for x in client.calls_of("delete")}
    assert deleted == {
        ("leaderworkersets", f"llm-0-{old_revision}-prefill"),
        ("leaderworkersets", f"llm-0-{old_revision}-decode"),
        ("services", f"llm-0-{old_revision}-prefill-prv"),
    }
    assert recorder.reasons.count("LWSDeleted") == 2


async def test_an_external_role_gets_a_scaler_seeded_with_its_groups() -> None:
    ds = ds_object(
        cached_role("prefill", 2), cached_role("decode", 1, scaling={"mode": "External"})
    )
    revision = revision_of_object(ds)
    lwss = [ds_owned_lws("llm", revision, "prefill", 2), ds_owned_lws("llm", revision, "decode", 4)]
    client, recorder, _ = await reconcile(ds, *lwss)
    [created] = client.calls_of("create", ROLE_SCALERS.plural)
    assert created.name == "llm-decode"
    assert created.body["spec"] == {"replicas": 4}
    # The scaler's 4 is the decode target: its LeaderWorkerSet is left as it is.
    assert not client.calls_of("patch", LEADERWORKERSETS.plural)
    assert "ScalerCreated" in recorder.reasons
    status_writes = [x for x in client.calls_of("patch", ROLE_SCALERS.plural)]
    assert status_writes[0].body["status"]["replicas"] == 4


async def test_a_deleted_set_is_left_to_the_garbage_collector() -> None:
    client, _, result = await reconcile()
    assert client.writes() == [] and result is None
    assert DISAGGREGATEDSETS.plural == c.PLURAL and SERVICES.plural == "services"


async def test_a_foreign_scaler_under_the_wanted_name_is_a_conflict_without_api_calls() -> None:
    ds = ds_object(
        cached_role("prefill", 2), cached_role("decode", 1, scaling={"mode": "External"})
    )
    revision = revision_of_object(ds)
    lwss = [ds_owned_lws("llm", revision, "prefill", 2), ds_owned_lws("llm", revision, "decode", 1)]
    # Someone else's, without the set's label: only the whole cache holds it.
    foreign = {
        "apiVersion": f"{c.GROUP}/{c.VERSION}",
        "kind": c.SCALER_KIND,
        "metadata": {"name": "llm-decode", "namespace": "ns", "uid": "someone-else"},
        "spec": {"replicas": 7},
    }
    client, recorder, _ = await reconcile(ds, *lwss, foreign)
    assert not client.calls_of("create", ROLE_SCALERS.plural)
    assert not client.calls_of("get", ROLE_SCALERS.plural)
    assert "ScalerConflict" in recorder.reasons or any("onflict" in r for r in recorder.reasons)


async def test_a_pass_reads_each_leaderworkerset_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A rollout step reads the LeaderWorkerSets to plan, to annotate and to scale.
    read: list[str] = []

    def counting(lws: JSON) -> ObservedLWS:
        read.append(name_of(lws))
        return observed_lws(lws)

    monkeypatch.setattr(reconciler_module, "observed_lws", counting)
    old_revision = revision_of_object(
        ds_object(cached_role("prefill", 2), cached_role("decode", 1))
    )
    ds = ds_object(
        cached_role("prefill", 2, image="pause:2"), cached_role("decode", 1, image="pause:2")
    )
    revision = revision_of_object(ds)
    lwss = [
        ds_owned_lws("llm", old_revision, "prefill", 2),
        ds_owned_lws("llm", old_revision, "decode", 1),
        ds_owned_lws("llm", revision, "prefill", 0, created="2026-01-02T00:00:00Z"),
        ds_owned_lws("llm", revision, "decode", 0, created="2026-01-02T00:00:00Z"),
    ]
    client, _, _ = await reconcile(ds, *lwss)
    assert client.calls_of("patch", "leaderworkersets")  # it did annotate and scale
    assert sorted(read) == sorted(name_of(x) for x in lwss)
