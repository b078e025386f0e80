"""When the LWS reconciler skips a server-side apply: only when this process applied the
same body before and the object is untouched since or still holds every member set."""

from __future__ import annotations

from typing import Any

from leaderworkerset.controllers.lws.applied import AppliedObjects, contains, digest
from tests.toolkit.statefulsets import statefulset

JSON = dict[str, Any]
KEY = "statefulsets/default/lws"


def body(replicas: int = 2, **labels: str) -> JSON:
    return statefulset(
        "lws",
        "default",
        api_version="apps/v1",
        kind="StatefulSet",
        labels={"app": "x", **labels},
        replicas=replicas,
        spec={"template": {"spec": {"containers": [{"name": "c"}]}}},
    )


def live(of: JSON, version: str | None = "7", **spec: Any) -> JSON:
    """`of` as the server keeps it: defaults and status added, `spec` members changed."""
    meta = {**of["metadata"], "uid": "uid-1", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if version is not None:
        meta["resourceVersion"] = version
    return {
        **of,
        "metadata": meta,
        "spec": {**of["spec"], "podManagementPolicy": "Parallel", **spec},
        "status": {"replicas": 0},
    }


def applied_once(sent: JSON, answer_version: str | None = "7") -> AppliedObjects:
    applied = AppliedObjects()
    applied.record(KEY, sent, live(sent, answer_version))
    return applied


# --- contains -------------------------------------------------------------------------------


def test_members_only_the_live_object_has_are_ignored() -> None:
    assert contains(
        {"a": 1, "b": {"c": [1, {"d": 2}]}}, {"a": 1, "z": 0, "b": {"c": [1, {"d": 2, "e": 3}]}}
    )


def test_a_missing_or_different_member_is_not_contained() -> None:
    assert not contains({"a": 1, "b": 2}, {"a": 1})
    assert not contains({"a": 1, "b": 2}, {"a": 1, "b": 3})
    assert not contains({"a": {"b": 1}}, {"a": {"b": 2}})


def test_every_member_must_match_not_just_one() -> None:
    assert not contains({"a": 1, "b": 2}, {"a": 1, "b": 9})
    assert not contains({"a": 1, "b": 2}, {"b": 2})


def test_a_member_of_another_shape_is_not_contained() -> None:
    assert not contains({"a": {"b": 1}}, {"a": [1]})
    assert not contains({"a": [1]}, {"a": {"0": 1}})
    assert not contains({"a": 1}, ["a"])


def test_lists_match_element_wise_and_in_length() -> None:
    assert contains([1, {"a": 1}], [1, {"a": 1, "b": 2}])
    assert not contains([1, 2], [1, 2, 3])
    assert not contains([1, 2, 3], [1, 2])
    assert not contains([1, 2], [2, 1])
    assert not contains([1, {"a": 1}], [1, {"a": 2}])
    assert contains([], [])


def test_scalars_compare_by_value() -> None:
    assert contains("x", "x") and contains(None, None) and contains(0, 0)
    assert not contains("x", "y")
    assert not contains(1, "1")


# --- digest ---------------------------------------------------------------------------------


def test_the_digest_ignores_member_order_but_not_values() -> None:
    assert digest({"a": 1, "b": {"c": 2, "d": 3}}) == digest({"b": {"d": 3, "c": 2}, "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert len(digest({})) == 64 and int(digest({}), 16) >= 0


# --- needs_apply ----------------------------------------------------------------------------


def test_an_object_not_yet_created_is_applied_even_if_applied_before() -> None:
    sent = body()
    assert AppliedObjects().needs_apply(KEY, sent, None)
    assert applied_once(sent).needs_apply(KEY, sent, None)


def test_the_first_apply_of_a_process_goes_out_even_over_an_equal_object() -> None:
    """After a restart a member the last process set and this one does not would linger."""
    sent = body()
    assert AppliedObjects().needs_apply(KEY, sent, live(sent))


def test_the_same_body_over_the_object_it_was_answered_with_is_skipped() -> None:
    sent = body()
    assert not applied_once(sent).needs_apply(KEY, sent, live(sent))


def test_the_same_body_with_its_members_in_another_order_is_skipped() -> None:
    sent = body()
    reordered = {k: sent[k] for k in reversed(list(sent))}
    assert not applied_once(sent).needs_apply(KEY, reordered, live(sent))


def test_a_changed_body_is_applied() -> None:
    sent = body(replicas=2)
    assert applied_once(sent).needs_apply(KEY, body(replicas=3), live(sent))
    assert applied_once(sent).needs_apply(KEY, body(replicas=2, tier="a"), live(sent))


def test_an_object_changed_by_others_but_still_holding_our_members_is_skipped() -> None:
    sent = body()
    changed = live(sent, version="8", minReadySeconds=5)
    assert not applied_once(sent).needs_apply(KEY, sent, changed)


def test_an_object_whose_members_were_changed_by_others_is_applied_again() -> None:
    sent = body(replicas=2)
    changed = live(sent, version="8", replicas=5)
    assert applied_once(sent).needs_apply(KEY, sent, changed)


def test_an_untouched_object_is_skipped_even_if_it_does_not_show_our_members() -> None:
    """Same resourceVersion as our apply's answer: nothing was written since, whatever
    the object looks like (e.g. a member the server normalised)."""
    sent = body(replicas=2)
    same_version = live(sent, version="7", replicas=5)
    assert not applied_once(sent).needs_apply(KEY, sent, same_version)


def test_versions_missing_on_both_sides_count_as_the_same_version() -> None:
    sent = body(replicas=2)
    applied = applied_once(sent, answer_version=None)
    assert not applied.needs_apply(KEY, sent, live(sent, version=None, replicas=5))
    assert applied.needs_apply(KEY, sent, live(sent, version="8", replicas=5))


def test_a_version_recorded_as_a_number_matches_its_string() -> None:
    sent = body(replicas=2)
    applied = AppliedObjects()
    answer = live(sent)
    answer["metadata"]["resourceVersion"] = 7
    applied.record(KEY, sent, answer)
    assert not applied.needs_apply(KEY, sent, live(sent, version="7", replicas=5))


def test_what_is_remembered_is_per_object_key() -> None:
    sent = body()
    applied = applied_once(sent)
    assert applied.needs_apply("deployments/default/lws", sent, live(sent))


# --- known and forget -----------------------------------------------------------------------


def test_known_says_whether_this_process_applied_the_object() -> None:
    applied = AppliedObjects()
    assert not applied.known(KEY)
    applied.record(KEY, body(), live(body()))
    assert applied.known(KEY)
    assert not applied.known("deployments/default/lws")


def test_a_forgotten_object_is_unknown_and_applied_again() -> None:
    sent = body()
    applied = applied_once(sent)
    applied.forget(KEY)
    assert not applied.known(KEY)
    assert applied.needs_apply(KEY, sent, live(sent))
    applied.forget(KEY)  # forgetting twice is harmless
    assert not applied.known(KEY)


def test_the_last_record_wins() -> None:
    first, second = body(replicas=2), body(replicas=3)
    applied = applied_once(first)
    applied.record(KEY, second, live(second, version="9"))
    assert applied.needs_apply(KEY, first, live(second, version="9"))
    assert not applied.needs_apply(KEY, second, live(second, version="9"))
