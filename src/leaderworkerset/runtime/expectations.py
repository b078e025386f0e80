"""Controller expectations: what a controller removed and its cache has not shown gone yet.

A reconcile that reads a cache which has not caught up with its own last writes
would act twice on the same object (the replacement reconciler would ungate a
leader its cache still shows gated, and count it as waiting). Before writing, the
controller records what it expects to disappear (a pod, or a scheduling gate on
it); the cache's handlers tick those off as events arrive; until all are seen (or
``ttl`` passes, client-go's ExpectationsTimeout, in case an event was lost for good)
``satisfied`` is False and the reconcile must not act on the cache's view of them.

Expectations are sets of object identities per kind, so an observation ticks off
exactly the object it is about and a stray or repeated event cannot make a counter
drift. (client-go also tracks creations; no controller here needs them.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class _Record:
    set_at: float
    deletions: dict[str, set[str]] = field(default_factory=dict)

    @property
    def fulfilled(self) -> bool:
        return not any(self.deletions.values())


class Expectations:
    """Pending removals per controller key (e.g. ``namespace/lws-name``) and kind.

    Record expectations *before* issuing the writes, and withdraw them
    (``deletion_observed`` works) for any write that failed, or ``satisfied`` stays
    False until the TTL.
    """

    def __init__(
        self, ttl: float = EXPECTATIONS_TIMEOUT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._records: dict[str, _Record] = {}

    def expect_deletions(self, controller_key: str, kind: str, names: Iterable[str]) -> None:
        record = self._record(controller_key)
        record.deletions.setdefault(kind, set()).update(names)

    def deletion_observed(self, controller_key: str, kind: str, name: str) -> None:
        record = self._records.get(controller_key)
        if record is not None and kind in record.deletions:
            record.deletions[kind].discard(name)
            if record.fulfilled:
                del self._records[controller_key]

    def satisfied(self, controller_key: str) -> bool:
        record = self._records.get(controller_key)
        if record is None or record.fulfilled:
            return True
        return self._expired(record)

    def pending(self, controller_key: str) -> dict[str, set[str]]:
        """Outstanding removals by kind."""
        record = self._records.get(controller_key)
        if record is None:
            return {}
        return {kind: set(names) for kind, names in record.deletions.items() if names}

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
