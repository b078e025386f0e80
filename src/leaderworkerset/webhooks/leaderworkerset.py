"""Admission of LeaderWorkerSets: the defaulting and validation glue.

The rules themselves are the pure functions of `api/`; this module turns an
AdmissionRequest's objects into their verdicts. Status and scale writes never
reach it (the webhooks are registered for the main resource only), which is
why `kubectl scale` and an HPA bypass validation, as upstream.

What the API server would say of the workloads built from a LeaderWorkerSet is
asked by a `TemplateCheck` the wiring hands in (the webhooks may not import the
controllers, which build them); its causes join the verdict's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.errors import FieldError, InvalidObjectError
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.admission import admission_errors, admitted
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import warnings_for

MUTATING_PATH = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
# A controller with no scheduler provider and the WorkloadAwareScheduling gate off.
UNCONFIGURED = SchedulingSupport()
VALIDATING_PATH = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"


@dataclass(frozen=True)
class Cause:
    """One entry of a 422's `details.causes`: the field, the `FieldValueXxx` reason and
    the message after the field (e.g. `Invalid value: "x": must be ...`)."""

    field: str
    reason: str
    message: str

    @classmethod
    def of(cls, error: FieldError) -> Cause:
        return cls(error.field, error.type.reason, str(error).split(": ", 1)[1])

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


# (the defaulted LWS, the old one on UPDATE) -> the causes of what the API server
# refuses in the workloads built from it; empty when it accepts them or cannot tell.
TemplateCheck = Callable[[dict[str, Any], dict[str, Any] | None], Awaitable[list[Cause]]]


@dataclass
class Verdict:
    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)


def invalid_message(name: str, causes: list[Cause]) -> str:
    """The API server's `is invalid` wording for an object and its causes (as
    `InvalidObjectError` words field errors)."""
    joined = ", ".join(str(cause) for cause in causes)
    body = joined if len(causes) == 1 else f"[{joined}]"
    return f"{c.KIND}.{c.GROUP} {json.dumps(name)} is invalid: {body}"


def defaulted_or_refused(obj: dict[str, Any]) -> dict[str, Any] | Verdict:
    """The mutating webhook's answer from one decoding: the defaulted object (the
    caller turns the difference into add/replace operations, so members this code does
    not know are never removed), or the refusal of an object with a member of the
    wrong type.

    Such an object must not be defaulted: the patch would replace the user's value
    (`replicas: "three"` stored as 1) before the API server's schema check sees it.
    Upstream's webhook refuses it too (it cannot decode it)."""
    lws, errors = admitted(obj)
    if errors:
        return _refused(lws.name, errors, warnings=[])
    return lws.to_json()


def _refused(name: str, errors: list[FieldError], warnings: list[str]) -> Verdict:
    message = InvalidObjectError(c.KIND, name, errors).message
    return Verdict(False, message, warnings, [Cause.of(e) for e in errors])


def validate_object(
    operation: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
    limits: SizeLimits | None = None,
    scheduling: SchedulingSupport = UNCONFIGURED,
) -> Verdict:
    """`scheduling`: what this controller serves of `spec.scheduling` (the default, no
    provider and the gate off, refuses every object that sets it)."""
    lws, errors = LeaderWorkerSet.from_json(obj)
    previous = None
    if operation == "UPDATE" and old is not None:
        previous, _ = LeaderWorkerSet.from_json(old)
    errors += admission_errors(lws, previous, limits=limits, scheduling=scheduling)
    warnings = warnings_for(lws)
    if errors:
        return _refused(lws.name, errors, warnings)
    return Verdict(True, "", warnings)


async def validate_with_workloads(
    operation: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    check: TemplateCheck | None,
    limits: SizeLimits | None = None,
    scheduling: SchedulingSupport = UNCONFIGURED,
) -> Verdict:
    """`validate_object`, then, for an object that passes, the template check: the
    workloads are only worth asking about once the LWS's own rules hold."""
    verdict = validate_object(operation, obj, old, limits, scheduling)
    if not verdict.allowed or check is None or operation not in ("CREATE", "UPDATE"):
        return verdict
    causes = await check(obj, old if operation == "UPDATE" else None)
    if not causes:
        return verdict
    name = str((obj.get("metadata") or {}).get("name") or "")
    return Verdict(False, invalid_message(name, causes), verdict.warnings, causes)
