"""Template revisions: snapshot, key, ControllerRevision objects, lookup,
update detection, reconstruction and truncation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import revision_key_of
from leaderworkerset.controllers import revisions as rv
from leaderworkerset.controllers.events import NORMAL
from leaderworkerset.controllers.semantic_json import normalized
from tests.toolkit.lws import lws_object
from tests.toolkit.strategies import lws_objects

JSON = dict[str, Any]


def _lws(**kw: Any) -> JSON:
    return lws_object(name="test-sample", **kw)


def _template(lws: JSON) -> JSON:
    result: JSON = lws["spec"]["leaderWorkerTemplate"]
    return result


def _stored(lws: JSON, number: int = 1, key: str = "") -> JSON:
    """A revision as the API server returns it after creation."""
    rev = rv.new_revision(lws, number, key_override=key)
    rev["metadata"]["uid"] = f"rev-{number}"
    return rev


# --- Key ----------------------------------------------------------------------------------
def test_fnv_and_key_test_vectors() -> None:
    assert rv.fnv1_32(b"") == 2166136261
    assert rv.hash_key(b"") == "65bb57b6b5"
    assert rv.fnv1_32(b'{"spec":{}}') == 2807161848
    assert rv.hash_key(b'{"spec":{}}') == "6d4c5b5d8d"


def test_key_digit_mapping() -> None:
    assert rv.encode_key(1234567890) == "56789bcdf4"


def test_canonical_json_sorts_at_every_depth_and_is_compact() -> None:
    value = {"b": {"z": 1, "a": [{"y": 2, "x": 3}]}, "a": "v"}
    assert rv.canonical_json(value) == b'{"a":"v","b":{"a":[{"x":3,"y":2}],"z":1}}'


def test_canonical_json_escapes_like_go_and_keeps_unicode() -> None:
    out = rv.canonical_json({"cmd": "a<b>&c é \u2028"})
    assert out == '{"cmd":"a\\u003cb\\u003e\\u0026c é \\u2028"}'.encode()


# --- Snapshot -----------------------------------------------------------------------------
def test_snapshot_holds_only_the_template_and_network_config() -> None:
    lws = _lws()
    snap = rv.snapshot(lws)
    assert set(snap) == {"spec"}
    assert set(snap["spec"]) == {"leaderWorkerTemplate", "networkConfig"}
    assert snap["spec"]["leaderWorkerTemplate"]["$patch"] == "replace"
    assert snap["spec"]["networkConfig"] == {"$patch": "replace", "subdomainPolicy": "Shared"}
    assert "$patch" not in _template(lws), "the live object is not modified"


def test_absent_network_config_hashes_like_shared() -> None:
    shared = _lws()
    absent = _lws()
    del absent["spec"]["networkConfig"]
    assert rv.snapshot(absent) == rv.snapshot(shared)
    assert rv.snapshot_key(absent) == rv.snapshot_key(shared)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.update(replicas=7),
        lambda s: s["rolloutStrategy"]["rollingUpdateConfiguration"].update(partition=1),
        lambda s: s.update(startupPolicy=c.STARTUP_POLICY_LEADER_READY),
    ],
)
def test_fields_outside_the_revision_keep_the_key(change: Any) -> None:
    lws = _lws()
    before = rv.snapshot_key(lws)
    change(lws["spec"])
    lws["metadata"]["labels"] = {"team": "a"}
    lws["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "rack"}
    assert rv.snapshot_key(lws) == before


@pytest.mark.parametrize(
    "change",
    [
        lambda t, s: t.update(size=3),
        lambda t, s: t.update(restartPolicy=c.RESTART_POLICY_NONE),
        lambda t, s: t["workerTemplate"]["spec"]["containers"][0].update(image="pause:2"),
        lambda t, s: t.update(leaderTemplate=copy.deepcopy(t["workerTemplate"])),
        lambda t, s: t.update(volumeClaimTemplates=[{"metadata": {"name": "d"}}]),
        lambda t, s: t.update(persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete"}),
        lambda t, s: s.update(networkConfig={"subdomainPolicy": "UniquePerReplica"}),
    ],
)
def test_fields_in_the_revision_change_the_key(change: Any) -> None:
    lws = _lws()
    before = rv.snapshot_key(lws)
    change(_template(lws), lws["spec"])
    assert rv.snapshot_key(lws) != before


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@settings(max_examples=200)
@given(lws_objects())
def test_key_ignores_member_order(lws: JSON) -> None:
    assert rv.snapshot_key(_reordered(lws)) == rv.snapshot_key(lws)


@settings(max_examples=200)
@given(lws_objects(), st.text(min_size=1, max_size=12))
def test_key_changes_iff_the_snapshot_changes(lws: JSON, value: str) -> None:
    key = rv.snapshot_key(lws)
    assert set(key) <= set("456789bcdf") and 1 <= len(key) <= 10
    changed = copy.deepcopy(lws)
    changed["spec"]["replicas"] = 99
    changed["spec"]["startupPolicy"] = c.STARTUP_POLICY_LEADER_READY
    assert rv.snapshot_key(changed) == key
    worker = changed["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    old_value = worker.get("metadata", {}).get("annotations", {}).get("probe")
    worker.setdefault("metadata", {}).setdefault("annotations", {})["probe"] = value
    # A 32-bit hash may collide; the snapshot bytes must differ exactly when content does.
    assert (rv.canonical_json(rv.snapshot(changed)) == rv.canonical_json(rv.snapshot(lws))) == (
        old_value == value
    )
    assert rv.snapshot_key(changed) != key or old_value == value


# --- ControllerRevision objects ---------------------------------------------------------
def test_new_revision_object() -> None:
    lws = _lws()
    rev = rv.new_revision(lws, 3)
    key = rv.snapshot_key(lws)
    assert rev["apiVersion"] == "apps/v1" and rev["kind"] == "ControllerRevision"
    assert rev["metadata"]["name"] == f"test-sample-{key}-3"
    assert rev["metadata"]["namespace"] == "default"
    assert rev["metadata"]["labels"] == {
        c.LABEL_SET_NAME: "test-sample",
        c.LABEL_TEMPLATE_REVISION_HASH: key,
    }
    assert rev["metadata"]["ownerReferences"] == [
        {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "name": "test-sample",
            "uid": "uid-test-sample",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert rev["data"] == rv.snapshot(lws)
    assert rev["revision"] == 3


def test_key_override_changes_the_label_not_the_name() -> None:
    lws = _lws()
    rev = rv.new_revision(lws, 1, key_override="oldkey")
    assert revision_key_of(rev) == "oldkey"
    assert rev["metadata"]["name"] == f"test-sample-{rv.snapshot_key(lws)}-1"


def test_revision_name_cuts_long_owner_names() -> None:
    lws = _lws()
    lws["metadata"]["name"] = "a" * 300
    assert rv.new_revision(lws, 1)["metadata"]["name"].startswith("a" * 220 + "-")


def test_revision_data_accepts_raw_json() -> None:
    rev = {"data": json.dumps({"spec": {}})}
    assert rv.revision_data(rev) == {"spec": {}}


# --- Listing and lookup -----------------------------------------------------------------
def test_owned_revisions_keep_own_and_orphans_only() -> None:
    lws = _lws()
    own = _stored(lws)
    orphan = _stored(lws, 2)
    orphan["metadata"]["ownerReferences"] = []
    foreign = _stored(lws, 3)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    other_lws = _stored(_lws() | {"metadata": {"name": "other", "uid": "uid-test-sample"}}, 4)
    assert rv.owned_revisions(lws, [own, orphan, foreign, other_lws]) == [own, orphan]


def test_find_revision_prefers_the_highest_number_and_ignores_empty_keys() -> None:
    lws = _lws()
    key = rv.snapshot_key(lws)
    revs = [_stored(lws, 1), _stored(lws, 5), _stored(lws, 3)]
    found = rv.find_revision(lws, revs, key)
    assert found is not None and found["revision"] == 5
    assert rv.find_revision(lws, revs, "") is None
    assert rv.find_revision(lws, revs, "nope") is None


def test_next_revision_number() -> None:
    lws = _lws()
    assert rv.next_revision_number(lws, []) == 1
    assert rv.next_revision_number(lws, [_stored(lws, 2), _stored(lws, 7, "other")]) == 8


# --- get_or_create ---------------------------------------------------------------
def _sts_with_key(key: str) -> JSON:
    return {"metadata": {"name": "test-sample", "labels": {c.LABEL_TEMPLATE_REVISION_HASH: key}}}


def test_new_lws_creates_its_first_revision() -> None:
    lws = _lws()
    choice = rv.current_revision(lws, None, [])
    key = rv.snapshot_key(lws)
    assert choice.create
    assert revision_key_of(choice.revision) == key and choice.revision["revision"] == 1
    assert choice.event is not None and choice.event.type == NORMAL
    assert choice.event.reason == "CreatingRevision" and choice.event.action == "Create"
    assert choice.event.note == (
        f"Creating revision with key {key} for a newly created LeaderWorkerSet"
    )
    assert choice.event.related is not None
    assert choice.event.related["name"] == choice.revision["metadata"]["name"]


def test_existing_revision_of_the_statefulset_key_is_used() -> None:
    lws = _lws()
    old = _stored(lws, 1)
    _template(lws)["size"] = 5
    choice = rv.current_revision(lws, _sts_with_key(revision_key_of(old)), [old])
    assert not choice.create and choice.revision is old and choice.event is None


def test_missing_revision_is_recreated_under_the_statefulset_key_without_a_rollout() -> None:
    """A controller upgrade finds a leader sts whose key has no revision."""
    lws = _lws()
    choice = rv.current_revision(lws, _sts_with_key("legacy"), [])
    assert choice.create and revision_key_of(choice.revision) == "legacy"
    assert choice.revision["data"] == rv.snapshot(lws)
    assert choice.event is not None and choice.event.note == (
        "Creating missing revision with key legacy for existing LeaderWorkerSet"
    )
    sts = _sts_with_key("legacy")
    assert rv.detect_update(lws, sts, choice.revision, [choice.revision]) is None


def test_missing_leader_statefulset_reuses_the_revision_of_the_same_content() -> None:
    """No duplicate revision per reconcile while the sts is missing, unlike upstream
    (see docs/upstream-deviations.md#no-duplicate-revisions)."""
    lws = _lws()
    first = rv.current_revision(lws, None, [])
    stored = [_stored(lws, first.revision["revision"])]
    again = rv.current_revision(lws, None, stored)
    assert not again.create and again.revision is stored[0] and again.event is None


def test_missing_leader_statefulset_does_not_reuse_a_colliding_revision() -> None:
    lws = _lws()
    impostor = _stored(lws, 1)
    impostor["data"]["spec"]["leaderWorkerTemplate"]["size"] = 9
    choice = rv.current_revision(lws, None, [impostor])
    assert choice.create and choice.revision["revision"] == 2


# --- detect_update -----------------------------------------------------------------
def test_no_update_without_a_leader_statefulset() -> None:
    lws = _lws()
    assert rv.detect_update(lws, None, None, []) is None


def test_no_update_while_the_spec_matches() -> None:
    lws = _lws()
    rev = _stored(lws)
    assert rv.detect_update(lws, _sts_with_key(revision_key_of(rev)), rev, [rev]) is None


def test_template_change_proposes_the_next_revision() -> None:
    lws = _lws()
    rev = _stored(lws, 4)
    _template(lws)["workerTemplate"]["spec"]["containers"][0]["name"] = "renamed"
    proposed = rv.detect_update(lws, _sts_with_key(revision_key_of(rev)), rev, [rev])
    assert proposed is not None
    assert proposed["revision"] == 5
    assert revision_key_of(proposed) == rv.snapshot_key(lws) != revision_key_of(rev)


def test_serialization_drift_is_not_an_update() -> None:
    """Go writes creationTimestamp null and empty structs into pod templates,
    and canonical quantities."""
    lws = _lws()
    container = _template(lws)["workerTemplate"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": 0.5, "memory": "1Gi"}}
    rev = _stored(lws)
    go_template = rev["data"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    go_template["metadata"] = {"creationTimestamp": None}
    go_container = go_template["spec"]["containers"][0]
    go_container["resources"] = {"requests": {"cpu": "500m", "memory": "1024Mi"}, "limits": {}}
    go_container["securityContext"] = {}
    assert not rv.equal(rv.new_revision(lws, 2), rev)
    assert rv.detect_update(lws, _sts_with_key("k"), rev, [rev]) is None


def test_drift_with_a_real_change_is_an_update() -> None:
    lws = _lws()
    rev = _stored(lws)
    go_template = rev["data"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    go_template["metadata"] = {"creationTimestamp": None}
    go_template["spec"]["containers"][0]["name"] = "old-name"
    assert rv.detect_update(lws, _sts_with_key("k"), rev, [rev]) is not None


def test_quantity_changes_are_updates() -> None:
    lws = _lws()
    container = _template(lws)["workerTemplate"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"cpu": "1"}}
    rev = _stored(lws)
    container["resources"] = {"limits": {"cpu": "1001m"}}
    assert rv.detect_update(lws, _sts_with_key("k"), rev, [rev]) is not None


def test_normalized_drops_nulls_and_empty_containers_but_keeps_zero_values() -> None:
    value: JSON = {
        "a": None,
        "b": {},
        "c": [],
        "d": {"e": {"f": None}},
        "g": 0,
        "h": "",
        "i": False,
    }
    assert normalized(value) == {"g": 0, "h": "", "i": False}
    assert normalized({"l": [{}, None]}) == {"l": [{}, None]}


@pytest.mark.parametrize(
    ("a", "b"),
    [("500m", 0.5), ("1k", "1e3"), (1, "1000m"), ("1Gi", "1024Mi"), ("2", 2), ("+1", "1")],
)
def test_quantities_compare_by_value(a: Any, b: Any) -> None:
    assert normalized({"limits": {"cpu": a}}) == normalized({"limits": {"cpu": b}})


def test_non_quantities_under_resource_maps_are_kept() -> None:
    assert normalized({"requests": {"x": "not a quantity"}}) == {
        "requests": {"x": "not a quantity"}
    }
    assert normalized({"limits": {"cpu": "1"}}) != normalized({"limits": {"cpu": "2"}})


@settings(max_examples=200)
@given(lws_objects())
def test_a_revision_is_semantically_equal_to_its_own_spec(lws: JSON) -> None:
    rev = rv.new_revision(lws, 1)
    assert rv.semantically_equal(lws, rv.new_revision(lws, 2), rev)
    assert rv.detect_update(lws, _sts_with_key("k"), rev, [rev]) is None


# --- apply_revision ---------------------------------------------------------------
def test_apply_revision_replaces_the_template_and_network_wholesale() -> None:
    old = _lws()
    _template(old)["subGroupPolicy"] = {"subGroupSize": 1}
    rev = _stored(old)
    live = _lws(replicas=9)
    _template(live)["size"] = 4
    _template(live)["leaderTemplate"] = {"spec": {"containers": [{"name": "l"}]}}
    live["spec"]["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    live["metadata"]["labels"] = {"x": "y"}

    result = rv.apply_revision(live, rev)
    assert result["spec"]["leaderWorkerTemplate"] == _template(old)
    assert result["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert result["spec"]["replicas"] == 9
    assert result["metadata"]["labels"] == {"x": "y"}
    assert _template(live)["size"] == 4, "the live object is not modified"


def test_apply_revision_keeps_live_members_the_revision_lacks() -> None:
    live = _lws()
    live["spec"]["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    legacy = {"data": {"spec": {"leaderWorkerTemplate": {"$patch": "replace", "size": 3}}}}
    result = rv.apply_revision(live, legacy)
    assert result["spec"]["leaderWorkerTemplate"] == {"size": 3}
    assert result["spec"]["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}


# --- Truncation and repeated changes -------------------------------------
def test_revisions_to_delete_keeps_only_the_current_key() -> None:
    lws = _lws()
    first = _stored(lws, 1)
    _template(lws)["size"] = 3
    second = _stored(lws, 2)
    foreign = _stored(lws, 3)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "other"
    assert rv.revisions_to_delete(lws, [first, second, foreign], revision_key_of(second)) == [first]


def test_each_template_change_adds_a_revision_and_truncation_leaves_the_last() -> None:
    lws = _lws()
    stored: list[JSON] = []
    choice = rv.current_revision(lws, None, stored)
    stored.append(choice.revision)
    sts = _sts_with_key(revision_key_of(choice.revision))
    current = choice.revision
    for size in (3, 4):
        _template(lws)["size"] = size
        proposed = rv.detect_update(lws, sts, current, stored)
        assert proposed is not None
        stored.append(proposed)
        current = proposed
        sts = _sts_with_key(revision_key_of(proposed))
    assert [r["revision"] for r in stored] == [1, 2, 3]
    doomed = rv.revisions_to_delete(lws, stored, revision_key_of(current))
    assert [r["revision"] for r in doomed] == [1, 2]
