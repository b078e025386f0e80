"""The DisaggregatedSet validating webhook: upstream's denials, every field named."""

from __future__ import annotations

from typing import Any

from leaderworkerset.webhooks.disaggregatedset import aggregate, validate_disaggregatedset
from tests.toolkit.disaggregatedset import cached_role, ds_object


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
