"""What one reconcile of one slice should do to its LeaderWorkerSets: the decisions of
upstream's v0.10.0 reconciler and executor, as pure functions over what was observed.

Per slice, in upstream's order:
1. old revisions whose LeaderWorkerSets are all at 0 replicas are deleted;
2. with no old replicas left (in the spec's roles), the steady state: each role's
   LeaderWorkerSet of the current revision is created, or scaled, to its target;
3. otherwise a rollout. Its first reconcile records each old LeaderWorkerSet's
   replicas in the initial-replicas annotation and creates the new revision's
   LeaderWorkerSets at 0; later ones wait until every new LeaderWorkerSet is ready,
   then take one planner step (`planner.next_step`): the new revision is scaled up,
   and the old revisions are drained newest first, a revision that reaches 0 in one
   role going to 0 in all (no orphaned role).

`plan_slice` returns the whole decision as a `SlicePlan`; acting on it (API calls,
events, requeues) is the reconciler's job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import (
    legacy_lws_name,
    lws_name,
    service_name,
    slice_label_matches,
    slice_of,
)
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec, DisaggregatedSet
from leaderworkerset.api.go.intstr import scaled_value
from leaderworkerset.api.leaderworkerset.types import RollingUpdateConfiguration
from leaderworkerset.controllers.disaggregatedset.planner import RollingConfig, Step, next_step

# Upstream requeues a starting or waiting rollout after a second.
REQUEUE_SECONDS = 1.0
_NEVER = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class ObservedLWS:
    """One LeaderWorkerSet of the set, as listed: its labels' role, revision and slice,
    its spec.replicas (None: absent, which upstream counts as 1), status.readyReplicas,
    the initial-replicas annotation (`names.initial_replicas`) and creationTimestamp."""

    name: str
    role: str
    revision: str
    replicas: int | None = None
    ready_replicas: int = 0
    initial_replicas: int | None = None
    created: str | None = None
    # The slice label as found; None or "" on a LeaderWorkerSet made before slices.
    slice: str | None = None

    @property
    def desired(self) -> int:
        return 1 if self.replicas is None else self.replicas

    @property
    def baseline(self) -> int:
        """Where the rollout started from: the annotation, else the current replicas."""
        return self.desired if self.initial_replicas is None else self.initial_replicas


# A revision's LeaderWorkerSets by role.
Revision = Mapping[str, ObservedLWS]


@dataclass
class SlicePlan:
    """The decision for one slice; names are LeaderWorkerSet names."""

    delete: list[str] = field(default_factory=list)
    # role -> replicas of a new LeaderWorkerSet of the current revision
    create: dict[str, int] = field(default_factory=dict)
    scale: dict[str, int] = field(default_factory=dict)
    # initial-replicas annotations to write (name -> value)
    annotate: dict[str, int] = field(default_factory=dict)
    # The planner step taken, if any; None with rolling_out set means "wait".
    step: Step | None = None
    rolling_out: bool = False
    complete: bool = False
    requeue_after: float | None = None


@dataclass
class SetPlan:
    """The decision for a whole set: what goes before the slices are reconciled, then
    each slice's plan (index = slice)."""

    # LeaderWorkerSets of removed slices, and legacy slice-0 ones to make anew.
    delete: list[str] = field(default_factory=list)
    # Legacy slice-agnostic Services, deleted before their LeaderWorkerSets.
    delete_services: list[str] = field(default_factory=list)
    slices: list[SlicePlan] = field(default_factory=list)


