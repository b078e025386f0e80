"""Whether a Service standing in the way of a group's own is waited out quietly: one
being deleted, or a predecessor's of the same name (not the leader's own, nor a
stranger's)."""

from __future__ import annotations

from typing import Any

from leaderworkerset.controllers.pod.group_service import on_its_way_out, owned_by_leader
from tests.toolkit.pods import leader_pod

JSON = dict[str, Any]
LEADER = leader_pod("lws", 0, "rev")  # lws-0, uid-lws-0


def owned_service(name: str, uid: str, **meta: Any) -> JSON:
    ref = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True}
    return {"metadata": {"name": "lws-0", "ownerReferences": [ref], **meta}}


def test_a_service_being_deleted_is_on_its_way_out_whoever_owns_it() -> None:
    deleting = owned_service("someone", "uid-x", deletionTimestamp="2026-01-01T00:00:00Z")
    assert on_its_way_out(deleting, LEADER)
    assert not on_its_way_out(owned_service("someone", "uid-x"), LEADER)


def test_a_predecessors_service_is_on_its_way_out_the_leaders_own_is_not() -> None:
    assert on_its_way_out(owned_service("lws-0", "uid-old-lws-0"), LEADER)
    own = owned_service("lws-0", "uid-lws-0")
    assert owned_by_leader(own, LEADER) and not on_its_way_out(own, LEADER)
