"""Sets, LeaderWorkerSets and caches for the DisaggregatedSet reconciler's unit tests."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import compute_revision, lws_labels, lws_name
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.controllers.disaggregatedset.caches import DsCaches, build_ds_caches
from tests.toolkit.caches import StaticLister, started

JSON = dict[str, Any]
UID = "set-uid"
WORKER = {"spec": {"containers": [{"name": "main", "image": "pause:1"}]}}


def role(name: str, replicas: int, image: str = "pause:1", **extra: Any) -> JSON:
    worker = copy.deepcopy(WORKER)
    worker["spec"]["containers"][0]["image"] = image
    return {
        "name": name,
        **extra,
        "spec": {
            "replicas": replicas,
            "rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 1}},
            "leaderWorkerTemplate": {"size": 1, "workerTemplate": worker},
        },
    }


def ds_object(*roles: JSON, name: str = "llm", **spec: Any) -> JSON:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {"roles": list(roles), **spec},
    }


def revision_of(obj: JSON) -> str:
    ds, errors = DisaggregatedSet.from_json(obj)
    assert not errors
    return compute_revision(ds.roles)


def lws_object(
    set_name: str,
    revision: str,
    role_name: str,
    replicas: int,
    *,
    ready: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    annotations: dict[str, str] | None = None,
) -> JSON:
    ready = replicas if ready is None else ready
    meta: JSON = {
        "name": lws_name(set_name, 0, revision, role_name),
        "namespace": "ns",
        "labels": lws_labels(set_name, 0, revision, role_name),
        "creationTimestamp": created,
        "ownerReferences": [{"kind": c.KIND, "uid": UID, "controller": True, "name": set_name}],
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": ready},
    }


@contextlib.asynccontextmanager
async def seeded(*objects: JSON) -> AsyncIterator[DsCaches]:
    async with started(build_ds_caches(StaticLister(objects))) as caches:
        yield caches
