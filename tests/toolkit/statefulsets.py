"""The one StatefulSet builder of the test suites, and its presets.

:func:`statefulset` builds the JSON of a StatefulSet from keyword arguments; a facet not
asked for is not in the object (``spec={}`` / ``status={}`` ask for an empty member).
:func:`controller_ref` is the ownerReference of a controlling owner. :func:`worker_sts`
and :func:`leader_sts` are the presets the controller tests share: a group's worker
StatefulSet as the StatefulSet controller leaves it, the leader StatefulSet as the
LeaderWorkerSet controller last applied it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from tests.toolkit.metadata import envelope, object_meta

JSON = dict[str, Any]


def controller_ref(kind: str, name: str | None = None, uid: str | None = None) -> JSON:
    """The ownerReference of a controlling owner; name and uid only when given."""
    ref: JSON = {"kind": kind}
    if name is not None:
        ref["name"] = name
    if uid is not None:
        ref["uid"] = uid
    ref["controller"] = True
    return ref


def statefulset(
    name: str | None = None,
    namespace: str | None = None,
    *,
    api_version: str | None = None,
    kind: str | None = None,
    uid: str | None = None,
    deleted: str | None = None,
    finalizers: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owners: Sequence[JSON] | None = None,
    replicas: int | None = None,
    partition: int | None = None,
    spec: JSON | None = None,
    status: JSON | None = None,
) -> JSON:
    """A StatefulSet. ``owners`` are its ownerReferences; ``replicas`` and ``partition``
    (a RollingUpdate strategy) spec members, ``spec`` more; ``status`` its status."""
    meta = object_meta(
        (("name", name), ("namespace", namespace), ("uid", uid), ("deletionTimestamp", deleted)),
        finalizers=finalizers,
        labels=labels,
        annotations=annotations,
        owners=owners,
    )
    body = envelope(api_version, kind, meta)
    sts_spec: JSON | None = None if spec is None else {}
    if replicas is not None:
        sts_spec = {**(sts_spec or {}), "replicas": replicas}
    if partition is not None:
        strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}
        sts_spec = {**(sts_spec or {}), "updateStrategy": strategy}
    if spec:
        sts_spec = {**(sts_spec or {}), **spec}
    if sts_spec is not None:
        body["spec"] = sts_spec
    if status is not None:
        body["status"] = dict(status)
    return body


# --- presets -------------------------------------------------------------------------------


def worker_sts(lws_name: str, index: int, key: str, size: int = 2, ready: bool = True) -> JSON:
    """The worker StatefulSet of group ``index`` (``size`` pods a group) at template
    revision ``key``, as the StatefulSet controller leaves it: all ready unless not
    ``ready``."""
    name = f"{lws_name}-{index}"
    workers = size - 1
    return statefulset(
        name,
        "default",
        api_version="apps/v1",
        kind="StatefulSet",
        labels={
            c.LABEL_SET_NAME: lws_name,
            c.LABEL_GROUP_INDEX: str(index),
            c.LABEL_GROUP_KEY: f"gk-{name}",
            c.LABEL_TEMPLATE_REVISION_HASH: key,
        },
        replicas=workers,
        status={
            "replicas": workers,
            "readyReplicas": workers if ready else 0,
            "availableReplicas": workers if ready else 0,
            "currentRevision": "",
            "updateRevision": "",
        },
    )


def leader_sts(
    lws_name: str, key: str, replicas: int, partition: int = 0, recorded: int | None = None
) -> JSON:
    """The leader StatefulSet as the controller last applied it."""
    return statefulset(
        lws_name,
        "default",
        api_version="apps/v1",
        kind="StatefulSet",
        labels={c.LABEL_SET_NAME: lws_name, c.LABEL_TEMPLATE_REVISION_HASH: key},
        annotations={c.ANNOTATION_REPLICAS: str(replicas if recorded is None else recorded)},
        replicas=replicas,
        partition=partition,
        status={"replicas": replicas},
    )
