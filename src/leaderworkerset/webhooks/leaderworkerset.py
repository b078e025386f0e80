"""Admission of LeaderWorkerSets: the defaulting and validation glue.

The rules themselves are the pure functions of `api/`; this module turns an
AdmissionRequest's objects into their verdicts. Status and scale writes never
reach it (the webhooks are registered for the main resource only), which is
why `kubectl scale` and an HPA bypass validation, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.api.defaults import default_leaderworkerset
from leaderworkerset.api.errors import FieldError, InvalidObjectError
from leaderworkerset.api.types import LeaderWorkerSet
from leaderworkerset.api.validation import validate_create, validate_update, warnings_for

MUTATING_PATH = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
VALIDATING_PATH = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"


@dataclass
class Verdict:
    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)


def default_object(obj: dict[str, Any]) -> dict[str, Any]:
    """The defaulted object; the caller turns the difference into add/replace operations,
    so members this code does not know are never removed."""
    lws, _ = LeaderWorkerSet.from_json(obj)
    return default_leaderworkerset(lws).to_json()


def validate_object(
    operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> Verdict:
    lws, errors = LeaderWorkerSet.from_json(obj)
    if operation == "UPDATE" and old is not None:
        previous, _ = LeaderWorkerSet.from_json(old)
        errors += validate_update(lws, previous)
    else:
        errors += validate_create(lws)
    warnings = warnings_for(lws)
    if errors:
        message = InvalidObjectError(c.KIND, lws.name, errors).message
        return Verdict(False, message, warnings, errors)
    return Verdict(True, "", warnings)
