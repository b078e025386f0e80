"""Why the LWS reconciler refuses spec.scheduling: the WorkloadSchedulingReady reasons of
upstream #982 for each missing piece (provider, gate, cluster API)."""

from __future__ import annotations

import pytest

from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.controllers.lws.workload_scheduling import support_refusal


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
