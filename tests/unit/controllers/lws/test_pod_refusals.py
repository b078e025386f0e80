"""Pod-creation refusals reported on the LeaderWorkerSet: which refusals count, and
how often one is recorded (once per message per REPEAT_AFTER, never per retry)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.lws.pod_refusals import (
    FAILED_CREATE_SELECTOR,
    REASON,
    REPEAT_AFTER,
    PodRefusalReporter,
    _lws_of_event,
    failed_create_events,
    failed_create_fields,
)
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.metrics import RuntimeMetrics
from tests.toolkit.caches import StaticLister, started

JSON = dict[str, Any]
NS = "ns"
PSA = 'pods "web-0" is forbidden: violates PodSecurity "restricted:latest": privileged'


def lws(name: str = "web", uid: str = "lws-uid") -> JSON:
    return {
        "apiVersion": f"{c.GROUP}/{c.VERSION}",
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2}},
    }


def statefulset(name: str, uid: str, *, have: int = 0, want: int = 2) -> JSON:
    return {
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "labels": {c.LABEL_SET_NAME: "web"},
        },
        "spec": {"replicas": want},
        "status": {"replicas": have},
    }


def failed_create(sts: str, uid: str, message: str = PSA, at: str = "2026-01-01T00:00:01Z") -> JSON:
    return {
        "kind": "Event",
        "metadata": {"name": f"{sts}.1", "namespace": NS, "managedFields": [{}]},
        "involvedObject": {"kind": "StatefulSet", "namespace": NS, "name": sts, "uid": uid},
        "reason": "FailedCreate",
        "type": "Warning",
        "message": f"create Pod x in StatefulSet {sts} failed error: {message}",
        "lastTimestamp": at,
        "source": {"component": "statefulset-controller"},
    }


@dataclass
class Recorded:
    notes: list[str] = field(default_factory=list)

    def event(self, regarding: JSON, type_: str, reason: str, action: str, note: str) -> None:
        assert (type_, reason, action) == ("Warning", REASON, "Create")
        assert regarding["metadata"]["name"] == "web"
        self.notes.append(note)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    caches: LwsCaches
    events: Informer
    recorder: Recorded
    clock: Clock
    reporter: PodRefusalReporter


@pytest.fixture
def objects() -> list[JSON]:
    return [lws(), statefulset("web", "sts-uid"), failed_create("web", "sts-uid")]


@pytest.fixture
async def setup(objects: list[JSON]) -> AsyncIterator[Setup]:
    lister = StaticLister(objects)
    caches = build_caches(lister)
    events = failed_create_events(lister, None, RuntimeMetrics())
    async with started(caches):
        events.start()
        assert await events.wait_synced(5)
        try:
            recorder, clock = Recorded(), Clock()
            reporter = PodRefusalReporter(caches, events, recorder, clock=clock)  # type: ignore[arg-type]
            yield Setup(caches, events, recorder, clock, reporter)
        finally:
            await events.stop()


def test_the_cache_is_narrowed_by_the_api_server_and_keeps_little() -> None:
    assert FAILED_CREATE_SELECTOR == "involvedObject.kind=StatefulSet,reason=FailedCreate"
    kept = failed_create_fields(failed_create("web", "u"))
    assert "source" not in kept and "managedFields" not in kept["metadata"]
    assert kept["involvedObject"]["uid"] == "u"
    # A series' last occurrence is when it last happened.
    series = {**failed_create("web", "u"), "series": {"lastObservedTime": "2026-01-01T01:00:00Z"}}
    assert failed_create_fields(series)["lastTimestamp"] == "2026-01-01T01:00:00Z"


async def test_a_refusal_is_recorded_once_per_message_and_interval(setup: Setup) -> None:
    result = await setup.reporter(f"{NS}/web")
    assert setup.recorder.notes == [
        f"StatefulSet web cannot create pods: create Pod x in StatefulSet web failed error: {PSA}"
    ]
    assert result is not None and result.requeue_after == REPEAT_AFTER
    # The StatefulSet controller's retries wake the reconciler again: nothing written.
    for elapsed in range(10, 60, 10):
        setup.clock.now = 1000.0 + elapsed
        result = await setup.reporter(f"{NS}/web")
        assert result is not None and result.requeue_after == REPEAT_AFTER - elapsed
    assert len(setup.recorder.notes) == 1
    # Still refused a REPEAT_AFTER later: recorded again, so it stays among recent events.
    setup.clock.now += REPEAT_AFTER
    await setup.reporter(f"{NS}/web")
    assert len(setup.recorder.notes) == 2


@pytest.mark.parametrize(
    "objects",
    [
        # The StatefulSet has all its pods: the refusal is over.
        [lws(), statefulset("web", "sts-uid", have=2), failed_create("web", "sts-uid")],
        # The event is about an earlier StatefulSet of the same name.
        [lws(), statefulset("web", "sts-uid"), failed_create("web", "old-uid")],
        # Another LWS's StatefulSet (not labelled with this name) in the namespace.
        [lws(), failed_create("other", "x")],
        # No LWS (deleted).
        [statefulset("web", "sts-uid"), failed_create("web", "sts-uid")],
    ],
)
async def test_refusals_that_do_not_hold_are_not_recorded(setup: Setup) -> None:
    assert await setup.reporter(f"{NS}/web") is None
    assert setup.recorder.notes == []


@pytest.mark.parametrize(
    "objects",
    [
        [
            lws(),
            statefulset("web", "sts-uid", have=1, want=1),
            statefulset("web-0", "w-uid", have=0, want=1),
            failed_create("web-0", "w-uid", "quota", at="2026-01-01T00:00:01Z"),
            {
                **failed_create("web-0", "w-uid", "newer", at="2026-01-01T00:05:00Z"),
                "metadata": {"name": "web-0.2", "namespace": NS},
            },
        ]
    ],
)
async def test_the_newest_refusal_of_a_worker_statefulset_is_recorded(setup: Setup) -> None:
    await setup.reporter(f"{NS}/web")
    assert len(setup.recorder.notes) == 1
    assert setup.recorder.notes[0].startswith("StatefulSet web-0 cannot create pods: ")
    assert setup.recorder.notes[0].endswith("failed error: newer")
    assert _lws_of_event(setup.caches)(failed_create("web-0", "w-uid")) == [f"{NS}/web"]
    assert _lws_of_event(setup.caches)(failed_create("nobody", "n")) == []


@pytest.mark.parametrize(
    "objects",
    [
        [
            lws(),
            {
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": NS, "labels": {c.LABEL_SET_NAME: "web"}},
                "status": {
                    "conditions": [
                        {
                            "type": "ReplicaFailure",
                            "status": "True",
                            "reason": "FailedCreate",
                            "message": PSA,
                            "lastUpdateTime": "2026-01-01T00:00:01Z",
                        }
                    ]
                },
            },
        ]
    ],
)
async def test_a_hash_leader_deployments_replica_failure_is_recorded(setup: Setup) -> None:
    await setup.reporter(f"{NS}/web")
    assert setup.recorder.notes == [f"Deployment web cannot create pods: {PSA}"]


async def test_a_new_message_is_recorded_at_once_and_a_deleted_lws_forgotten(
    setup: Setup,
) -> None:
    await setup.reporter(f"{NS}/web")
    assert len(setup.recorder.notes) == 1
    setup.reporter._recorded["lws-uid"] = ("something else", setup.clock.now)
    await setup.reporter(f"{NS}/web")
    assert len(setup.recorder.notes) == 2
    setup.reporter.forget(lws())
    assert setup.reporter._recorded == {}
