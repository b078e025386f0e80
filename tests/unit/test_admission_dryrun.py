"""The admission dry-run of the workloads built from a LeaderWorkerSet: what is built,
how the API server's causes map back to LWS fields, when it is asked, and what a
failure to ask does (nothing)."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest

from leaderworkerset.admission_dryrun import (
    THROWAWAY_PREFIX,
    Workload,
    causes_of,
    dry_run_check,
    lws_field,
    same_workloads,
    workloads,
)
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import DEPLOYMENTS, STATEFULSETS
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.webhooks.admission import leaderworkerset_validator
from leaderworkerset.webhooks.leaderworkerset import Cause
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import leaderworkerset

JSON = dict[str, Any]
TEMPLATE = "spec.leaderWorkerTemplate"


def lws(size: int = 3, leader: bool = False, **spec: Any) -> JSON:
    container = {"name": "main", "image": "pause"}
    return leaderworkerset(
        "web",
        "ns",
        size=size,
        container=container,
        template={"leaderTemplate": {"spec": {"containers": [container]}}} if leader else None,
        metadata={"uid": "u-1", "resourceVersion": "7"},
        **spec,
    )


def workload(
    resource: Any = STATEFULSETS, leader: bool = False, has_leader: bool = False
) -> Workload:
    path = f"{TEMPLATE}.{'leaderTemplate' if leader and has_leader else 'workerTemplate'}"
    return Workload(resource, {"kind": resource.kind}, path, leader)


def invalid(causes: list[JSON], message: str = "StatefulSet.apps is invalid") -> ApiError:
    body = {"code": 422, "reason": "Invalid", "message": message, "details": {"causes": causes}}
    return ApiError(422, body)


# --- field paths -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "field", "expected"),
    [
        (
            workload(),
            "spec.template.spec.containers[0].name",
            f"{TEMPLATE}.workerTemplate.spec.containers[0].name",
        ),
        (
            workload(leader=True, has_leader=True),
            "spec.template.spec.containers[0].image",
            f"{TEMPLATE}.leaderTemplate.spec.containers[0].image",
        ),
        (
            workload(leader=True),
            "spec.template.spec.containers",
            f"{TEMPLATE}.workerTemplate.spec.containers",
        ),
        (workload(), "spec.template", f"{TEMPLATE}.workerTemplate"),
        (
            workload(),
            "spec.volumeClaimTemplates[1].metadata.name",
            f"{TEMPLATE}.volumeClaimTemplates[1].metadata.name",
        ),
        (
            workload(leader=True),
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
            f"{TEMPLATE}.persistentVolumeClaimRetentionPolicy.whenDeleted",
        ),
        (
            workload(DEPLOYMENTS, leader=True),
            "spec.strategy.rollingUpdate.maxSurge",
            "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
        ),
        (
            workload(leader=True),
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
        ),
        (workload(leader=True), "spec.replicas", "spec.replicas"),
        (workload(), "spec.replicas", f"{TEMPLATE}.size"),
        (workload(), "metadata.annotations", "metadata.annotations"),
        (workload(), "spec.templateGeneration", None),
        (workload(), "spec.selector", None),
        (workload(), "spec.serviceName", None),
    ],
)
def test_workload_fields_map_to_lws_fields(
    target: Workload, field: str, expected: str | None
) -> None:
    assert lws_field(target, field) == expected


def test_claims_checked_as_volumes_map_to_their_claim_templates() -> None:
    # As the StatefulSet API lists them: claims first, a template volume of a claim's
    # name in its place, then the other template volumes.
    body = {
        "spec": {
            "template": {"spec": {"volumes": [{"name": "own"}, {"name": "data"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}}, {"metadata": {"name": "x"}}],
        }
    }
    target = Workload(STATEFULSETS, body, f"{TEMPLATE}.workerTemplate", False)
    expected = {
        "spec.template.spec.volumes[0].name": f"{TEMPLATE}.workerTemplate.spec.volumes[1].name",
        "spec.template.spec.volumes[1].name": f"{TEMPLATE}.volumeClaimTemplates[1].metadata.name",
        "spec.template.spec.volumes[2].emptyDir": (
            f"{TEMPLATE}.workerTemplate.spec.volumes[0].emptyDir"
        ),
        "spec.template.spec.volumes[2]": f"{TEMPLATE}.workerTemplate.spec.volumes[0]",
        "spec.template.spec.volumes[3].name": f"{TEMPLATE}.workerTemplate.spec.volumes[3].name",
    }
    assert {field: lws_field(target, field) for field in expected} == expected
    deployment = Workload(DEPLOYMENTS, body, f"{TEMPLATE}.workerTemplate", True)
    assert lws_field(deployment, "spec.template.spec.volumes[1].name") == (
        f"{TEMPLATE}.workerTemplate.spec.volumes[1].name"
    )


def test_causes_keep_reason_and_message_under_the_lws_field() -> None:
    message = 'Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of ...'
    error = invalid(
        [
            {
                "reason": "FieldValueInvalid",
                "message": message,
                "field": "spec.template.spec.containers[0].name",
            }
        ]
    )
    assert causes_of(workload(), error) == [
        Cause(f"{TEMPLATE}.workerTemplate.spec.containers[0].name", "FieldValueInvalid", message)
    ]


def test_a_cause_the_lws_does_not_set_is_put_on_the_template_naming_the_field() -> None:
    error = invalid(
        [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.selector"}]
    )
    [cause] = causes_of(workload(leader=True), error)
    assert cause.field == f"{TEMPLATE}.workerTemplate"
    assert cause.reason == "FieldValueInvalid"
    assert (
        "leader StatefulSet" in cause.message and "spec.selector: Required value" in cause.message
    )


def test_a_422_without_causes_still_names_the_template() -> None:
    [cause] = causes_of(workload(DEPLOYMENTS, leader=True), invalid([], "it is wrong"))
    assert cause.field == f"{TEMPLATE}.workerTemplate"
    assert "it is wrong" in cause.message and "Deployment" in cause.message


# --- the workloads built -------------------------------------------------------------------


def test_ordinal_builds_the_leader_and_one_worker_statefulset() -> None:
    leader, worker = workloads(lws(leader=True), "lws-dry-run-ab", "other")
    assert (leader.resource, worker.resource) == (STATEFULSETS, STATEFULSETS)
    assert leader.template_path == f"{TEMPLATE}.leaderTemplate" and leader.leader
    assert worker.template_path == f"{TEMPLATE}.workerTemplate" and not worker.leader
    assert leader.body["metadata"]["name"] == "lws-dry-run-ab"
    assert worker.body["metadata"]["name"] == "lws-dry-run-ab-0"
    for built in (leader, worker):
        meta = built.body["metadata"]
        assert meta["namespace"] == "other" and "ownerReferences" not in meta
        labels = built.body["spec"]["template"]["metadata"]["labels"]
        assert labels[c.LABEL_SET_NAME] == "lws-dry-run-ab"
    assert worker.body["spec"]["replicas"] == 2


def test_hash_builds_a_deployment_and_size_one_no_workers() -> None:
    [leader] = workloads(lws(size=1, groupIdentity=c.GROUP_IDENTITY_HASH), "x", "ns")
    assert leader.resource == DEPLOYMENTS and leader.body["kind"] == "Deployment"
    assert leader.template_path == f"{TEMPLATE}.workerTemplate"
    built = workloads(lws(size=2, groupIdentity=c.GROUP_IDENTITY_HASH), "x", "ns")
    assert [w.body["kind"] for w in built] == ["Deployment", "StatefulSet"]


def test_claims_and_retention_reach_the_statefulsets() -> None:
    obj = lws()
    template = obj["spec"]["leaderWorkerTemplate"]
    template["volumeClaimTemplates"] = [{"metadata": {"name": "Bad_Claim"}, "spec": {}}]
    template["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Sometimes"}
    for built in workloads(obj, "x", "ns"):
        spec = built.body["spec"]
        assert spec["volumeClaimTemplates"][0]["metadata"]["name"] == "Bad_Claim"
        assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Sometimes"}


def test_same_workloads_tells_template_changes_from_others() -> None:
    old = lws()
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["resourceVersion"] = "8"
    relabelled["spec"]["startupPolicy"] = "LeaderReady"
    assert same_workloads(relabelled, old)
    for change in (
        lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(containers=[]),
        lambda o: o["spec"]["leaderWorkerTemplate"].update(size=4),
        lambda o: o["spec"]["leaderWorkerTemplate"].update(
            persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete"}
        ),
    ):
        changed = copy.deepcopy(old)
        change(changed)
        assert not same_workloads(changed, old)


# --- asking the API server ---------------------------------------------------------------


class Answers:
    """The fake client's hook for the dry-run creates: each is answered with
    `answer(path)` (raised when it is an exception)."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.calls: list[tuple[str, JSON, JSON]] = []

    async def __call__(self, call: Call) -> JSON:
        path = call.name
        self.calls.append((path, call.options["params"], call.body))
        outcome = self.answer(path) if callable(self.answer) else self.answer
        if isinstance(outcome, BaseException):
            raise outcome
        return {}


