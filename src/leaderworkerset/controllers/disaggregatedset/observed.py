"""What the decisions read of a cached LeaderWorkerSet (`rollout.ObservedLWS`)."""

from __future__ import annotations

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import initial_replicas
from leaderworkerset.api.objects import JSON, annotations_of, labels_of, meta_of
from leaderworkerset.controllers.disaggregatedset.rollout import ObservedLWS


def observed_lws(lws: JSON) -> ObservedLWS:
    meta = meta_of(lws)
    labels = labels_of(lws)
    replicas = (lws.get("spec") or {}).get("replicas")
    status = lws.get("status") or {}
    return ObservedLWS(
        name=str(meta.get("name", "")),
        role=str(labels.get(c.LABEL_ROLE, "")),
        revision=str(labels.get(c.LABEL_REVISION, "")),
        replicas=replicas if isinstance(replicas, int) else None,
        ready_replicas=int(status.get("readyReplicas") or 0),
        initial_replicas=initial_replicas(annotations_of(lws)),
        created=meta.get("creationTimestamp"),
        slice=labels.get(c.LABEL_SLICE),
    )
