"""The effective settings of a LeaderWorkerSet (`group.view`): the defaults an object
that skipped defaulting is read with, and the views kept per stored version."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.group.view import view_of
from tests.toolkit.lws import leaderworkerset


def stored(name: str, uid: str, version: str) -> JSON:
    return leaderworkerset(name, "ns", metadata={"uid": uid, "resourceVersion": version})


def test_a_stored_leaderworkerset_is_decoded_once_per_version() -> None:
    stored = {"uid": "u1", "resourceVersion": "7"}
    lws = leaderworkerset("a", "ns", replicas=2, size=3, metadata=stored)
    first = view_of(lws)
    assert view_of(lws) is first
    changed = {**lws, "metadata": {**lws["metadata"], "resourceVersion": "8"}}
    changed["spec"] = leaderworkerset(replicas=5, size=3)["spec"]
    assert view_of(changed).replicas == 5
    # Partial on purpose: never stored, so without the uid and resourceVersion a view
    # is remembered by.
    unstored = {"metadata": {"name": "a"}, "spec": {"replicas": 1}}
    assert view_of(unstored) is not view_of(unstored)
    # A revision applied to the live object keeps its uid and resourceVersion but not
    # its spec: its view is its own.
    applied = {**lws, "spec": leaderworkerset(replicas=2, size=9)["spec"]}
    assert view_of(applied).size == 9
    assert view_of(lws).size == 3


def test_views_are_kept_per_object_and_version_side_by_side() -> None:
    # Same version of two objects, two versions of one object: each keeps its own view
    # while the others are read in between.
    a, b = stored("a", "uid-a", "7"), stored("b", "uid-b", "7")
    a_later = stored("a", "uid-a", "8")
    views = [view_of(a), view_of(b), view_of(a_later)]
    for _ in range(2):
        assert [view_of(a), view_of(b), view_of(a_later)] == views
        assert all(view_of(o) is v for o, v in zip((a, b, a_later), views, strict=True))


def test_the_last_512_views_are_kept_and_the_least_recently_read_goes_first() -> None:
    objects = [stored(f"lws-{i}", f"uid-keep-{i}", "1") for i in range(513)]
    views = [view_of(o) for o in objects[:512]]
    # 512 read since: whatever was kept before has gone, and all of these stay.
    assert view_of(objects[0]) is views[0]
    # objects[0] was just read, so objects[1] is now the least recently read.
    newest = view_of(objects[512])
    assert view_of(objects[512]) is newest
    assert view_of(objects[0]) is views[0]
    assert view_of(objects[1]) is not views[1]


def test_an_object_that_skipped_defaulting_reads_with_the_schema_defaults() -> None:
    view = view_of({"metadata": {"name": "bare"}})
    assert (view.name, view.namespace, view.uid, view.generation) == ("bare", "", "", 0)
    assert (view.labels, view.annotations) == ({}, {})
    assert (view.replicas, view.size, view.partition) == (1, 1, 0)
    assert (view.max_unavailable, view.max_surge) == (1, 0)
    assert view.rollout_type == c.ROLLOUT_STRATEGY_ROLLING_UPDATE
    assert view.startup_policy == c.STARTUP_POLICY_LEADER_CREATED
    assert view.subdomain_policy == c.SUBDOMAIN_POLICY_SHARED
    assert view.replacement_policy == c.GROUP_REPLACEMENT_POST_TERMINATION
    assert not view.hash_mode and not view.replaces_immediately
    assert view.leader_template() == {} and view.worker_template() == {}


def test_an_object_not_named_yet_reads_with_an_empty_name() -> None:
    # As a manifest with generateName only is, before the API server names it.
    view = view_of({"metadata": {"generateName": "lws-"}, "spec": {"replicas": 2}})
    assert (view.name, view.replicas) == ("", 2)


def test_a_spec_with_members_left_out_reads_them_as_defaults() -> None:
    lws = leaderworkerset(rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": 2}})
    del lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]
    view = view_of(lws)
    assert (view.replicas, view.size) == (c.DEFAULT_REPLICAS, c.DEFAULT_SIZE)
    # A strategy without a type is still a rolling update.
    assert view.rollout_type == c.ROLLOUT_STRATEGY_ROLLING_UPDATE
    assert (view.max_surge, view.max_unavailable) == (2, 1)


def test_an_absent_annotation_reads_empty() -> None:
    view = view_of(leaderworkerset(metadata={"annotations": {"a": "1"}}))
    assert view.annotation("a") == "1"
    assert view.annotation(c.ANNOTATION_EXCLUSIVE_TOPOLOGY) == ""


def test_the_templates_handed_out_are_copies_the_caller_may_change() -> None:
    view = view_of(leaderworkerset())
    worker = view.worker_template()
    worker["spec"]["containers"][0]["image"] = "changed"
    leader = view.leader_template()
    leader["spec"]["containers"].append({"name": "extra"})
    assert view.worker_template()["spec"]["containers"] == [
        {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    ]
    assert (
        view.leader_template()["spec"]["containers"] == view.worker_template()["spec"]["containers"]
    )