def checker(answers: Answers) -> Any:
    client = FakeApiClient()
    client.on_call = answers
    return dry_run_check(client)


NAME_CAUSE = {
    "reason": "FieldValueInvalid",
    "message": 'Invalid value: "Bad_Name": bad',
    "field": "spec.template.spec.containers[0].name",
}


async def test_a_422_is_reported_once_for_leader_and_workers() -> None:
    answers = Answers(invalid([NAME_CAUSE]))
    causes = await checker(answers)(lws(), None)
    assert causes == [
        Cause(
            f"{TEMPLATE}.workerTemplate.spec.containers[0].name",
            "FieldValueInvalid",
            NAME_CAUSE["message"],
        )
    ]
    assert len(answers.calls) == 2
    for path, params, body in answers.calls:
        assert params == {"dryRun": "All"} and path.startswith("/apis/apps/v1/namespaces/ns/")
        assert body["metadata"]["name"].startswith(THROWAWAY_PREFIX)


@pytest.mark.parametrize(
    "failure",
    [
        ApiError(403, {"reason": "Forbidden", "message": "no"}),
        ApiError(503, {"message": "unavailable"}),
        ApiError(409, {"reason": "AlreadyExists"}),
        aiohttp.ClientConnectionError("refused"),
        aiohttp.SocketTimeoutError("slow"),
    ],
)
async def test_other_failures_do_not_refuse(failure: BaseException) -> None:
    assert await checker(Answers(failure))(lws(), None) == []


