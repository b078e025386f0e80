"""The effective settings of a LeaderWorkerSet (`api.leaderworkerset.view`): the
defaults an object that skipped defaulting is read with, and the object a view was
read from. (The view kept per cached version: tests/unit/test_caches.py.)"""

from __future__ import annotations

import copy

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from tests.toolkit.lws import leaderworkerset


def test_a_view_carries_the_object_it_was_read_from() -> None:
    lws = leaderworkerset("a", "ns", replicas=2, size=3, metadata={"uid": "u1"})
    view = view_of(lws)
    assert view.obj is lws
    assert (view.name, view.namespace, view.uid, view.replicas, view.size) == (
        "a",
        "ns",
        "u1",
        2,
        3,
    )
    # Equality is about the settings read, not the identity of the object.
    assert view_of(copy.deepcopy(lws)) == view


def test_every_call_reads_the_object_afresh() -> None:
    # Nothing is remembered between calls: a revision applied to the live object keeps
    # its uid and resourceVersion but not its spec, and reads as its own.
    stored = {"uid": "u1", "resourceVersion": "7"}
    lws = leaderworkerset("a", "ns", replicas=2, size=3, metadata=stored)
    assert view_of(lws) is not view_of(lws)
    applied = {**lws, "spec": leaderworkerset(replicas=2, size=9)["spec"]}
    assert view_of(applied).size == 9
    assert view_of(lws).size == 3


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


def test_scheduling_is_the_stored_block_or_none() -> None:
    block = {"schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": {"all": {}}}
    lws = leaderworkerset("a", "ns", size=3, scheduling=copy.deepcopy(block))
    view = view_of(lws)
    assert view.scheduling == block
    # A copy: whoever reads the view cannot change the cached object through it.
    assert view.scheduling is not lws["spec"]["scheduling"]
    view.scheduling["disruptionMode"] = {}
    assert lws["spec"]["scheduling"] == block
    # Present but empty is not absent: a gang of `size` pods.
    assert view_of(leaderworkerset("b", "ns", scheduling={})).scheduling == {}
    assert view_of(leaderworkerset("c", "ns")).scheduling is None
    assert view_of(leaderworkerset("d", "ns", scheduling="gang")).scheduling is None
    assert view_of({"metadata": {"name": "e"}}).scheduling is None
