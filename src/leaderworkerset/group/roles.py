"""What a pod is within a LeaderWorkerSet, read from the labels the pod webhook
writes: one function per question, so that "leader" means the same thing to the
webhooks, the reconcilers and the event sources."""

from __future__ import annotations

from collections.abc import Iterable

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, labels_of


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


def leaders(pods: Iterable[JSON]) -> list[JSON]:
    return [p for p in pods if is_leader(p)]
