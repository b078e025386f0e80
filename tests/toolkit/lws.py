"""The one LeaderWorkerSet builder of the test suites, and its presets.

:func:`leaderworkerset` builds the JSON of a LeaderWorkerSet; every suite calls it,
directly or through a preset that names a shape the tests keep using:
:func:`lws_json` (a minimal object, as a user writes it), :func:`lws_object` (as the
defaulting webhook leaves it, as the controllers read it from their cache) and
:func:`lws_manifest` / :func:`hash_lws` (what integration tests create on a cluster).
"""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as ds_c
from leaderworkerset.api.disaggregatedset import names as ds_names
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.defaults import default_leaderworkerset
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet

JSON = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"
CONTAINER = {"name": "c", "image": PAUSE}
DS_UID = "set-uid"  # the uid of tests.toolkit.disaggregatedset.ds_object


def leaderworkerset(
    name: str = "lws",
    namespace: str = "default",
    *,
    replicas: int = 2,
    size: int = 2,
    container: JSON | None = None,
    pod_spec: JSON | None = None,
    template: JSON | None = None,
    metadata: JSON | None = None,
    **spec: Any,
) -> JSON:
    """A LeaderWorkerSet whose worker template runs one ``container`` (a pause container
    named "c" unless given). ``pod_spec`` adds members to the worker pod spec,
    ``template`` to the leaderWorkerTemplate (e.g. restartPolicy), ``metadata`` to the
    object's metadata (e.g. uid, generation); keyword arguments are spec members and
    replace the builder's own (replicas, leaderWorkerTemplate)."""
    worker_spec: JSON = {"containers": [copy.deepcopy(container or CONTAINER)]}
    worker_spec.update(copy.deepcopy(pod_spec or {}))
    lwt: JSON = {"size": size, **copy.deepcopy(template or {})}
    lwt["workerTemplate"] = {"spec": worker_spec}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace, **copy.deepcopy(metadata or {})},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt, **spec},
    }


# --- presets -------------------------------------------------------------------------------


def lws_json(name: str = "test-sample", **spec: Any) -> JSON:
    """A minimal valid object, as a user writes it; keyword arguments are spec members."""
    return leaderworkerset(name, **spec)


def lws_object(
    name: str = "lws",
    replicas: int = 2,
    size: int = 2,
    partition: int | None = None,
    max_unavailable: int | str | None = None,
    max_surge: int | str | None = None,
    generation: int = 1,
    **spec: Any,
) -> JSON:
    """The object as the defaulting webhook leaves it (every policy spelled out), with
    the uid and generation the controllers read from their cache."""
    config: JSON = {}
    if partition is not None:
        config["partition"] = partition
    if max_unavailable is not None:
        config["maxUnavailable"] = max_unavailable
    if max_surge is not None:
        config["maxSurge"] = max_surge
    defaulted_spec: JSON = {
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": config},
        "startupPolicy": c.STARTUP_POLICY_LEADER_CREATED,
        "networkConfig": {"subdomainPolicy": c.SUBDOMAIN_POLICY_SHARED},
    }
    return leaderworkerset(
        name,
        replicas=replicas,
        size=size,
        container={"name": "c", "image": "pause:1"},
        template={"restartPolicy": c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART},
        metadata={"uid": f"uid-{name}", "generation": generation},
        **{**defaulted_spec, **spec},
    )


def lws_manifest(
    name: str,
    namespace: str,
    *,
    replicas: int = 2,
    size: int = 2,
    cpu: str = "10m",
    **spec: Any,
) -> JSON:
    """What integration tests create: pause containers asking for a little CPU (the
    simulated nodes schedule by requests), quick to terminate."""
    return leaderworkerset(
        name,
        namespace,
        replicas=replicas,
        size=size,
        container={"name": "main", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}},
        pod_spec={"terminationGracePeriodSeconds": 5},
        **spec,
    )


def hash_lws(name: str, namespace: str, **kwargs: Any) -> JSON:
    return lws_manifest(name, namespace, groupIdentity=c.GROUP_IDENTITY_HASH, **kwargs)


def ds_owned_lws(
    set_name: str,
    revision: str,
    role_name: str,
    replicas: int,
    *,
    ready: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    annotations: dict[str, str] | None = None,
) -> JSON:
    """A LeaderWorkerSet of a DisaggregatedSet's role (slice 0), as the DisaggregatedSet
    controller reads it from its cache: named and labelled after the set, owned by it (its
    uid :data:`tests.toolkit.disaggregatedset.UID`), replicas and readiness alone."""
    ready = replicas if ready is None else ready
    meta: JSON = {
        "name": ds_names.lws_name(set_name, 0, revision, role_name),
        "namespace": "ns",
        "labels": ds_names.lws_labels(set_name, 0, revision, role_name),
        "creationTimestamp": created,
        "ownerReferences": [
            {"kind": ds_c.KIND, "uid": DS_UID, "controller": True, "name": set_name}
        ],
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": meta,
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": ready},
    }


def web_hash_lws(**spec: Any) -> JSON:
    """The Hash-mode LeaderWorkerSet "web" (3 groups of 2) `kubectl lws` tests read;
    keyword arguments replace its spec members."""
    ours = {
        "replicas": 3,
        "groupIdentity": c.GROUP_IDENTITY_HASH,
        "leaderWorkerTemplate": {"size": 2},
    }
    return leaderworkerset("web", "ns", metadata={"uid": "uid-web"}, **{**ours, **spec})


# --- reading and changing one ---------------------------------------------------------------


def decoded(data: JSON) -> LeaderWorkerSet:
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == [], errors
    return lws


def defaulted(data: JSON) -> LeaderWorkerSet:
    return default_leaderworkerset(decoded(data))


def defaulted_json(data: JSON) -> JSON:
    """The object as the mutating webhook and the API server store it."""
    stored: JSON = defaulted(data).to_json()
    return stored


def template(data: JSON) -> JSON:
    result: JSON = data["spec"]["leaderWorkerTemplate"]
    return result


def rolling(data: JSON, **config: Any) -> JSON:
    data["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": config,
    }
    return data