def plan_set(
    ds: DisaggregatedSet,
    revision: str,
    observed: Iterable[ObservedLWS],
    scaler_replicas: Mapping[str, int] | None = None,
) -> SetPlan:
    """The decision for a set, from all its LeaderWorkerSets. Slices at or above
    spec.slices are deleted. When there are several slices, a legacy slice 0 (made
    before slices, no slice label) of the current revision is deleted, Service first,
    and made anew with slice labels: its Service would select the other slices' pods
    too. A legacy slice 0 of an older revision is left to the rollout instead."""
    lwss = list(observed)
    slices = (ds.spec.slices if ds.spec is not None else None) or c.DEFAULT_SLICES
    plan = SetPlan(delete=[x.name for x in lwss if _slice_index(x.slice) >= slices])
    if slices > 1:
        by_name = {x.name: x for x in lwss}
        for role in ds.roles:
            legacy = by_name.get(legacy_lws_name(ds.name, revision, role.name or ""))
            if legacy is not None and not legacy.slice:
                plan.delete_services.append(service_name(legacy.name))
                plan.delete.append(legacy.name)
    remaining = [x for x in lwss if x.name not in plan.delete]
    for index in range(slices):
        members = [x for x in remaining if _in_slice(x, index)]
        plan.slices.append(plan_slice(ds, index, revision, members, scaler_replicas))
    return plan


def plan_slice(
    ds: DisaggregatedSet,
    slice_index: int,
    revision: str,
    observed: Iterable[ObservedLWS],
    scaler_replicas: Mapping[str, int] | None = None,
) -> SlicePlan:
    """The decision for one slice. `observed` are the slice's LeaderWorkerSets (slice 0
    includes legacy ones without a slice label); `scaler_replicas` the spec.replicas of
    the RoleScalers of External roles, by role."""
    scalers = scaler_replicas or {}
    plan = SlicePlan()
    lwss = list(observed)
    by_revision = group_by_revision(lwss)
    for old_revision, roles in by_revision.items():
        if old_revision != revision and all(x.desired == 0 for x in roles.values()):
            plan.delete.extend(x.name for x in roles.values())
    remaining = [x for x in lwss if x.name not in plan.delete]
    old = {r: roles for r, roles in group_by_revision(remaining).items() if r != revision}
    names = [role.name or "" for role in ds.roles]
    if old and sum(total_replicas(old.values(), name) for name in names) > 0:
        _plan_rollout(plan, ds, slice_index, revision, remaining, scalers)
    else:
        _plan_steady(plan, ds, slice_index, revision, remaining, scalers)
    return plan


def group_by_revision(lwss: Iterable[ObservedLWS]) -> dict[str, dict[str, ObservedLWS]]:
    grouped: dict[str, dict[str, ObservedLWS]] = {}
    for lws in lwss:
        grouped.setdefault(lws.revision, {})[lws.role] = lws
    return grouped


def total_replicas(revisions: Iterable[Revision], role: str) -> int:
    return sum(roles[role].desired for roles in revisions if role in roles)


def total_initial_replicas(revisions: Iterable[Revision], role: str) -> int:
    return sum(roles[role].baseline for roles in revisions if role in roles)


def initial_replica_state(lwss: Iterable[ObservedLWS]) -> dict[str, int]:
    """Per role, the sum of the initial-replicas annotations (else replicas); objects
    without a role label are left out."""
    state: dict[str, int] = {}
    for lws in lwss:
        if lws.role:
            state[lws.role] = state.get(lws.role, 0) + lws.baseline
    return state


def is_stable(revision: Revision, roles: Sequence[str]) -> bool:
    """Every role has its LeaderWorkerSet, with all its replicas ready."""
    return all(r in revision and revision[r].desired == revision[r].ready_replicas for r in roles)


def newest_first(revisions: Mapping[str, Revision]) -> list[str]:
    """Old revisions by their newest LeaderWorkerSet's creation, newest first; ties keep
    their order (upstream's sort is not stable, so it may order them either way)."""

    def created(name: str) -> datetime:
        return max((_timestamp(x.created) for x in revisions[name].values()), default=_NEVER)

    return sorted(revisions, key=created, reverse=True)


def role_changes(
    spec_roles: Sequence[str], old_revisions: Iterable[Revision]
) -> tuple[list[str], list[str]]:
    """(roles of the spec no old revision has, roles of old revisions the spec dropped)."""
    old = {role for roles in old_revisions for role in roles}
    added = [role for role in spec_roles if role not in old]
    return added, sorted(old - set(spec_roles))


