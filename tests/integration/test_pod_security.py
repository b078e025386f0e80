"""Pod Security Admission and LeaderWorkerSets, on the real API server and
kube-controller-manager: in a namespace that enforces `restricted`, an LWS with a
privileged template is admitted (PSA does not look at custom resources, and only
warns about StatefulSets), its pods are refused, and the refusal reaches the LWS as a
Warning event `FailedCreatePods` carrying PSA's reason. The controller does not
retry in a loop meanwhile: over a window in which kube-controller-manager keeps
retrying, it writes neither the LWS nor its StatefulSet, nor another event."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    CORE_EVENTS,
    EVENTS,
    LEADERWORKERSETS,
    NAMESPACES,
    STATEFULSETS,
)
from leaderworkerset.controllers.lws.pod_refusals import POD_REFUSALS_CONTROLLER, REASON
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import live_pods, lws_event_notes
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
ENFORCE = "pod-security.kubernetes.io/enforce"
PRIVILEGED = {"privileged": True}
# What `restricted` asks of a pod that needs nothing.
RESTRICTED_POD = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsUser": 65532,
}
# Long enough for several of kube-controller-manager's retries, which each wake the
# controller (its back-off starts at milliseconds and doubles).
QUIET_WINDOW = 20.0


def privileged(lws: JSON) -> JSON:
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["securityContext"] = dict(PRIVILEGED)
    return lws


def with_restricted_leader(lws: JSON) -> JSON:
    lwt = lws["spec"]["leaderWorkerTemplate"]
    leader = copy.deepcopy(lwt["workerTemplate"])
    leader["spec"].update(copy.deepcopy(RESTRICTED_POD))
    leader["spec"]["containers"][0]["securityContext"] = dict(RESTRICTED_CONTAINER)
    lwt["leaderTemplate"] = leader
    return lws


async def refusal_notes(api: ApiClient, namespace: str, name: str) -> list[str] | None:
    notes = await lws_event_notes(api, namespace, name, REASON)
    return notes if any("violates PodSecurity" in n for n in notes) else None


async def our_events(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    items = (await api.list(EVENTS, namespace)).get("items") or []
    return [
        e
        for e in items
        if e.get("reportingController") == c.EVENT_REPORTING_CONTROLLER
        and (e.get("regarding") or {}).get("name") == name
    ]


async def failed_creates(api: ApiClient, namespace: str, sts: str) -> int:
    """Occurrences of the StatefulSet controller's FailedCreate events on `sts`."""
    items = (await api.list(CORE_EVENTS, namespace)).get("items") or []
    return sum(
        int(e.get("count") or 1)
        for e in items
        if e.get("reason") == "FailedCreate" and (e.get("involvedObject") or {}).get("name") == sts
    )


def reconciles(running: RunningController) -> float:
    assert running.manager is not None
    total = 0.0
    for metric in running.manager.metrics.registry.collect():
        if metric.name != "controller_runtime_reconcile":
            continue
        for sample in metric.samples:
            if (
                sample.name == "controller_runtime_reconcile_total"
                and sample.labels.get("controller") == POD_REFUSALS_CONTROLLER
            ):
                total += sample.value
    return total


async def test_privileged_templates_are_refused_with_the_reason_on_the_lws(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.patch(NAMESPACES, namespace, {"metadata": {"labels": {ENFORCE: "restricted"}}})
    # Leaders and workers refused; workers only (the leaders run); a Hash leader
    # Deployment's ReplicaSet refused.
    await api.create(LEADERWORKERSETS, privileged(lws_manifest("lead", namespace, replicas=1)))
    workers = with_restricted_leader(privileged(lws_manifest("work", namespace, replicas=1)))
    await api.create(LEADERWORKERSETS, workers)
    await api.create(LEADERWORKERSETS, privileged(hash_lws("hsh", namespace, replicas=1)))

    lead = await eventually(
        lambda: refusal_notes(api, namespace, "lead"), within=60, what="lead's refusal"
    )
    assert lead[0].startswith("StatefulSet lead cannot create pods: "), lead
    assert "privileged" in lead[0]
    work = await eventually(
        lambda: refusal_notes(api, namespace, "work"), within=60, what="work's refusal"
    )
    assert work[0].startswith("StatefulSet work-0 cannot create pods: "), work
    assert [
        p["metadata"]["labels"][c.LABEL_WORKER_INDEX]
        for p in await live_pods(api, namespace, "work")
    ] == [c.LEADER_WORKER_INDEX], "work's leader runs"
    hsh = await eventually(
        lambda: refusal_notes(api, namespace, "hsh"), within=60, what="hsh's refusal"
    )
    assert hsh[0].startswith("Deployment hsh cannot create pods: "), hsh

    # What kube-controller-manager 1.37 writes: the event only, no StatefulSet condition.
    sts = await api.get(STATEFULSETS, "lead", namespace)
    assert not (sts.get("status") or {}).get("conditions"), sts["status"]
    assert await failed_creates(api, namespace, "lead") > 0

    # No hot loop: kube-controller-manager keeps retrying; the controller, woken by
    # each retry, writes nothing more.
    before_lws = await api.get(LEADERWORKERSETS, "lead", namespace)
    before_sts = await api.get(STATEFULSETS, "lead", namespace)
    before_events = await our_events(api, namespace, "lead")
    before_failures = await failed_creates(api, namespace, "lead")
    before_reconciles = reconciles(lws_controller)
    await asyncio.sleep(QUIET_WINDOW)  # the window measured, not a wait for a state
    after_lws = await api.get(LEADERWORKERSETS, "lead", namespace)
    after_sts = await api.get(STATEFULSETS, "lead", namespace)
    after_failures = await failed_creates(api, namespace, "lead")
    assert after_lws["metadata"]["resourceVersion"] == before_lws["metadata"]["resourceVersion"]
    assert after_sts["metadata"]["generation"] == before_sts["metadata"]["generation"]
    assert await our_events(api, namespace, "lead") == before_events
    refusals = [e for e in before_events if e.get("reason") == REASON]
    assert len(refusals) == 1 and "series" not in refusals[0], refusals
    woken = reconciles(lws_controller) - before_reconciles
    print(
        f"window {QUIET_WINDOW}s: FailedCreate {before_failures} -> {after_failures}, "
        f"refusal reconciles {woken:.0f}, writes 0"
    )
    assert after_failures > before_failures, "kube-controller-manager stopped retrying"
    # One pass per retry of the three sets at most, and no pass of its own making.
    assert woken <= 3 * (after_failures - before_failures) + 3, woken
