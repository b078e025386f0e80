"""Admission of DisaggregatedSets: upstream v0.10.0's validating webhook, at its path,
and ours: each role judged as the LeaderWorkerSet the controller makes of it.

Upstream has no defaulting webhook for the kind (the CRD schema's defaults are all);
the validator defaults the object it is handed the same way before checking it, so a
request that reached it without the API server's defaulting is judged alike. The rules
are the pure functions of `api.disaggregatedset.validation`; a refusal is upstream's
(a denial whose message lists every field error, `[spec.slices: Forbidden: ...]`),
with the warnings upstream gives.

Upstream judges a role's LeaderWorkerSet spec only in part, so a set can be stored
whose every LeaderWorkerSet the LeaderWorkerSet webhook then refuses to its controller.
Ours refuses such a set: the LeaderWorkerSet webhook chain's own rules, for what the
controller serves (`disaggregatedset_validator(support, limits)`, the manager's
ControllerOptions.scheduling and .limits), are run on each role's LeaderWorkerSet
(`api.disaggregatedset.role_admission`). Once they pass, the last stage of that chain,
the API server's dry run of the workloads built from a LeaderWorkerSet (a `TemplateCheck`
the wiring hands in, as to the LeaderWorkerSet webhook), is asked about each role
judged afresh, and its causes are reported under the role.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from leaderworkerset.api.disaggregatedset.defaults import default_disaggregatedset
from leaderworkerset.api.disaggregatedset.role_admission import (
    RoleLws,
    judge_configured,
    role_path,
)
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec, DisaggregatedSet
from leaderworkerset.api.disaggregatedset.validation import (
    validate_create,
    validate_update,
    warnings_for,
)
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.objects import JSON
from leaderworkerset.runtime.webhook import (
    AdmissionHandler,
    AdmissionResponse,
    allow,
    deny,
    errored,
)
from leaderworkerset.webhooks.leaderworkerset import Cause, TemplateCheck

VALIDATING_PATH = "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"
# No provider, the gate off: a role that sets `scheduling` is refused.
UNCONFIGURED = SchedulingSupport()


def aggregate(errors: list[FieldError]) -> str:
    """Go's `ErrorList.ToAggregate().Error()`: one error as it is, several in brackets."""
    return _listed([str(e) for e in errors])


def _listed(texts: list[str]) -> str:
    unique = list(dict.fromkeys(texts))
    return unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"


@dataclass
class _Judged:
    response: AdmissionResponse
    # Each role's LeaderWorkerSet as judged, when the request's objects decoded.
    roles: list[RoleLws] | None = None


def verdict(
    operation: str,
    obj: JSON,
    old: JSON | None,
    scheduling: SchedulingSupport = UNCONFIGURED,
    limits: SizeLimits | None = None,
) -> AdmissionResponse:
    """The set's rules and its roles' LeaderWorkerSets' (all but the dry run)."""
    return _judge(operation, obj, old, scheduling, limits).response


def _judge(
    operation: str,
    obj: JSON,
    old: JSON | None,
    scheduling: SchedulingSupport,
    limits: SizeLimits | None,
) -> _Judged:
    ds, errors = DisaggregatedSet.from_json(obj)
    if errors:
        return _Judged(deny(aggregate(errors)))
    ds = default_disaggregatedset(ds)
    previous = None
    if operation == "UPDATE" and old is not None:
        decoded, _ = DisaggregatedSet.from_json(old)
        previous = default_disaggregatedset(decoded)
        errors = validate_update(ds, previous)
    else:
        errors = validate_create(ds)
    # On update the set's own errors leave out name errors the old object had, which
    # must still cover what the names make (see role_admission): judged afresh there.
    own = errors if previous is None else None
    configured = judge_configured(ds, previous, scheduling, limits, own_errors=own)
    errors += configured.errors
    warnings = warnings_for(ds)
    if errors:
        return _Judged(deny(aggregate(errors), warnings=warnings), configured.roles)
    return _Judged(allow(warnings=warnings), configured.roles)


async def dry_run_causes(roles: list[RoleLws], check: TemplateCheck) -> list[str]:
    """What the API server refuses in the workloads built from the LeaderWorkerSet of
    each role judged afresh (a role whose LeaderWorkerSet only changes its replicas was
    asked about before), each cause under the role's path."""
    fresh = [r for r in roles if r.stored is None]
    found = await asyncio.gather(*(check(r.lws.to_json(), None) for r in fresh))
    return [
        _under_role(cause, judged.index, judged.role)
        for judged, causes in zip(fresh, found, strict=True)
        for cause in causes
    ]


def _under_role(cause: Cause, index: int, role: DisaggregatedRoleSpec) -> str:
    """A cause on a LeaderWorkerSet field as one on the set's field it came from; on a
    field only the controller writes, against the role, naming the field."""
    path = role_path(cause.field, index, role)
    if path.endswith("]"):
        return f"{path}: in the role's LeaderWorkerSets, {cause.field}: {cause.message}"
    return f"{path}: {cause.message}"


def disaggregatedset_validator(
    scheduling: SchedulingSupport = UNCONFIGURED,
    limits: SizeLimits | None = None,
    check: TemplateCheck | None = None,
) -> AdmissionHandler:
    """The validating handler, for a controller that serves `scheduling` under `limits`;
    `check` (when given) asks the API server about the workloads built from each role's
    LeaderWorkerSet once the rules hold."""

    async def validate(request: JSON) -> AdmissionResponse:
        obj = request.get("object")
        operation = str(request.get("operation", "CREATE"))
        if operation not in ("CREATE", "UPDATE"):
            return allow()
        if not isinstance(obj, dict):
            return errored(400, "the admission request carries no object")
        meta = obj.setdefault("metadata", {})
        if request.get("namespace") and not meta.get("namespace"):
            meta["namespace"] = request["namespace"]
        old = request.get("oldObject")
        judged = _judge(operation, obj, old if isinstance(old, dict) else None, scheduling, limits)
        if not judged.response.allowed or check is None or judged.roles is None:
            return judged.response
        causes = await dry_run_causes(judged.roles, check)
        if not causes:
            return judged.response
        return deny(_listed(causes), warnings=judged.response.warnings)

    return validate


# A controller that serves no spec.scheduling, with no size limits and no dry run.
validate_disaggregatedset = disaggregatedset_validator()