async def test_one_workload_refused_is_enough() -> None:
    def answer(path: str) -> Any:
        return ApiError(503, {}) if path.endswith("deployments") else invalid([NAME_CAUSE])

    causes = await checker(Answers(answer))(lws(groupIdentity=c.GROUP_IDENTITY_HASH), None)
    assert [c.field for c in causes] == [f"{TEMPLATE}.workerTemplate.spec.containers[0].name"]


async def test_not_asked_while_deleting_or_when_nothing_built_changes() -> None:
    answers = Answers(invalid([NAME_CAUSE]))
    check = checker(answers)
    deleting = lws()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await check(deleting, lws()) == []
    assert await check(lws(startupPolicy="LeaderReady"), lws()) == []
    assert answers.calls == []
    assert await check(lws(size=4), lws()) != []


# --- the validating handler ----------------------------------------------------------------


def review(obj: JSON, operation: str = "CREATE", old: JSON | None = None) -> JSON:
    return {"operation": operation, "namespace": "ns", "object": obj, "oldObject": old}


async def test_handler_denies_with_the_check_causes_as_a_422() -> None:
    cause = Cause(
        f"{TEMPLATE}.workerTemplate.spec.containers[0].image",
        "FieldValueRequired",
        "Required value",
    )
    seen: list[tuple[JSON, JSON | None]] = []

    async def check(obj: JSON, old: JSON | None) -> list[Cause]:
        seen.append((obj, old))
        return [cause]

    response = await leaderworkerset_validator(check)(review(lws()))
    assert not response.allowed
    result = response.result
    assert result["code"] == 422 and result["reason"] == "Invalid"
    assert result["details"]["causes"] == [
        {"reason": cause.reason, "message": cause.message, "field": cause.field}
    ]
    assert result["message"] == (
        f'{c.KIND}.{c.GROUP} "web" is invalid: '
        f"{TEMPLATE}.workerTemplate.spec.containers[0].image: Required value"
    )
    await leaderworkerset_validator(check)(review(lws(size=4), "UPDATE", lws()))
    assert seen[0][1] is None and seen[1][1] == lws()


async def test_handler_skips_the_check_for_objects_its_own_rules_refuse() -> None:
    async def check(obj: JSON, old: JSON | None) -> list[Cause]:
        raise AssertionError("not to be asked")

    response = await leaderworkerset_validator(check)(review(lws(size=0)))
    assert not response.allowed
    assert [x["field"] for x in response.result["details"]["causes"]] == [f"{TEMPLATE}.size"]


async def test_handler_allows_when_the_check_finds_nothing() -> None:
    async def check(obj: JSON, old: JSON | None) -> list[Cause]:
        return []

    assert (await leaderworkerset_validator(check)(review(lws()))).allowed
