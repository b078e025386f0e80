"""The LeaderWorkerSet admission chain's own rules, in one place for everything that
judges a LeaderWorkerSet as its webhooks do: the LeaderWorkerSet webhooks themselves
(`webhooks.leaderworkerset`), and the DisaggregatedSet webhook, which judges each
role's LeaderWorkerSet before the controller sends it (`api.disaggregatedset.role_admission`).

- `admitted`: what the mutating webhook makes of an object (decoded, with the CRD
  schema's defaults and its own), or the decoding errors it refuses;
- `admission_errors`: what the validating webhook then refuses on create or update,
  the API server's own checks of the schema included (`validation`), plus the rules
  that depend on what the controller is configured with: `spec.scheduling` for what
  it serves, and the cluster's size limits.

The one stage left out is the dry run of the workloads built from the object
(`admission_dryrun`), which asks the API server and so cannot live in `api/`.
"""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.leaderworkerset.defaults import default_leaderworkerset
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.scheduling_validation import validate_scheduling
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import validate_create, validate_update

# No scheduler provider and the WorkloadAwareScheduling gate off: an object that sets
# spec.scheduling is refused.
UNCONFIGURED = SchedulingSupport()


def admitted(obj: dict[str, Any]) -> tuple[LeaderWorkerSet, list[FieldError]]:
    """The object as the mutating webhook patches it, and no errors; or, when it has a
    member of the wrong type, the object as decoded and the errors the webhook refuses
    it with (it is not defaulted then)."""
    lws, errors = LeaderWorkerSet.from_json(obj)
    if errors:
        return lws, errors
    return default_leaderworkerset(lws), []


def admission_errors(
    lws: LeaderWorkerSet,
    old: LeaderWorkerSet | None = None,
    *,
    limits: SizeLimits | None = None,
    scheduling: SchedulingSupport = UNCONFIGURED,
) -> list[FieldError]:
    """Every error the validating webhook finds in the defaulted `lws`: created when
    `old` is None, else updated from the stored `old`."""
    errors = validate_create(lws) if old is None else validate_update(lws, old)
    errors += validate_scheduling(lws, old, scheduling)
    if limits is not None:
        errors += limits.errors(lws, old)
    return errors
