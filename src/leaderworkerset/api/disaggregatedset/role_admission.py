"""Each role of a DisaggregatedSet judged as the LeaderWorkerSet the controller makes of
it, by the LeaderWorkerSet admission chain's own rules, so that a set whose
LeaderWorkerSets that chain would refuse is refused itself, with the role's field path
(`spec.roles[0].spec.leaderWorkerTemplate.size`), rather than stored and then failing
at every LeaderWorkerSet create its controller sends, where nobody looks.

What is judged is what the controller sends: the body `objects.leaderworkerset` builds
for the role (its first slice, at the set's revision, with the replicas the controller
creates it with), as the LeaderWorkerSet mutating webhook defaults it
(`api.leaderworkerset.admission.admitted`), then that webhook chain's validating rules
for a controller with the given scheduling support and size limits
(`admission_errors`). The slices' LeaderWorkerSets differ only in a label's value and
in the values of the placement policy's affinity terms, which no rule reads, so one
stands for all. The dry run of the workloads built from a LeaderWorkerSet, the last
stage of that chain, asks the API server: the webhook runs it on `role_leaderworkersets`.

An error is reported once. One about a field the set's own rules already judge (the
same path, or one of its parents below the role) is left to them, in their words; one
about the LeaderWorkerSet's name is too, since `validation.name_fit_errors` judges the
longest name a set gives any of its objects. An error about the LeaderWorkerSet's spec
is reported under the role's spec, one about its annotations (or labels the role gave
it) under the role's metadata; one about something only the controller writes should
never be, and is reported against the role as a whole, naming the field.

On update, a role is judged afresh when what the controller would send for it changed,
its replicas aside; otherwise it is judged as its LeaderWorkerSet's update from the old
object's (what scaling sends), and only errors the old object did not have are
reported, so a set stored before these checks (or under upstream, which has none) can
still be scaled, relabelled or deleted.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from dataclasses import dataclass, replace

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.objects import leaderworkerset
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec, DisaggregatedSet
from leaderworkerset.api.disaggregatedset.validation import (
    ROLES,
    role_scheduling_errors,
    validate_create,
)
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.leaderworkerset.admission import (
    UNCONFIGURED,
    admission_errors,
    admitted,
)
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.objects import JSON

# The slice whose LeaderWorkerSet stands for all: every set has it.
SLICE = 0
# What an External role's first LeaderWorkerSet gets: its new RoleScaler's seed.
EXTERNAL_SEED = 1
_NAME = "metadata.name"


@dataclass(frozen=True)
class RoleLws:
    """One role's LeaderWorkerSet as the LeaderWorkerSet webhooks see it."""

    index: int
    role: DisaggregatedRoleSpec
    # As the mutating webhook leaves it (decoded only, when `refused` is not empty).
    lws: LeaderWorkerSet
    # What the mutating webhook refuses (a member of the wrong type).
    refused: list[FieldError]
    # On update, when the controller would send the same but for the replicas: the old
    # object's LeaderWorkerSet for this role, defaulted. None: judged afresh.
    stored: LeaderWorkerSet | None = None


def creation_replicas(role: DisaggregatedRoleSpec) -> int:
    """The replicas the controller creates a role's LeaderWorkerSet with at steady
    state: a Static role's spec.replicas (1 when absent), an External role's RoleScaler
    (seeded with 1 for a set that has no LeaderWorkerSets yet)."""
    if role.external:
        return EXTERNAL_SEED
    replicas = role.spec.replicas if role.spec is not None else None
    return 1 if replicas is None else replicas


def role_leaderworkersets(ds: DisaggregatedSet, old: DisaggregatedSet | None) -> list[RoleLws]:
    """The LeaderWorkerSet of each role of the defaulted `ds` that has a spec (the set's
    schema refuses one that has none), with the old object's for the role of the same
    name when only its replicas differ."""
    revision = _revision(ds)
    before = {role.name: role for role in old.roles} if old is not None else {}
    out = []
    for i, role in enumerate(ds.roles):
        if role.spec is None:
            continue
        body = leaderworkerset(ds, role, SLICE, revision, creation_replicas(role))
        lws, refused = admitted(body)
        previous = before.get(role.name)
        stored = None
        if old is not None and previous is not None and previous.spec is not None and not refused:
            old_body = leaderworkerset(old, previous, SLICE, revision, creation_replicas(previous))
            if _without_replicas(old_body) == _without_replicas(body):
                decoded, old_refused = admitted(old_body)
                stored = None if old_refused else decoded
        out.append(RoleLws(i, role, lws, refused, stored))
    return out


def _revision(ds: DisaggregatedSet) -> str:
    """The set's revision, or a stand-in of its length when a quantity in a template
    cannot be read (the CRD schema's pattern refuses it before any webhook is called,
    and the revision goes only into names and labels, which no rule here reads)."""
    try:
        return compute_revision(ds.roles)
    except ValueError:
        return "0" * c.REVISION_LENGTH