def target_replicas(
    ds: DisaggregatedSet, role: str, scaler_replicas: Mapping[str, int], current_new: int
) -> int:
    """A role's target: its scaler's spec.replicas when External (the current count while
    the scaler is missing), else spec.replicas (1 when absent). 1 for an unknown role."""
    spec = _role(ds, role)
    if spec is None:
        return 1
    if spec.external:
        return scaler_replicas.get(role, current_new)
    replicas = spec.spec.replicas if spec.spec is not None else None
    return 1 if replicas is None else replicas


def rolling_configs(
    ds: DisaggregatedSet, roles: Sequence[str], scaler_replicas: Mapping[str, int]
) -> list[RollingConfig]:
    """Each role's maxSurge and maxUnavailable as replica counts of its target (surge
    rounded up, unavailability down). A role without rollingUpdateConfiguration keeps
    maxSurge 1 and maxUnavailable 0, and so does one whose two values resolve to 0; a
    maxSurge of 0 is taken only with a positive maxUnavailable."""
    configs = {role: RollingConfig() for role in roles}
    for spec in ds.roles:
        rolling = _rolling_update_configuration(spec)
        if rolling is None or spec.name not in configs:
            continue
        target = target_replicas(ds, spec.name or "", scaler_replicas, 0)
        surge = _scaled(rolling.max_surge, target, round_up=True)
        unavailable = _scaled(rolling.max_unavailable, target, round_up=False)
        if unavailable > 0:
            configs[spec.name or ""] = RollingConfig(surge, unavailable)
        elif surge > 0:
            configs[spec.name or ""] = RollingConfig(max_surge=surge)
    return [configs[role] for role in roles]


def grow_plan(
    new_names: Mapping[str, str],
    roles: Sequence[str],
    current: Sequence[int],
    target: Sequence[int],
) -> dict[str, int]:
    """The new revision's LeaderWorkerSets to scale up (name -> replicas): the spec's
    roles (`new_names`, role -> name) whose step target exceeds what they have."""
    return {
        new_names[role]: wanted
        for role, have, wanted in zip(roles, current, target, strict=True)
        if role in new_names and have < wanted
    }


def drain_plan(
    old_revisions: Mapping[str, Revision],
    roles: Sequence[str],
    current: Sequence[int],
    target: Sequence[int],
) -> dict[str, int]:
    """How the old revisions go from `current` to `target` replicas per role (summed over
    revisions): newest revision first, and a revision that one role drains to 0 drains
    to 0 in all its roles, even past the budget. Returns name -> new replicas."""
    budget = [c - t for c, t in zip(current, target, strict=True)]
    out: dict[str, int] = {}
    for name in newest_first(old_revisions):
        if all(b <= 0 for b in budget):
            break
        revision = old_revisions[name]
        present = [(i, role) for i, role in enumerate(roles) if role in revision]
        drains = {role: min(budget[i], revision[role].desired) for i, role in present}
        emptied = {role for _, role in present if revision[role].desired == drains[role]}
        for i, role in present:
            lws = revision[role]
            kept = 0 if emptied else lws.desired - drains[role]
            if lws.desired <= kept:
                continue
            out[lws.name] = kept
            if role in emptied or not emptied:
                budget[i] -= drains[role]
    return out


def _plan_steady(
    plan: SlicePlan,
    ds: DisaggregatedSet,
    slice_index: int,
    revision: str,
    lwss: Sequence[ObservedLWS],
    scalers: Mapping[str, int],
) -> None:
    """Each role's LeaderWorkerSet of the current revision at its target. Slice 0 adopts
    a legacy LeaderWorkerSet of that revision rather than making a second one."""
    by_name = {x.name: x for x in lwss}
    set_name = ds.name
    for spec in ds.roles:
        role = spec.name or ""
        existing = by_name.get(lws_name(set_name, slice_index, revision, role))
        if existing is None and slice_index == 0:
            existing = by_name.get(legacy_lws_name(set_name, revision, role))
        current = existing.replicas or 0 if existing is not None else 0
        desired = target_replicas(ds, role, scalers, current)
        if existing is None:
            plan.create[role] = desired
        elif existing.desired != desired:
            plan.scale[existing.name] = desired


