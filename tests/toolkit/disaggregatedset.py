"""The one DisaggregatedSet builder of the test suites, and the waits of the integration
tests.

:func:`role` builds a role and :func:`disaggregatedset` a set of roles; both put in only
what they are asked for (no rollout strategy, no size unless given), so a test says what
its objects hold. :func:`manifest` is the preset integration tests create on a cluster,
:func:`ds_object` the object as a reconciler reads it from its cache, :func:`decoded` the
typed object. The waits: a set's LeaderWorkerSets and Services as the controller names
them, and "settled" (one LeaderWorkerSet per role at the current revision, all groups
ready, Services made).
"""

from __future__ import annotations

import copy
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.defaults import default_disaggregatedset
from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.resources import DISAGGREGATEDSETS, LEADERWORKERSETS, SERVICES
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.lws import DS_UID
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"
# Rollout strategies the suites use: one extra group at a time, none unavailable (what
# integration tests roll with), and upstream's maxSurge 1 alone.
SURGE_ONE = {"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}
MAX_SURGE_ONE = {"rollingUpdateConfiguration": {"maxSurge": 1}}
EXTERNAL = {"mode": "External"}


def worker_template(image: str = PAUSE, container: str = "main") -> JSON:
    """A pod template of one container."""
    return {"spec": {"containers": [{"name": container, "image": image}]}}


def role(
    name: str,
    replicas: int | None = 2,
    *,
    size: int | None = None,
    image: str = PAUSE,
    container: str = "main",
    rollout: JSON | None = None,
    scaling: JSON | None = None,
    **spec: Any,
) -> JSON:
    """A role whose workers run one ``container`` of ``image``; ``replicas`` None leaves
    replicas out, ``size`` and ``rollout`` (the rolloutStrategy) are in only when given,
    ``scaling`` is the role's scaling member; keyword arguments are LeaderWorkerSet spec
    members (groupIdentity, ...) and replace the builder's own."""
    template: JSON = {"workerTemplate": worker_template(image, container)}
    if size is not None:
        template = {"size": size, **template}
    role_spec: JSON = {}
    if replicas is not None:
        role_spec["replicas"] = replicas
    if rollout is not None:
        role_spec["rolloutStrategy"] = copy.deepcopy(rollout)
    role_spec["leaderWorkerTemplate"] = template
    role_spec.update(copy.deepcopy(spec))
    out: JSON = {"name": name}
    if scaling is not None:
        out["scaling"] = copy.deepcopy(scaling)
    out["spec"] = role_spec
    return out


def disaggregatedset(
    *roles: JSON,
    name: str = "test",
    namespace: str = "default",
    metadata: JSON | None = None,
    **spec: Any,
) -> JSON:
    """A set of ``roles`` (a prefill and a decode role of 2 replicas each when none are
    given); ``metadata`` adds to the object's metadata (uid, generation), keyword arguments
    are spec members."""
    chosen = list(roles) or [role("prefill"), role("decode")]
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace, **copy.deepcopy(metadata or {})},
        "spec": {"roles": chosen, **spec},
    }


# --- presets -------------------------------------------------------------------------------

UID = DS_UID


def manifest(name: str, namespace: str, *roles: JSON, **spec: Any) -> JSON:
    """What integration tests create."""
    return disaggregatedset(*roles, name=name, namespace=namespace, **spec)


def rolling_role(name: str, replicas: int, *, size: int = 1, **kwargs: Any) -> JSON:
    """A role of ``replicas`` groups of ``size`` pause pods that rolls one extra group at a
    time: what integration tests run."""
    return role(name, replicas, size=size, rollout=SURGE_ONE, **kwargs)


def cached_role(name: str, replicas: int, image: str = "pause:1", **kwargs: Any) -> JSON:
    """A role of ``replicas`` groups of one pod, upstream's maxSurge 1: what the reconciler's
    and the webhook's unit tests seed."""
    return role(name, replicas, size=1, image=image, rollout=MAX_SURGE_ONE, **kwargs)


def upstream_role(name: str, replicas: int | None, image: str = "nginx", **kwargs: Any) -> JSON:
    """A role as upstream's Go tests write it: a container "c" of nginx, nothing else."""
    return role(name, replicas, image=image, container="c", **kwargs)


def upstream_set(
    *roles: JSON, name: str = "test", defaulted: bool = True, **spec: Any
) -> DisaggregatedSet:
    """The typed set upstream's Go tests build (uid "uid", no apiVersion or kind, as a Go
    struct without TypeMeta), defaulted as the API server stores it unless told not to."""
    doc = disaggregatedset(*roles, name=name, metadata={"uid": "uid"}, **spec)
    del doc["apiVersion"], doc["kind"]
    return decoded(doc, defaulted=defaulted)


def ds_object(*roles: JSON, name: str = "llm", **spec: Any) -> JSON:
    """The set as a reconciler reads it from its cache: in namespace "ns", with a uid and
    a generation."""
    return disaggregatedset(
        *roles, name=name, namespace="ns", metadata={"uid": UID, "generation": 1}, **spec
    )


# --- reading one ---------------------------------------------------------------------------


def decoded(doc: JSON, *, defaulted: bool = True) -> DisaggregatedSet:
    """The typed set, defaulted as the API server stores it unless told not to."""
    ds, errors = DisaggregatedSet.from_json(doc)
    assert errors == [], errors
    return default_disaggregatedset(ds) if defaulted else ds


def revision_of_object(doc: JSON) -> str:
    """The revision of the set's roles, as the controller computes it."""
    return compute_revision(decoded(doc, defaulted=False).roles)


async def set_lwss(api: ApiClient, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = await api.list(LEADERWORKERSETS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return {x["metadata"]["name"]: x for x in found["items"]}


async def set_services(api: ApiClient, namespace: str, name: str) -> set[str]:
    found = await api.list(SERVICES, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return {x["metadata"]["name"] for x in found["items"]}


async def revision_of(api: ApiClient, namespace: str, name: str) -> str:
    stored = await api.get(DISAGGREGATEDSETS, name, namespace)
    ds, errors = DisaggregatedSet.from_json(stored)
    assert not errors
    return compute_revision(ds.roles)


async def settled(
    api: ApiClient, namespace: str, name: str, replicas: dict[str, int], within: float = 120
) -> dict[str, dict[str, Any]]:
    """Wait until the set has exactly one LeaderWorkerSet per role, at the current
    revision, with these replicas all ready, and its Services; return them."""
    revision = await revision_of(api, namespace, name)
    wanted = {f"{name}-0-{revision}-{role}": n for role, n in replicas.items()}

    async def probe() -> dict[str, dict[str, Any]] | None:
        lwss = await set_lwss(api, namespace, name)
        if set(lwss) != set(wanted):
            return None
        for lws_name, n in wanted.items():
            status = lwss[lws_name].get("status") or {}
            if lwss[lws_name]["spec"]["replicas"] != n or status.get("readyReplicas", 0) != n:
                return None
        if await set_services(api, namespace, name) != {f"{x}-prv" for x in wanted}:
            return None
        return lwss

    return await eventually(probe, within=within, what=f"{name} settled at {replicas}")
