"""Admission of DisaggregatedSets: upstream v0.10.0's validating webhook, at its path.

Upstream has no defaulting webhook for the kind (the CRD schema's defaults are all);
the validator defaults the object it is handed the same way before checking it, so a
request that reached it without the API server's defaulting is judged alike. The rules
are the pure functions of `api.disaggregatedset.validation`; a refusal is upstream's
(a denial whose message lists every field error, `[spec.slices: Forbidden: ...]`),
with the warnings upstream gives. A role's `scheduling` is judged by the
LeaderWorkerSet webhook's rules for what the controller serves
(`disaggregatedset_validator(support)`, the manager's ControllerOptions.scheduling).
"""

from __future__ import annotations

from leaderworkerset.api.disaggregatedset.defaults import default_disaggregatedset
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.disaggregatedset.validation import (
    role_scheduling_errors,
    validate_create,
    validate_update,
    warnings_for,
)
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.objects import JSON
from leaderworkerset.runtime.webhook import (
    AdmissionHandler,
    AdmissionResponse,
    allow,
    deny,
    errored,
)

VALIDATING_PATH = "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"
# No provider, the gate off: a role that sets `scheduling` is refused.
UNCONFIGURED = SchedulingSupport()


def aggregate(errors: list[FieldError]) -> str:
    """Go's `ErrorList.ToAggregate().Error()`: one error as it is, several in brackets."""
    texts = list(dict.fromkeys(str(e) for e in errors))
    return texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"


def verdict(
    operation: str, obj: JSON, old: JSON | None, scheduling: SchedulingSupport = UNCONFIGURED
) -> AdmissionResponse:
    ds, errors = DisaggregatedSet.from_json(obj)
    if errors:
        return deny(aggregate(errors))
    ds = default_disaggregatedset(ds)
    previous = None
    if operation == "UPDATE" and old is not None:
        decoded, _ = DisaggregatedSet.from_json(old)
        previous = default_disaggregatedset(decoded)
        errors = validate_update(ds, previous)
    else:
        errors = validate_create(ds)
    errors += role_scheduling_errors(ds, previous, scheduling)
    warnings = warnings_for(ds)
    if errors:
        return deny(aggregate(errors), warnings=warnings)
    return allow(warnings=warnings)


def disaggregatedset_validator(scheduling: SchedulingSupport = UNCONFIGURED) -> AdmissionHandler:
    """The validating handler, for a controller that serves `scheduling`."""

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
        return verdict(operation, obj, old if isinstance(old, dict) else None, scheduling)

    return validate


# A controller that serves no spec.scheduling.
validate_disaggregatedset = disaggregatedset_validator()