def _plan_rollout(
    plan: SlicePlan,
    ds: DisaggregatedSet,
    slice_index: int,
    revision: str,
    lwss: Sequence[ObservedLWS],
    scalers: Mapping[str, int],
) -> None:
    plan.rolling_out = True
    grouped = group_by_revision(lwss)
    new = grouped.pop(revision, None)
    spec_roles = [role.name or "" for role in ds.roles]
    if new is None:
        for roles in grouped.values():
            plan.annotate.update({x.name: x.desired for x in roles.values()})
        plan.create.update(dict.fromkeys(spec_roles, 0))
        plan.requeue_after = REQUEUE_SECONDS
        return
    missing = [role for role in spec_roles if role not in new]
    if missing:
        # The first pass's creates stopped part-way (a refusal, a lost connection): make
        # the rest as it would have, at 0, or the revision never becomes stable (upstream
        # waits for ever here).
        plan.create.update(dict.fromkeys(missing, 0))
        plan.requeue_after = REQUEUE_SECONDS
        return
    if not is_stable(new, spec_roles):
        plan.requeue_after = REQUEUE_SECONDS
        return
    all_roles = spec_roles + role_changes(spec_roles, grouped.values())[1]
    initial, old, current_new, target = _planner_state(ds, all_roles, grouped, new, scalers)
    configs = rolling_configs(ds, all_roles, scalers)
    step = next_step(initial, old, current_new, target, configs)
    if step is None:
        plan.complete = True
        return
    plan.step = step
    names = {
        role: new[role].name if role in new else lws_name(ds.name, slice_index, revision, role)
        for role in spec_roles
    }
    plan.scale.update(grow_plan(names, all_roles, current_new, step.new))
    plan.scale.update(drain_plan(grouped, all_roles, old, step.old))


def _planner_state(
    ds: DisaggregatedSet,
    roles: Sequence[str],
    old_revisions: Mapping[str, Revision],
    new: Revision,
    scalers: Mapping[str, int],
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(initial old, current old, current new, target) per role. A role the spec dropped
    targets 0; an External role never targets fewer than it has while old revisions
    remain, so an autoscaler's scale-down waits for the rollout to end."""
    initial = [total_initial_replicas(old_revisions.values(), role) for role in roles]
    old = [total_replicas(old_revisions.values(), role) for role in roles]
    current_new = [0] * len(roles)
    target = [0] * len(roles)
    spec_roles = {spec.name: spec for spec in ds.roles}
    for i, role in enumerate(roles):
        if role not in spec_roles:
            continue
        if role in new:
            current_new[i] = new[role].desired
        target[i] = target_replicas(ds, role, scalers, current_new[i])
        if spec_roles[role].external and old_revisions and target[i] < current_new[i]:
            target[i] = current_new[i]
    return initial, old, current_new, target


def _role(ds: DisaggregatedSet, name: str) -> DisaggregatedRoleSpec | None:
    return next((role for role in ds.roles if role.name == name), None)


def _rolling_update_configuration(role: DisaggregatedRoleSpec) -> RollingUpdateConfiguration | None:
    strategy = role.spec.rollout_strategy if role.spec is not None else None
    return strategy.rolling_update_configuration if strategy is not None else None


def _scaled(value: int | str | None, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent, an error counting as 0 as upstream ignores it."""
    if value is None:
        return 0
    try:
        return scaled_value(value, total, round_up)
    except ValueError:
        return 0


def _in_slice(lws: ObservedLWS, slice_index: int) -> bool:
    return slice_label_matches({c.LABEL_SLICE: lws.slice or ""}, slice_index)


def _slice_index(label: str | None) -> int:
    """The slice of a label as upstream parses it (Atoi); -1 when it is none."""
    index = slice_of(label)
    return -1 if index is None else index


def _timestamp(value: str | None) -> datetime:
    if not value:
        return _NEVER
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
