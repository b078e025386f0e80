"""The DisaggregatedSet validating webhook: upstream's denials, every field named; a
role's spec.scheduling judged as its LeaderWorkerSets will be, for what the controller
serves; each role judged as the LeaderWorkerSet the controller makes of it (the LWS
webhooks' rules, then their dry run); and, the other way round, every LeaderWorkerSet
the controller makes of an admitted set passing the LWS webhooks."""

from __future__ import annotations

import asyncio
import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from leaderworkerset.admission_dryrun import dry_run_check
from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.objects import leaderworkerset
from leaderworkerset.api.disaggregatedset.role_admission import creation_replicas
from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.scheduling_validation import validate_scheduling
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.webhook import AdmissionResponse
from leaderworkerset.webhooks.admission import leaderworkerset_validator
from leaderworkerset.webhooks.disaggregatedset import (
    VALIDATING_PATH,
    aggregate,
    disaggregatedset_validator,
    validate_disaggregatedset,
    verdict,
)
from leaderworkerset.webhooks.leaderworkerset import Cause, defaulted_or_refused
from leaderworkerset.wiring import setup_controllers
from tests.chaos.strategies import disaggregatedsets
from tests.toolkit.disaggregatedset import MAX_SURGE_ONE, cached_role, decoded, ds_object, role
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import defaulted
from tests.toolkit.lws import leaderworkerset as lws_object
from tests.toolkit.manager import new_manager
from tests.toolkit.paths import REPO

JSON = dict[str, Any]


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
    lws = lws_object("x", size=3, scheduling={}, startupPolicy=lws_c.STARTUP_POLICY_LEADER_READY)
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


# --- each role judged as the LeaderWorkerSet the controller makes of it ------------------

SIZE = "spec.leaderWorkerTemplate.size"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class WorkloadApi:
    """The API server's answer to the dry-run creates of the workloads built from a
    LeaderWorkerSet: a 422 naming each container whose name is not a DNS label, as the
    StatefulSet and Deployment APIs refuse it; every request is kept."""

    def __init__(self) -> None:
        self.asked: list[JSON] = []

    async def __call__(self, call: Call) -> None:
        self.asked.append(call.body)
        containers = call.body["spec"]["template"]["spec"]["containers"]
        causes = [
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{c["name"]}": a lowercase RFC 1123 label must ...',
                "field": f"spec.template.spec.containers[{i}].name",
            }
            for i, c in enumerate(containers)
            if not DNS_LABEL.fullmatch(c["name"])
        ]
        if causes:
            raise ApiError(
                422, {"reason": "Invalid", "message": "invalid", "details": {"causes": causes}}
            )


def dry_run_validator(api: WorkloadApi, **kwargs: Any) -> Any:
    client = FakeApiClient()
    client.on_call = api
    return disaggregatedset_validator(check=dry_run_check(client), **kwargs)


def broken(index: int, **spec: Any) -> JSON:
    """A valid two-role set whose role `index` has these LeaderWorkerSet spec members."""
    roles = [cached_role("prefill", 1), cached_role("decode", 1)]
    roles[index]["spec"].update(spec)
    return ds_object(*roles)


async def test_a_role_of_size_zero_is_refused_naming_its_field() -> None:
    template = {
        "size": 0,
        "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
    }
    response = await validate_disaggregatedset(request(broken(1, leaderWorkerTemplate=template)))
    assert messages(response) == (
        f"spec.roles[1].{SIZE}: Invalid value: 0: size must be equal or greater than 1"
    )
    assert response.result["code"] == 403


async def test_a_subgroup_size_not_dividing_the_size_is_refused_naming_its_field() -> None:
    template = {
        "size": 5,
        "subGroupPolicy": {"subGroupSize": 3},
        "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
    }
    message = messages(
        await validate_disaggregatedset(request(broken(0, leaderWorkerTemplate=template)))
    )
    assert message == (
        "spec.roles[0].spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize: Invalid value: 3: "
        "size or size - 1 must be divisible by subGroupSize"
    )


async def test_a_container_the_workload_apis_refuse_is_refused_under_the_role() -> None:
    api = WorkloadApi()
    obj = ds_object(cached_role("prefill", 1), role("decode", 1, size=2, container="Bad_Name"))
    message = messages(await dry_run_validator(api)(request(obj)))
    assert message == (
        "spec.roles[1].spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name: "
        'Invalid value: "Bad_Name": a lowercase RFC 1123 label must ...'
    )
    # Asked about what the controller builds: the leader and the worker StatefulSets of
    # each role's first LeaderWorkerSet, in the set's namespace.
    built = [(body["kind"], body["metadata"]["namespace"]) for body in api.asked]
    assert sorted(built) == [("StatefulSet", "ns")] * 3


async def test_a_valid_set_is_admitted_after_its_dry_run() -> None:
    api = WorkloadApi()
    obj = ds_object(cached_role("prefill", 1), role("decode", 2, size=3, rollout=MAX_SURGE_ONE))
    assert (await dry_run_validator(api)(request(obj))).allowed
    assert len(api.asked) == 3


async def test_no_dry_run_while_the_rules_refuse() -> None:
    api = WorkloadApi()
    template = {
        "size": 0,
        "workerTemplate": {"spec": {"containers": [{"name": "B_", "image": "i"}]}},
    }
    message = messages(
        await dry_run_validator(api)(request(broken(0, leaderWorkerTemplate=template)))
    )
    assert message.startswith(f"spec.roles[0].{SIZE}:") and api.asked == []


