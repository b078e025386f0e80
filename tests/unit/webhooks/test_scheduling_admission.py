"""The validating LeaderWorkerSet webhook judges spec.scheduling by what the controller
serves (ControllerOptions.scheduling), and words a refusal like every other one."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.webhooks.admission import leaderworkerset_validator, register_webhooks
from leaderworkerset.webhooks.leaderworkerset import VALIDATING_PATH, validate_object
from tests.toolkit.caches import seeded_caches
from tests.toolkit.lws import defaulted_json, leaderworkerset

JSON = dict[str, Any]
KUBERNETES = SchedulingSupport(provider="kubernetes", feature_gate=True)


def scheduled(scheduling: JSON, size: int = 3) -> JSON:
    return defaulted_json(leaderworkerset("inference", "ns", size=size, scheduling=scheduling))


def review(obj: JSON, operation: str = "CREATE", old: JSON | None = None) -> JSON:
    request: JSON = {"uid": "u", "operation": operation, "namespace": "ns", "object": obj}
    if old is not None:
        request["oldObject"] = old
    return request


def answer(validate: Any, request: JSON) -> JSON:
    response: JSON = asyncio.run(validate(request)).to_json("u")
    return response


def test_a_refusal_names_the_field_and_upstreams_message() -> None:
    validate = leaderworkerset_validator(scheduling=KUBERNETES)
    response = answer(validate, review(scheduled({"schedulingPolicy": {"gang": {"minCount": 2}}})))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == (
        'LeaderWorkerSet.leaderworkerset.x-k8s.io "inference" is invalid: '
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 2: "
        "must equal leaderWorkerTemplate.size"
    )
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        (
            "spec.scheduling.schedulingPolicy.gang.minCount",
            "Invalid value: 2: must equal leaderWorkerTemplate.size",
        )
    ]
    ok = scheduled({"schedulingPolicy": {"gang": {"minCount": 3}}})
    assert answer(validate, review(ok))["allowed"] is True


def test_without_support_the_webhook_refuses_scheduling_only() -> None:
    validate = leaderworkerset_validator()
    refused = answer(validate, review(scheduled({})))
    assert refused["allowed"] is False
    assert [(c["field"], c["reason"]) for c in refused["status"]["details"]["causes"]] == [
        ("spec.scheduling", "FieldValueForbidden"),
        ("spec.scheduling", "FieldValueRequired"),
    ]
    plain = defaulted_json(leaderworkerset("plain", "ns"))
    assert answer(validate, review(plain))["allowed"] is True


def test_removal_is_refused_on_update() -> None:
    old = scheduled({})
    new = copy.deepcopy(old)
    del new["spec"]["scheduling"]
    verdict = validate_object("UPDATE", new, old, scheduling=KUBERNETES)
    assert not verdict.allowed
    assert [str(c) for c in verdict.causes] == [
        "spec.scheduling: Forbidden: cannot remove scheduling after creation"
    ]
    assert validate_object("UPDATE", old, old, scheduling=KUBERNETES).allowed


def test_controller_options_default_to_no_scheduling_support() -> None:
    assert ControllerOptions().scheduling == SchedulingSupport()
    assert not ControllerOptions().scheduling.kubernetes


class _RecordingServer:
    """What register_webhooks needs of a WebhookServer, recording the handlers."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def register(self, path: str, handler: Any, **_: Any) -> None:
        self.handlers[path] = handler

    def on_manager_loop(self, fn: Any) -> Any:
        return fn

    def register_conversion(self) -> None:
        pass


async def test_register_webhooks_hands_the_options_support_to_the_validator() -> None:
    obj = scheduled({"disruptionMode": {"all": {}}})
    for support, allowed in ((KUBERNETES, True), (SchedulingSupport(), False)):
        server = _RecordingServer()
        async with seeded_caches() as caches:
            register_webhooks(server, caches, ControllerOptions(scheduling=support))  # type: ignore[arg-type]
        response = await server.handlers[VALIDATING_PATH](review(obj))
        assert response.to_json("u")["allowed"] is allowed
