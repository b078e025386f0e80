"""The one Pod builder of the test suites, and its presets.

:func:`pod` builds the JSON of a Pod from keyword arguments, one a facet of the pod. A
facet not asked for is not in the object: no default labels, containers, node or status,
so a test's pod holds exactly what the test says (``spec={}`` / ``status={}`` ask for an
empty member). :func:`lws_labels` spells a pod's LeaderWorkerSet labels, :func:`container`
one container. :func:`leader_pod` and :func:`unadmitted_leader` are the presets the
controller tests share; :func:`pod_manifest` is what integration tests run on the node
simulator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from tests.toolkit.metadata import envelope, object_meta

JSON = dict[str, Any]
NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:01:00Z"
PAUSE = "registry.k8s.io/pause:3.10"


def lws_labels(
    set_name: str | None = None,
    *,
    group_index: str | None = None,
    group_key: str | None = None,
    worker: str | None = None,
    revision: str | None = None,
    subgroup: str | None = None,
) -> dict[str, str]:
    """The LeaderWorkerSet labels of a pod, those given only."""
    labels = {
        c.LABEL_SET_NAME: set_name,
        c.LABEL_GROUP_INDEX: group_index,
        c.LABEL_GROUP_KEY: group_key,
        c.LABEL_WORKER_INDEX: worker,
        c.LABEL_TEMPLATE_REVISION_HASH: revision,
        c.LABEL_SUBGROUP_INDEX: subgroup,
    }
    return {k: v for k, v in labels.items() if v is not None}


def container(name: str = "c", image: str | None = None, **members: Any) -> JSON:
    """A container; ``image`` only when given, keyword arguments are more members
    (resources, ports, env, ...)."""
    out: JSON = {"name": name}
    if image is not None:
        out["image"] = image
    out.update(members)
    return out


def pod(
    name: str | None = None,
    namespace: str | None = None,
    *,
    api_version: str | None = None,
    kind: str | None = None,
    generate_name: str | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    created: str | None = None,
    deleted: str | None = None,
    grace: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owners: Sequence[JSON] | None = None,
    containers: Sequence[JSON] | None = None,
    init_containers: Sequence[JSON] | None = None,
    node: str | None = None,
    gates: Sequence[str] | None = None,
    spec: JSON | None = None,
    phase: str | None = None,
    ready: bool | None = None,
    ready_since: str | None = None,
    container_statuses: Sequence[JSON] | None = None,
    status: JSON | None = None,
) -> JSON:
    """A Pod. Metadata: ``created`` / ``deleted`` are the creation / deletion timestamps,
    ``grace`` the deletionGracePeriodSeconds, ``owners`` the ownerReferences. Spec:
    ``node`` the nodeName, ``gates`` the names of its scheduling gates, ``spec`` more
    members. Status: ``ready`` a Ready condition (True or False; ``ready_since`` its
    lastTransitionTime), ``status`` more members."""
    meta = object_meta(
        (
            ("name", name),
            ("generateName", generate_name),
            ("namespace", namespace),
            ("uid", uid),
            ("resourceVersion", resource_version),
            ("creationTimestamp", created),
            ("deletionTimestamp", deleted),
            ("deletionGracePeriodSeconds", grace),
        ),
        labels=labels,
        annotations=annotations,
        owners=owners,
    )
    body = envelope(api_version, kind, meta)

    pod_spec: JSON | None = None if spec is None else {}
    for key, value in (
        ("containers", None if containers is None else [dict(x) for x in containers]),
        ("initContainers", None if init_containers is None else [dict(x) for x in init_containers]),
        ("nodeName", node),
        ("schedulingGates", None if gates is None else [{"name": gate} for gate in gates]),
    ):
        if value is not None:
            pod_spec = pod_spec if pod_spec is not None else {}
            pod_spec[key] = value
    if spec:
        pod_spec = {**(pod_spec or {}), **spec}
    if pod_spec is not None:
        body["spec"] = pod_spec

    pod_status: JSON | None = None if status is None else {}
    if phase is not None:
        pod_status = {"phase": phase}
    if ready is not None:
        condition: JSON = {"type": "Ready", "status": "True" if ready else "False"}
        if ready_since is not None:
            condition["lastTransitionTime"] = ready_since
        pod_status = {**(pod_status or {}), "conditions": [condition]}
    if container_statuses is not None:
        statuses = [dict(x) for x in container_statuses]
        pod_status = {**(pod_status or {}), "containerStatuses": statuses}
    if status:
        pod_status = {**(pod_status or {}), **status}
    if pod_status is not None:
        body["status"] = pod_status
    return body


# --- presets -------------------------------------------------------------------------------


def leader_pod(
    lws_name: str,
    index: int | str,
    key: str,
    ready: bool = True,
    name: str | None = None,
    terminating: bool = False,
    phase: str | None = None,
) -> JSON:
    """The leader of group ``index`` of LeaderWorkerSet ``lws_name`` at template revision
    ``key``, as the controllers read it from their cache: Running and Ready unless not
    ``ready``."""
    pod_name = name if name is not None else f"{lws_name}-{index}"
    return pod(
        pod_name,
        "default",
        api_version="v1",
        kind="Pod",
        uid=f"uid-{pod_name}",
        deleted=NOW if terminating else None,
        labels=lws_labels(
            lws_name, worker="0", group_index=str(index), group_key=f"gk-{pod_name}", revision=key
        ),
        containers=[container("c", "pause:1")],
        phase=phase or ("Running" if ready else "Pending"),
        ready=ready,
    )


def unadmitted_leader() -> JSON:
    """A leader of LeaderWorkerSet "lws" (2 pods a group) as its ReplicaSet makes it,
    before the webhook has admitted it."""
    return pod(
        generate_name="lws-abc-",
        labels=lws_labels("lws", worker="0"),
        annotations={c.ANNOTATION_SIZE: "2"},
        containers=[container("c")],
    )


def pod_manifest(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    containers: int = 1,
    requests: Mapping[str, str] | None = None,
    **spec: Any,
) -> JSON:
    """What integration tests run on the node simulator: ``containers`` pause containers
    asking for ``requests``; keyword arguments are spec members."""
    return pod(
        name,
        api_version="v1",
        kind="Pod",
        labels=labels or {},
        annotations=annotations or {},
        containers=[
            container(f"c{i}", PAUSE, resources={"requests": dict(requests)} if requests else {})
            for i in range(containers)
        ],
        spec=spec,
    )


# What `kubectl lws` tests read: pods of LeaderWorkerSet "web" in namespace "ns", their
# timestamps so many seconds before WEB_NOW.
WEB_NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def web_stamp(seconds_ago: float) -> str:
    return (WEB_NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def web_pod(
    name: str,
    *,
    key: str = "",
    worker: int = 0,
    node: str = "n1",
    phase: str = "Running",
    ready: bool = True,
    created: float = 100,
    ready_for: float | None = None,
    restarts: int = 0,
    cost: str | None = None,
    gated: bool = False,
    deleting: float | None = None,
    revision: str = "r1",
    size: int = 2,
) -> JSON:
    """A pod of "web" (group `key`, else its own name) as `kubectl lws` reads it: Running
    and Ready on n1 unless told otherwise; ages in seconds before WEB_NOW."""
    annotations = {c.ANNOTATION_SIZE: str(size)}
    if cost is not None:
        annotations["controller.kubernetes.io/pod-deletion-cost"] = cost
    if gated:
        phase, ready = "Pending", False
    return pod(
        name,
        "ns",
        uid=f"uid-{name}",
        created=web_stamp(created),
        deleted=web_stamp(deleting) if deleting is not None else None,
        labels=lws_labels(
            "web",
            group_index=key or name,
            group_key=key or name,
            worker=str(worker),
            revision=revision,
        ),
        annotations=annotations,
        containers=[container("main")],
        node=node if node and not gated else None,
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        phase=phase,
        ready=ready,
        ready_since=web_stamp(created if ready_for is None else ready_for) if ready else None,
        container_statuses=[{"name": "main", "ready": ready, "restartCount": restarts}],
    )
