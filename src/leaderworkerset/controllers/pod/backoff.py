"""Per-pod retry delays for conditions the pod reconciler waits out by polling.

A missing revision or a foreign Service in the way produces no watch event when it
resolves (the revision cache is not watched by this controller, and a Service that
is not the leader's does not map to it), so the reconciler asks to be called again.
A fixed short delay would poll forever at that rate; instead each delay is as long
as the condition has lasted so far (so the retries double), within bounds, and the
count starts over once the condition clears. Measuring the time rather than counting
tries keeps the unrelated events that also reconcile the pod (its own status
updates) from stretching the delay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# The first retry stays short: right after a rollout starts the revision can simply be
# late in the cache.
FIRST_DELAY = 1.0
MAX_DELAY = 60.0


@dataclass
class RetryBackoff:
    first: float = FIRST_DELAY
    cap: float = MAX_DELAY
    clock: Callable[[], float] = time.monotonic
    # key -> (when the condition was first seen, tries that met it since)
    _waits: dict[str, tuple[float, int]] = field(default_factory=dict)

    def next(self, key: str) -> tuple[float, int]:
        """(the delay before the next try, how many earlier tries met the condition)."""
        now = self.clock()
        since, tries = self._waits.get(key, (now, 0))
        self._waits[key] = (since, tries + 1)
        return min(max(self.first, now - since), self.cap), tries

    def forget(self, key: str) -> None:
        self._waits.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._waits

    def __len__(self) -> int:
        return len(self._waits)
