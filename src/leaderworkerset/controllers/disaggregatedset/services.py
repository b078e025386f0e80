"""Which headless Services a slice should have, as upstream's v0.10.0 service manager
decides: once the current revision has a ready group (readyReplicas >= 1) in every
role of the spec, each of its LeaderWorkerSets gets its Service `<lws>-prv`, and the
slice's Services of revisions not ready in every role are deleted. Until then nothing
changes, so clients keep the old revision's Services during a rollout. Services are
created, never updated: a Service's selector is fixed by its name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import slice_label_matches, slice_of
from leaderworkerset.api.disaggregatedset.objects import service
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.objects import JSON, labels_of, name_of


@dataclass
class ServicePlan:
    create: list[JSON] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def plan_slice_services(
    ds: DisaggregatedSet,
    slice_index: int,
    revision: str,
    lwss: Sequence[JSON],
    services: Iterable[JSON],
) -> ServicePlan:
    """`lwss`: the slice's LeaderWorkerSets; `services`: the set's Services (all slices)."""
    plan = ServicePlan()
    roles = [role.name or "" for role in ds.roles]
    by_revision = _by_revision(lwss)
    target = by_revision.get(revision)
    if target is None or not _ready_in_every_role(target, roles):
        return plan
    existing = {name_of(s) for s in services}
    for role in roles:
        body = service(ds, target[role])
        if name_of(body) not in existing:
            plan.create.append(body)
    ready = {rev for rev, members in by_revision.items() if _ready_in_every_role(members, roles)}
    ready.add(revision)
    for svc in services:
        labels = labels_of(svc)
        if slice_label_matches(labels, slice_index) and labels.get(c.LABEL_REVISION) not in ready:
            plan.delete.append(name_of(svc))
    return plan


def removed_slice_services(services: Iterable[JSON], slices: int) -> list[str]:
    """Services of slices at or above `slices` (a slice label that is not a number, or
    none, belongs to no removed slice)."""
    out = []
    for svc in services:
        index = slice_of(labels_of(svc).get(c.LABEL_SLICE))
        if index is not None and index >= slices:
            out.append(name_of(svc))
    return out


def _by_revision(lwss: Iterable[JSON]) -> dict[str, dict[str, JSON]]:
    grouped: dict[str, dict[str, JSON]] = {}
    for lws in lwss:
        labels = labels_of(lws)
        revision = str(labels.get(c.LABEL_REVISION, ""))
        grouped.setdefault(revision, {})[str(labels.get(c.LABEL_ROLE, ""))] = lws
    return grouped


def _ready_in_every_role(members: Mapping[str, JSON], roles: Sequence[str]) -> bool:
    return all(
        role in members and int((members[role].get("status") or {}).get("readyReplicas") or 0) >= 1
        for role in roles
    )