def _without_replicas(body: JSON) -> JSON:
    out = copy.deepcopy(body)
    out.get("spec", {}).pop("replicas", None)
    return out


@dataclass(frozen=True)
class Configured:
    """`configured_errors` with the roles' LeaderWorkerSets it judged, for the dry run
    that follows (building and defaulting them again per request would double the
    webhook's work)."""

    errors: list[FieldError]
    roles: list[RoleLws]


def configured_errors(
    ds: DisaggregatedSet,
    old: DisaggregatedSet | None,
    support: SchedulingSupport = UNCONFIGURED,
    limits: SizeLimits | None = None,
) -> list[FieldError]:
    """The set's rules that depend on the manager's configuration (what it serves of
    spec.scheduling, its size limits): `role_scheduling_errors`, then
    `role_lws_errors`."""
    return judge_configured(ds, old, support, limits).errors


def judge_configured(
    ds: DisaggregatedSet,
    old: DisaggregatedSet | None,
    support: SchedulingSupport = UNCONFIGURED,
    limits: SizeLimits | None = None,
    own_errors: list[FieldError] | None = None,
) -> Configured:
    """`configured_errors` and the roles judged; `own_errors`: `validate_create(ds)`,
    when the caller has it."""
    scheduling = role_scheduling_errors(ds, old, support)
    roles = role_leaderworkersets(ds, old)
    own = validate_create(ds) if own_errors is None else own_errors
    covered = {e.field for e in own} | {e.field for e in scheduling}
    return Configured([*scheduling, *_errors_of(roles, covered, support, limits)], roles)


def role_lws_errors(
    ds: DisaggregatedSet,
    old: DisaggregatedSet | None,
    support: SchedulingSupport = UNCONFIGURED,
    limits: SizeLimits | None = None,
) -> list[FieldError]:
    """What the LeaderWorkerSet webhook chain (without its dry run) would refuse in the
    LeaderWorkerSets the controller makes of the defaulted `ds`, under the roles' paths,
    less what the set's own rules report (see the module's docstring)."""
    covered = {e.field for e in validate_create(ds)}
    covered |= {e.field for e in role_scheduling_errors(ds, old, support)}
    return _errors_of(role_leaderworkersets(ds, old), covered, support, limits)


def _errors_of(
    roles: list[RoleLws],
    covered: Collection[str],
    support: SchedulingSupport,
    limits: SizeLimits | None,
) -> list[FieldError]:
    errs: list[FieldError] = []
    for judged in roles:
        found = judged.refused or admission_errors(
            judged.lws, judged.stored, limits=limits, scheduling=support
        )
        if judged.stored is not None:
            had = admission_errors(judged.stored, None, limits=limits, scheduling=support)
            already = {str(e) for e in had}
            found = [e for e in found if str(e) not in already]
        for error in found:
            mapped = under_role(error, judged.index, judged.role, covered)
            if mapped is not None and mapped not in errs:
                errs.append(mapped)
    return errs


def under_role(
    error: FieldError, index: int, role: DisaggregatedRoleSpec, covered: Collection[str] = ()
) -> FieldError | None:
    """A LeaderWorkerSet's field error as the set's, or None when the set's own rules
    (`covered`: the fields of their errors) already speak for it."""
    path = f"{ROLES}[{index}]"
    field = error.field
    if field == _NAME:
        return None  # the set's name rules judge every name it makes
    if _from_role(field, role, error.bad_value):
        mapped = f"{path}.{field}"
        if any(c.startswith(path + ".") and _under(mapped, c) for c in covered):
            return None
        return replace(error, field=mapped)
    if _NAME in covered or f"{path}.name" in covered:
        return None  # the controller's labels are made of the names
    return replace(error, field=path, detail=_in_its_lws(field, error.detail))


def role_path(field: str, index: int, role: DisaggregatedRoleSpec) -> str:
    """Where in the set a field of role `index`'s LeaderWorkerSet comes from: the role's
    spec or metadata, or (a field only the controller writes) the role as a whole."""
    path = f"{ROLES}[{index}]"
    return f"{path}.{field}" if _from_role(field, role) else path


def _in_its_lws(field: str, detail: str) -> str:
    where = f"in the role's LeaderWorkerSets, {field}"
    return f"{where}: {detail}" if detail else where


def _from_role(field: str, role: DisaggregatedRoleSpec, value: object = None) -> bool:
    """Whether the role wrote the field: the LeaderWorkerSet's spec and annotations are
    the role's; its labels are the role's and the controller's (those win), and an
    error about the labels names the key or value it is about, when given."""
    if _under(field, "spec") or _under(field, "metadata.annotations"):
        return True
    labels = (role.metadata or {}).get("labels")
    if not _under(field, "metadata.labels") or not isinstance(labels, dict) or not labels:
        return False
    if field != "metadata.labels" or value is None:
        return True
    return any(value in (key, label) for key, label in labels.items())


def _under(field: str, root: str) -> bool:
    """`field` is `root` or a member or item below it."""
    return field == root or field.startswith((root + ".", root + "["))
