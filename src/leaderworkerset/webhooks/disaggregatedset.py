"""Admission of DisaggregatedSets: upstream v0.10.0's validating webhook, at its path.

Upstream has no defaulting webhook for the kind (the CRD schema's defaults are all);
the validator defaults the object it is handed the same way before checking it, so a
request that reached it without the API server's defaulting is judged alike. The rules
are the pure functions of `api.disaggregatedset.validation`; a refusal is upstream's
(a denial whose message lists every field error, `[spec.slices: Forbidden: ...]`),
with the warnings upstream gives.
"""

from __future__ import annotations

from leaderworkerset.api.disaggregatedset.defaults import default_disaggregatedset
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.disaggregatedset.validation import (
    validate_create,
    validate_update,
    warnings_for,
)
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.objects import JSON
from leaderworkerset.runtime.webhook import AdmissionResponse, allow, deny, errored

VALIDATING_PATH = "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"


def aggregate(errors: list[FieldError]) -> str:
    """Go's `ErrorList.ToAggregate().Error()`: one error as it is, several in brackets."""
    texts = list(dict.fromkeys(str(e) for e in errors))
    return texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"


def verdict(operation: str, obj: JSON, old: JSON | None) -> AdmissionResponse:
    ds, errors = DisaggregatedSet.from_json(obj)
    if errors:
        return deny(aggregate(errors))
    ds = default_disaggregatedset(ds)
    if operation == "UPDATE" and old is not None:
        previous, _ = DisaggregatedSet.from_json(old)
        errors = validate_update(ds, default_disaggregatedset(previous))
    else:
        errors = validate_create(ds)
    warnings = warnings_for(ds)
    if errors:
        return deny(aggregate(errors), warnings=warnings)
    return allow(warnings=warnings)


async def validate_disaggregatedset(request: JSON) -> AdmissionResponse:
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
    return verdict(operation, obj, old if isinstance(old, dict) else None)
