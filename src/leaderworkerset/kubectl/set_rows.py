"""What `kubectl lws disaggregatedset` prints, as plain data: one line per role (its
target and its groups over all slices and revisions) and one per LeaderWorkerSet (its
slice, revision, role, replicas, Service and group rows).

The counts come from the LeaderWorkerSets themselves, not from the set's status, so
they are right under upstream's controller too (v0.10.0 writes no status)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import (
    compute_revision,
    initial_replicas,
    scaler_name,
    service_name,
)
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec, DisaggregatedSet
from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.leaderworkerset.types import group_identity_of
from leaderworkerset.api.objects import JSON, meta_of, name_of
from leaderworkerset.kubectl.rows import GroupRow, rows_of
from leaderworkerset.kubectl.set_snapshot import SetSnapshot
from leaderworkerset.kubectl.snapshot import Snapshot


@dataclass
class RoleLine:
    name: str
    scaling: str
    scaler: str | None  # the RoleScaler's name, External roles only
    target: int | None  # None: an External role whose RoleScaler does not exist
    replicas: int
    ready: int
    updated: int
    group_identity: str

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "scaling": self.scaling,
            "scaler": self.scaler,
            "target": self.target,
            "replicas": self.replicas,
            "readyReplicas": self.ready,
            "updatedReplicas": self.updated,
            "groupIdentity": self.group_identity,
        }


@dataclass
class LwsLine:
    name: str
    slice: str
    revision: str
    current: bool
    role: str
    group_identity: str
    replicas: int
    ready: int
    initial: int | None  # the initial-replicas annotation of a revision being drained
    service: str | None  # its `<lws>-prv` Service, when it exists
    groups: list[GroupRow] = field(default_factory=list)
    # spec.scheduling is set: its groups show their PodGroups.
    gangs: bool = False

    @property
    def hash_mode(self) -> bool:
        return self.group_identity == lws_c.GROUP_IDENTITY_HASH

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "slice": self.slice,
            "revision": self.revision,
            "currentRevision": self.current,
            "role": self.role,
            "groupIdentity": self.group_identity,
            "replicas": self.replicas,
            "readyReplicas": self.ready,
            "initialReplicas": self.initial,
            "service": self.service,
            "groups": [row.as_dict(self.hash_mode, self.gangs) for row in self.groups],
        }


@dataclass
class SetView:
    name: str
    namespace: str
    revision: str
    slices: int
    placement: str
    conditions: list[JSON]
    roles: list[RoleLine]
    leaderworkersets: list[LwsLine]
    generation: int | None = None
    # None when the controller wrote none (upstream v0.10.0's writes no status at all).
    observed_generation: int | None = None

    @property
    def stale(self) -> bool:
        """The status was written for an older spec than the stored one."""
        return (
            self.generation is not None
            and self.observed_generation is not None
            and self.observed_generation < self.generation
        )


def set_view(snapshot: SetSnapshot, now: datetime) -> SetView:
    ds, _ = DisaggregatedSet.from_json(snapshot.ds)
    revision = compute_revision(ds.roles)
    services = {name_of(s) for s in snapshot.services}
    order = {role.name: i for i, role in enumerate(ds.roles)}
    lines = [_lws_line(s, revision, services, now) for s in snapshot.leaderworkersets]
    lines.sort(key=lambda x: (_slice_number(x.slice), not x.current, order.get(x.role, len(order))))
    scalers = {name_of(s): s for s in snapshot.scalers}
    spec = ds.spec
    status = snapshot.ds.get("status") or {}
    return SetView(
        name=ds.name,
        namespace=ds.namespace,
        revision=revision,
        slices=(spec.slices if spec is not None else None) or c.DEFAULT_SLICES,
        placement=_placement(ds),
        conditions=list(status.get("conditions") or []),
        roles=[_role_line(ds.name, role, lines, scalers) for role in ds.roles],
        leaderworkersets=lines,
        generation=_optional_int(meta_of(snapshot.ds).get("generation")),
        observed_generation=_optional_int(status.get("observedGeneration")),
    )


def _lws_line(snapshot: Snapshot, current: str, services: set[str], now: datetime) -> LwsLine:
    lws = snapshot.lws
    meta = meta_of(lws)
    labels = meta.get("labels") or {}
    revision = str(labels.get(c.LABEL_REVISION) or "")
    name = str(meta.get("name") or "")
    return LwsLine(
        name=name,
        # A LeaderWorkerSet made before slices existed has no slice label: slice 0.
        slice=str(labels.get(c.LABEL_SLICE) or "0"),
        revision=revision,
        current=revision == current,
        role=str(labels.get(c.LABEL_ROLE) or ""),
        group_identity=group_identity_of(lws.get("spec")),
        replicas=_int((lws.get("spec") or {}).get("replicas")),
        ready=_int((lws.get("status") or {}).get("readyReplicas")),
        initial=initial_replicas(meta.get("annotations")),
        service=service_name(name) if service_name(name) in services else None,
        groups=rows_of(snapshot, now),
        gangs=snapshot.gang_scheduled,
    )


def _role_line(
    set_name: str, role: DisaggregatedRoleSpec, lines: list[LwsLine], scalers: dict[str, JSON]
) -> RoleLine:
    name = role.name or ""
    mine = [x for x in lines if x.role == name]
    scaler = scaler_name(set_name, name) if role.external else None
    if scaler is not None:
        held = scalers.get(scaler)
        target = _int((held.get("spec") or {}).get("replicas")) if held is not None else None
    else:
        replicas = role.spec.replicas if role.spec is not None else None
        target = lws_c.DEFAULT_REPLICAS if replicas is None else replicas
    return RoleLine(
        name=name,
        scaling=c.SCALING_EXTERNAL if role.external else c.SCALING_STATIC,
        scaler=scaler,
        target=target,
        replicas=sum(x.replicas for x in mine),
        ready=sum(x.ready for x in mine),
        updated=sum(x.replicas for x in mine if x.current),
        group_identity=group_identity_of(role.spec),
    )


def _placement(ds: DisaggregatedSet) -> str:
    policy = ds.spec.placement_policy if ds.spec is not None else None
    kind = (policy.type if policy is not None else None) or c.PLACEMENT_NONE
    if policy is not None and policy.topology and kind != c.PLACEMENT_NONE:
        return f"{kind} (topology {policy.topology})"
    return kind


def _slice_number(value: str) -> int:
    return int(value) if value.isdigit() else -1


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
