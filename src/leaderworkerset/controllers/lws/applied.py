"""Skipping server-side applies that would change nothing.

A reconcile is level-triggered and runs on every event, but it must not write
when nothing changed. The apply body is a partial object and the live one has
defaults and status added, so the two cannot be compared for equality; instead
we remember the digest of the body we last applied and the resourceVersion the
server answered, and skip when the body is the same and the object is either
untouched since or still contains every member we set.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from leaderworkerset.api.objects import JSON, meta_of


def contains(desired: Any, live: Any) -> bool:
    """Every member of `desired` is in `live` with the same value (lists: same length,
    element-wise); members only `live` has (defaults, status) are ignored."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        return all(k in live and contains(v, live[k]) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        return all(contains(d, v) for d, v in zip(desired, live, strict=True))
    return bool(desired == live)


def digest(body: JSON) -> str:
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


class AppliedObjects:
    """What this process last applied, per object key."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, str]] = {}

    def needs_apply(self, key: str, body: JSON, live: JSON | None) -> bool:
        if live is None:
            return True
        last = self._last.get(key)
        # After a restart we do not know what was applied before (a member we no
        # longer set would linger), so the first apply always goes out.
        if last is None or last[0] != digest(body):
            return True
        live_version = meta_of(live).get("resourceVersion", "")
        return last[1] != live_version and not contains(body, live)

    def record(self, key: str, body: JSON, answer: JSON) -> None:
        version = meta_of(answer).get("resourceVersion", "")
        self._last[key] = (digest(body), str(version))

    def known(self, key: str) -> bool:
        return key in self._last

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
