"""What a pod is within a LeaderWorkerSet, read from the labels the pod webhook
writes and the annotations its template carries: one function per question, so that
"leader" or "the group's size" means the same thing to the webhooks, the reconcilers,
the event sources and the plugin."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, overload

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, annotations_of, labels_of

if TYPE_CHECKING:
    from leaderworkerset.api.leaderworkerset.view import LwsView


def worker_index(pod: JSON) -> str | None:
    """The worker-index label as written ("0" for the leader); None when absent."""
    value = labels_of(pod).get(c.LABEL_WORKER_INDEX)
    return None if value is None else str(value)


def is_leader(pod: JSON) -> bool:
    return worker_index(pod) == c.LEADER_WORKER_INDEX


def is_worker(pod: JSON) -> bool:
    index = worker_index(pod)
    return index is not None and index != c.LEADER_WORKER_INDEX


def group_index(pod: JSON) -> str | None:
    """The group-index label: the ordinal in Ordinal mode, the group key in Hash mode."""
    value = labels_of(pod).get(c.LABEL_GROUP_INDEX)
    return None if value is None else str(value)


def group_key(pod: JSON) -> str | None:
    value = labels_of(pod).get(c.LABEL_GROUP_KEY)
    return None if value is None else str(value)


def lws_name(pod: JSON) -> str | None:
    """The name of the LeaderWorkerSet the object belongs to, from its name label."""
    value = labels_of(pod).get(c.LABEL_SET_NAME)
    return None if value is None else str(value)


@overload
def group_size(pod: JSON | None, live: LwsView) -> int: ...
@overload
def group_size(pod: JSON | None, live: None = None) -> int | None: ...
def group_size(pod: JSON | None, live: LwsView | None = None) -> int | None:
    """The size of the group `pod` belongs to, as its size annotation records it: the
    size of the revision the pod was built from, which during a size-changing rollout
    differs from the live spec's, and a group of the old size must still be complete
    when it is. When the annotation is absent or not a number (the pod webhook refuses
    a group pod without one, with Go's error text, so only a foreign pod lacks it):
    the live spec's size if `live` is given, else None (unknown). The pod reconciler
    asks this in Hash mode only: its Ordinal groups follow the live spec, as upstream's."""
    try:
        return int(annotations_of(pod)[c.ANNOTATION_SIZE])
    except (KeyError, TypeError, ValueError):
        return None if live is None else live.size


def leaders(pods: Iterable[JSON]) -> list[JSON]:
    return [p for p in pods if is_leader(p)]
