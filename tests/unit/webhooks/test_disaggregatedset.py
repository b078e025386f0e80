"""The DisaggregatedSet validating webhook: upstream's denials, every field named; a
role's spec.scheduling judged as its LeaderWorkerSets will be, for what the controller
serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.scheduling_validation import validate_scheduling
from leaderworkerset.runtime.webhook import AdmissionResponse
from leaderworkerset.webhooks.disaggregatedset import (
    VALIDATING_PATH,
    aggregate,
    disaggregatedset_validator,
    validate_disaggregatedset,
)
from leaderworkerset.wiring import setup_controllers
from tests.toolkit.disaggregatedset import MAX_SURGE_ONE, cached_role, ds_object, role
from tests.toolkit.lws import defaulted, leaderworkerset
from tests.toolkit.manager import new_manager


def request(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
    return {"operation": operation, "namespace": "ns", "object": obj, "oldObject": old}


async def test_a_valid_set_is_allowed() -> None:
    response = await validate_disaggregatedset(
        request(ds_object(cached_role("a", 1), cached_role("b", 2)))
    )
    assert response.allowed


async def test_several_errors_are_listed_with_their_fields() -> None:
    obj = ds_object(
        cached_role("a", 1),
        cached_role("b", 1, scaling={"mode": "External"}),
        slices=2,
        placementPolicy={"type": "ExclusiveSlice"},
    )
    response = await validate_disaggregatedset(request(obj))
    assert not response.allowed
    message = response.result["message"]
    assert message.startswith("[") and "spec.slices: Forbidden" in message
    assert "spec.placementPolicy.topology: Required value" in message
    assert response.result["code"] == 403


async def test_an_external_role_with_replicas_is_warned_about() -> None:
    obj = ds_object(cached_role("a", 1), cached_role("b", 3, scaling={"mode": "External"}))
    response = await validate_disaggregatedset(request(obj, "UPDATE", obj))
    assert response.allowed
    assert response.warnings and "llm-b" in response.warnings[0]


async def test_a_member_of_the_wrong_type_is_refused_naming_it() -> None:
    obj = ds_object(cached_role("a", 1), cached_role("b", 1), slices="two")
    response = await validate_disaggregatedset(request(obj))
    assert not response.allowed and "spec.slices" in response.result["message"]


async def test_delete_is_not_judged() -> None:
    assert (await validate_disaggregatedset({"operation": "DELETE"})).allowed


def test_one_error_is_not_bracketed() -> None:
    from leaderworkerset.api.errors import forbidden

    assert aggregate([forbidden("spec.slices", "no")]) == "spec.slices: Forbidden: no"


# --- a role's spec.scheduling: the LeaderWorkerSet webhook's rules, under the role ----------

KUBERNETES = SchedulingSupport(provider="kubernetes", feature_gate=True)


def gang_role(name: str, scheduling: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """A role of one group of 3 that asks for gangs (`scheduling: {}` unless given)."""
    chosen = {} if scheduling is None else scheduling
    return role(name, 1, size=3, rollout=MAX_SURGE_ONE, scheduling=chosen, **spec)


def messages(response: AdmissionResponse) -> str:
    assert not response.allowed
    return str(response.result["message"])


async def test_a_role_scheduling_the_lws_webhook_refuses_is_refused_under_the_role() -> None:
    validate = disaggregatedset_validator(KUBERNETES)
    obj = ds_object(
        gang_role("prefill", startupPolicy=lws_c.STARTUP_POLICY_LEADER_READY),
        gang_role("decode", {"schedulingPolicy": {"gang": {"minCount": 2}}}),
    )
    message = messages(await validate(request(obj)))
    assert (
        "spec.roles[0].spec.scheduling.schedulingPolicy.gang: Forbidden: gang scheduling is "
        in (message)
    )
    assert "incompatible with startupPolicy LeaderReady" in message
    assert (
        "spec.roles[1].spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 2: "
        "must equal leaderWorkerTemplate.size" in message
    )
    # The same errors, word for word, as the LeaderWorkerSet a role would become.
    lws = leaderworkerset(
        "x", size=3, scheduling={}, startupPolicy=lws_c.STARTUP_POLICY_LEADER_READY
    )
    (alone,) = validate_scheduling(defaulted(lws), None, KUBERNETES)
    assert str(alone).removeprefix("spec.") in message


async def test_a_role_scheduling_is_admitted_by_a_controller_that_serves_it_only() -> None:
    obj = ds_object(
        gang_role("prefill"), gang_role("decode", {"schedulingPolicy": {"gang": {"minCount": 3}}})
    )
    assert (await disaggregatedset_validator(KUBERNETES)(request(obj))).allowed
    unserved = messages(await validate_disaggregatedset(request(obj)))
    assert "spec.roles[0].spec.scheduling: Forbidden: requires the WorkloadAwareScheduling" in (
        unserved
    )
    assert "spec.roles[1].spec.scheduling: Required value: requires a configured scheduler" in (
        unserved
    )
    no_api = disaggregatedset_validator(
        SchedulingSupport(provider="kubernetes", feature_gate=True, api_available=False)
    )
    assert "spec.roles[0].spec.scheduling: Forbidden: scheduling.k8s.io/v1beta1 Workload API" in (
        messages(await no_api(request(obj)))
    )
    # A set without scheduling needs no support.
    plain = ds_object(cached_role("a", 1), cached_role("b", 1))
    assert (await validate_disaggregatedset(request(plain))).allowed


async def test_a_role_may_gain_or_lose_scheduling_a_new_revision_makes_new_lwss() -> None:
    validate = disaggregatedset_validator(KUBERNETES)
    plain = ds_object(role("a", 1, size=3, rollout=MAX_SURGE_ONE), gang_role("b"))
    scheduled = ds_object(gang_role("a"), role("b", 1, size=3, rollout=MAX_SURGE_ONE))
    assert (await validate(request(scheduled, "UPDATE", plain))).allowed
    assert (await validate(request(plain, "UPDATE", scheduled))).allowed
    # A role that keeps it is judged as an update of it: the gang rules still hold.
    wrong = ds_object(
        gang_role("a", {"schedulingPolicy": {"gang": {"minCount": 1}}}),
        role("b", 1, size=3, rollout=MAX_SURGE_ONE),
    )
    assert "spec.roles[0].spec.scheduling.schedulingPolicy.gang.minCount" in messages(
        await validate(request(wrong, "UPDATE", scheduled))
    )


async def test_a_role_delegating_to_a_parent_workload_has_the_sets_controller_owner() -> None:
    """The role's annotations go onto its LeaderWorkerSets, which the set controls; an
    error about them names them under the role."""
    validate = disaggregatedset_validator(KUBERNETES)
    template = s.ANNOTATION_GROUP_TEMPLATE_NAME
    delegated = {"annotations": {template: "inference"}}
    obj = ds_object(gang_role("a"), gang_role("b"))
    obj["spec"]["roles"][0]["metadata"] = delegated
    assert (await validate(request(obj))).allowed
    obj["spec"]["roles"][0]["metadata"] = {
        "annotations": {s.ANNOTATION_PARENT_COMPOSITE_POD_GROUP: "p"}
    }
    assert (
        f"spec.roles[0].metadata.annotations[{s.ANNOTATION_PARENT_COMPOSITE_POD_GROUP}]: "
        "Forbidden" in messages(await validate(request(obj)))
    )


async def test_the_wiring_hands_the_controllers_support_to_the_set_validator(
    tmp_path: Path,
) -> None:
    obj = ds_object(gang_role("a"), gang_role("b"))
    for support, allowed in ((KUBERNETES, True), (None, False)):
        manager = new_manager(tmp_path)
        setup_controllers(manager, scheduling=support)
        handler, _ = manager.webhook_server._handlers[VALIDATING_PATH]
        assert (await handler(request(obj))).allowed is allowed
