"""Everything `kubectl lws` shows about one LeaderWorkerSet, read in one go with
plain GET and LIST requests (no watch, no write)."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import JSON, meta_of, revision_key_of
from leaderworkerset.api.resources import (
    CORE_EVENTS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    POD_GROUPS,
    PODS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from leaderworkerset.group.state import Group, groups_of
from leaderworkerset.runtime.client import ApiClient, ApiError, list_pages


class LwsNotFound(Exception):
    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(f'leaderworkerset "{name}" not found in namespace "{namespace}"')


@dataclass
class PodGroups:
    """The PodGroups of one namespace, read with one LIST; `by_name` is None when
    they could not be read (`problem` says why), empty when the API is not served."""

    by_name: dict[str, JSON] | None
    problem: str = ""


@dataclass
class Snapshot:
    lws: JSON
    pods: list[JSON]
    statefulsets: list[JSON]
    # StatefulSet <lws> (Ordinal) or Deployment <lws> (Hash); None when absent.
    leader_workload: JSON | None
    services: list[JSON] = field(default_factory=list)
    events: list[JSON] = field(default_factory=list)
    # The namespace's PodGroups by name, read only for an LWS with spec.scheduling.
    pod_groups: PodGroups | None = None

    @property
    def gang_scheduled(self) -> bool:
        """The LWS asks for gangs (spec.scheduling): its rows show their PodGroups."""
        return self.view.scheduling is not None

    @functools.cached_property
    def view(self) -> LwsView:
        """Read once per snapshot: the rows read it for every group."""
        return view_of(self.lws)

    @property
    def hash_mode(self) -> bool:
        return self.view.hash_mode

    @property
    def current_revision(self) -> str | None:
        """The revision new groups are built from: the label of the leader StatefulSet
        (Ordinal) or of the Deployment's pod template (Hash)."""
        workload = self.leader_workload
        if workload is None:
            return None
        if self.hash_mode:
            template = (workload.get("spec") or {}).get("template") or {}
            return revision_key_of(template) or None
        return revision_key_of(workload) or None

    @property
    def worker_statefulsets(self) -> list[JSON]:
        return [s for s in self.statefulsets if _owned_by_pod(s)]

    def groups(self) -> list[Group]:
        return groups_of(self.pods, self.worker_statefulsets)


def _owned_by_pod(obj: JSON) -> bool:
    return any(
        isinstance(ref, dict) and ref.get("kind") == "Pod" and ref.get("controller") is True
        for ref in meta_of(obj).get("ownerReferences") or []
    )


async def items_of(
    client: ApiClient, resource: Resource, namespace: str, selector: str | None = None
) -> list[JSON]:
    """Every page of a LIST."""
    items: list[JSON] = []
    async for page in list_pages(client, resource, namespace, label_selector=selector):
        items.extend(page.get("items") or [])
    return items


async def read_pod_groups(client: ApiClient, namespace: str) -> PodGroups:
    """Every PodGroup of the namespace, matched to groups by name (the name a pod's
    spec.schedulingGroup carries), so PodGroups another controller made are found too."""
    try:
        items = await items_of(client, POD_GROUPS, namespace)
    except ApiError as exc:
        if exc.not_found:
            return PodGroups({}, f"the cluster does not serve {POD_GROUPS.api_version}")
        if exc.status in (401, 403):
            return PodGroups(None, f"cannot list podgroups: {exc.reason or exc.status}")
        raise
    return PodGroups({str(meta_of(g).get("name") or ""): g for g in items})


async def read(
    client: ApiClient, name: str, namespace: str, *, with_details: bool = False
) -> Snapshot:
    """The LWS, its pods and StatefulSets and its leader workload; with `with_details`
    also its Services and the namespace's Events."""
    try:
        lws = await client.get(LEADERWORKERSETS, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            raise LwsNotFound(name, namespace) from exc
        raise
    return await snapshot_of(client, lws, namespace, with_details=with_details)


async def snapshot_of(
    client: ApiClient,
    lws: JSON,
    namespace: str,
    *,
    with_details: bool = False,
    pod_groups: PodGroups | None = None,
) -> Snapshot:
    """The Snapshot of a LeaderWorkerSet already read (a DisaggregatedSet lists its
    LeaderWorkerSets rather than getting each, and the namespace's PodGroups once)."""
    name = str(meta_of(lws).get("name") or "")
    selector = f"{c.LABEL_SET_NAME}={name}"
    view = view_of(lws)
    leader_kind = DEPLOYMENTS if view.hash_mode else STATEFULSETS

    async def gangs() -> PodGroups | None:
        if view.scheduling is None:
            return None
        return pod_groups or await read_pod_groups(client, namespace)

    pods, statefulsets, workload, groups = await asyncio.gather(
        items_of(client, PODS, namespace, selector),
        items_of(client, STATEFULSETS, namespace, selector),
        client.get_or_none(leader_kind, name, namespace),
        gangs(),
    )
    snapshot = Snapshot(lws, pods, statefulsets, workload, pod_groups=groups)
    if with_details:
        services, events = await asyncio.gather(
            items_of(client, SERVICES, namespace, selector),
            items_of(client, CORE_EVENTS, namespace),
        )
        snapshot.services = services
        snapshot.events = events
    return snapshot