async def test_a_cause_on_what_only_the_controller_writes_names_the_role_and_field() -> None:
    async def check(lws: JSON, old: JSON | None) -> list[Cause]:
        assert old is None and lws["metadata"]["name"].startswith("llm-0-")
        return [Cause("metadata.labels", "FieldValueInvalid", 'Invalid value: "x": bad')]

    validate = disaggregatedset_validator(check=check)
    obj = ds_object(cached_role("prefill", 1), cached_role("decode", 1))
    obj["spec"]["roles"][1]["metadata"] = {"labels": {"tier": "x"}}
    assert messages(await validate(request(obj))) == (
        "[spec.roles[0]: in the role's LeaderWorkerSets, metadata.labels: "
        'Invalid value: "x": bad, spec.roles[1].metadata.labels: Invalid value: "x": bad]'
    )


async def test_an_update_leaving_a_stored_broken_role_as_it_was_is_admitted() -> None:
    """A set stored before (or by upstream): its role's LeaderWorkerSets are all refused,
    yet it can be scaled, relabelled and have its finalizers removed."""
    api = WorkloadApi()
    validate = dry_run_validator(api)
    old = ds_object(cached_role("prefill", 1), role("decode", 1, size=0, container="Bad_Name"))
    assert not (await validate(request(old))).allowed
    api.asked.clear()
    scaled = copy.deepcopy(old)
    scaled["spec"]["roles"][1]["spec"]["replicas"] = 0
    scaled["spec"]["roles"][0]["spec"]["replicas"] = 0
    scaled["metadata"].update(
        labels={"team": "a"}, finalizers=[], deletionTimestamp="2026-01-01T00:00:00Z"
    )
    assert (await validate(request(scaled, "UPDATE", old))).allowed
    assert api.asked == []
    # Changing the broken role is judged afresh.
    fixed_image = copy.deepcopy(old)
    fixed_image["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
        "containers"
    ][0]["image"] = "pause:2"
    assert f"spec.roles[1].{SIZE}" in messages(await validate(request(fixed_image, "UPDATE", old)))


async def test_the_wiring_hands_the_limits_and_the_dry_run_to_the_set_validator(
    tmp_path: Path,
) -> None:
    manager = new_manager(tmp_path)
    setup_controllers(manager, limits=SizeLimits(max_size=2))
    api = WorkloadApi()
    assert isinstance(manager.client, FakeApiClient)
    manager.client.on_call = api
    handler, _ = manager.webhook_server._handlers[VALIDATING_PATH]
    big = ds_object(cached_role("prefill", 1), role("decode", 1, size=3))
    assert f"spec.roles[1].{SIZE}: Invalid value: 3: must be no more than 2" in messages(
        await handler(request(big))
    )
    bad = ds_object(cached_role("prefill", 1), role("decode", 1, container="Bad_Name"))
    assert "spec.roles[1].spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name" in (
        messages(await handler(request(bad)))
    )


# --- the other side: what the controller sends for an admitted set passes the LWS webhook --

SAMPLES = REPO / "config" / "samples"


def controller_bodies(obj: JSON) -> list[JSON]:
    """Every LeaderWorkerSet the controller creates for the set: each role in each slice,
    at the set's revision, with the replicas it creates them with."""
    ds = decoded(obj)
    try:
        revision = compute_revision(ds.roles)
    except ValueError:
        # A quantity the CRD schema's pattern refuses: no webhook (nor controller) sees it.
        assume(False)
    slices = (ds.spec.slices if ds.spec else None) or 1
    return [
        leaderworkerset(ds, r, index, revision, creation_replicas(r))
        for index in range(slices)
        for r in ds.roles
    ]


async def assert_lws_webhooks_admit(body: JSON) -> None:
    defaulted = defaulted_or_refused(copy.deepcopy(body))
    assert isinstance(defaulted, dict), defaulted
    review = {"operation": "CREATE", "namespace": "ns", "object": defaulted, "oldObject": None}
    response = await leaderworkerset_validator()(review)
    assert response.allowed, response.result


@pytest.mark.parametrize(
    "sample", sorted(p.name for p in SAMPLES.glob("*disaggregated*.yaml")), ids=str
)
async def test_the_controllers_lwss_of_each_sample_pass_the_lws_webhooks(sample: str) -> None:
    obj = yaml.safe_load((SAMPLES / sample).read_text())
    obj["metadata"].update(namespace="ns", uid="u-1")
    assert (await validate_disaggregatedset(request(obj))).allowed
    bodies = controller_bodies(obj)
    assert len(bodies) >= 2
    for body in bodies:
        await assert_lws_webhooks_admit(body)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(disaggregatedsets())
def test_a_set_the_webhook_admits_makes_lwss_the_lws_webhooks_admit(obj: JSON) -> None:
    """Over generated sets, valid or not: whatever the set's webhook admits, every
    LeaderWorkerSet the controller makes of it (every role, every slice) passes the
    LeaderWorkerSet webhooks' rules."""
    obj["metadata"].update(namespace="ns", uid="u-1")
    assume(verdict("CREATE", copy.deepcopy(obj), None).allowed)
    for body in controller_bodies(obj):
        asyncio.run(assert_lws_webhooks_admit(body))
