"""Controller expectations: what a controller created or deleted and its cache has not shown yet.

A reconcile that reads a cache which has not caught up with its own last writes
would create the same object twice or delete one twice. Before writing, the
controller records what it expects to appear or disappear; the cache's handlers
tick those off as events arrive; until all are seen (or ``ttl`` passes, client-go's
ExpectationsTimeout, in case an event was lost for good) ``satisfied`` is False
and the reconcile must not act on the cache's view of those objects.

Expectations are sets of object identities (``namespace/name`` for creations,
whose UID is not known beforehand; name or UID for deletions), so an observation
ticks off exactly the object it is about and a stray or repeated event cannot
make a counter drift. A bare count is accepted for ``generateName`` creations,
whose names the controller cannot know in advance.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class _Pending:
    names: set[str] = field(default_factory=set)
    count: int = 0

    @property
    def empty(self) -> bool:
        return not self.names and self.count <= 0

    def observe(self, name: str) -> None:
        if name in self.names:
            self.names.discard(name)
        elif self.count > 0:
            self.count -= 1


@dataclass
class _Record:
    set_at: float
    creations: dict[str, _Pending] = field(default_factory=dict)
    deletions: dict[str, _Pending] = field(default_factory=dict)

    @property
    def fulfilled(self) -> bool:
        return all(p.empty for p in self.creations.values()) and all(
            p.empty for p in self.deletions.values()
        )


class Expectations:
    """Pending creations and deletions per controller key (e.g. ``namespace/lws-name``).

    Record expectations *before* issuing the writes, and withdraw them (``*_observed``
    works) for any write that failed, or ``satisfied`` stays False until the TTL.
    """

    def __init__(
        self, ttl: float = EXPECTATIONS_TIMEOUT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._records: dict[str, _Record] = {}

    def expect_creations(self, controller_key: str, kind: str, names: Iterable[str] | int) -> None:
        record = self._record(controller_key)
        _add(record.creations.setdefault(kind, _Pending()), names)

    def expect_deletions(self, controller_key: str, kind: str, names: Iterable[str] | int) -> None:
        record = self._record(controller_key)
        _add(record.deletions.setdefault(kind, _Pending()), names)

    def creation_observed(self, controller_key: str, kind: str, name: str) -> None:
        record = self._records.get(controller_key)
        if record is not None and kind in record.creations:
            record.creations[kind].observe(name)
            self._prune(controller_key, record)

    def deletion_observed(self, controller_key: str, kind: str, name: str) -> None:
        record = self._records.get(controller_key)
        if record is not None and kind in record.deletions:
            record.deletions[kind].observe(name)
            self._prune(controller_key, record)

    def satisfied(self, controller_key: str) -> bool:
        record = self._records.get(controller_key)
        if record is None or record.fulfilled:
            return True
        return self._expired(record)

    def pending(self, controller_key: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """Outstanding (creations, deletions) by kind, for logs; counts show as ``#n``."""
        record = self._records.get(controller_key)
        if record is None:
            return {}, {}
        return _describe(record.creations), _describe(record.deletions)

    def delete(self, controller_key: str) -> None:
        """Forget a controller's expectations, e.g. when its object is deleted."""
        self._records.pop(controller_key, None)

    def __len__(self) -> int:
        return len(self._records)

    def _record(self, controller_key: str) -> _Record:
        now = self._clock()
        record = self._records.get(controller_key)
        if record is None or self._expired(record):
            record = self._records[controller_key] = _Record(now)
        else:
            # New writes restart the clock: the TTL bounds how long one batch may lag.
            record.set_at = now
        return record

    def _expired(self, record: _Record) -> bool:
        return self._clock() - record.set_at > self.ttl

    def _prune(self, controller_key: str, record: _Record) -> None:
        if record.fulfilled:
            del self._records[controller_key]


def _add(pending: _Pending, names: Iterable[str] | int) -> None:
    if isinstance(names, int):
        pending.count += names
    else:
        pending.names.update(names)


def _describe(by_kind: dict[str, _Pending]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for kind, pending in by_kind.items():
        if pending.empty:
            continue
        out[kind] = set(pending.names) | ({f"#{pending.count}"} if pending.count > 0 else set())
    return out
