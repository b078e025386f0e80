"""Owner references: every object the controllers create is
controller-owned, with blockOwnerDeletion, so garbage collection (foreground
deletion included) cleans up after a LeaderWorkerSet or a leader pod."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, controller_ref, meta_of


def controller_reference(owner: JSON, api_version: str, kind: str) -> JSON:
    meta = meta_of(owner)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def lws_reference(lws: JSON) -> JSON:
    return controller_reference(lws, c.API_VERSION, c.KIND)


def pod_reference(pod: JSON) -> JSON:
    return controller_reference(pod, "v1", "Pod")


def left_by_predecessor(existing: JSON, proposed: JSON) -> bool:
    """`existing` (in the way of `proposed` by name) is controlled by an owner of the
    same kind and name but another UID: one deleted and made again, whose objects
    await the garbage collector."""
    theirs, ours = controller_ref(existing), controller_ref(proposed)
    return (
        theirs is not None
        and ours is not None
        and theirs.get("kind") == ours.get("kind")
        and theirs.get("name") == ours.get("name")
        and theirs.get("uid") != ours.get("uid")
    )
