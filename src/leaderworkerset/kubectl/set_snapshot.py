"""Everything `kubectl lws disaggregatedset` shows about one DisaggregatedSet, read with
plain GET and LIST requests: the set, the LeaderWorkerSets, Services and RoleScalers
labelled with its name, and each LeaderWorkerSet's groups (as `kubectl lws groups`
reads them)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import (
    DISAGGREGATEDSETS,
    LEADERWORKERSETS,
    ROLE_SCALERS,
    SERVICES,
)
from leaderworkerset.kubectl.snapshot import Snapshot, items_of, read_pod_groups, snapshot_of
from leaderworkerset.runtime.client import ApiClient, ApiError


async def _scalers(client: ApiClient, namespace: str, selector: str) -> list[JSON]:
    """The set's RoleScalers; none where the kind is not served (upstream's v0.9 CRDs,
    from before RoleScalers), rather than a failed command."""
    try:
        return await items_of(client, ROLE_SCALERS, namespace, selector)
    except ApiError as exc:
        if exc.not_found:
            return []
        raise


class SetNotFound(Exception):
    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(f'disaggregatedset "{name}" not found in namespace "{namespace}"')


@dataclass
class SetSnapshot:
    ds: JSON
    # One per LeaderWorkerSet labelled with the set's name, in the order listed.
    leaderworkersets: list[Snapshot]
    services: list[JSON]
    scalers: list[JSON]


async def read_set(client: ApiClient, name: str, namespace: str) -> SetSnapshot:
    try:
        ds = await client.get(DISAGGREGATEDSETS, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            raise SetNotFound(name, namespace) from exc
        raise
    selector = f"{c.LABEL_SET_NAME}={name}"
    lwss, services, scalers = await asyncio.gather(
        items_of(client, LEADERWORKERSETS, namespace, selector),
        items_of(client, SERVICES, namespace, selector),
        _scalers(client, namespace, selector),
    )
    # One LIST of the namespace's PodGroups serves every LeaderWorkerSet that has gangs.
    gangs = any(view_of(lws).scheduling is not None for lws in lwss)
    pod_groups = await read_pod_groups(client, namespace) if gangs else None
    snapshots = await asyncio.gather(
        *(snapshot_of(client, lws, namespace, pod_groups=pod_groups) for lws in lwss)
    )
    return SetSnapshot(ds, list(snapshots), services, scalers)
