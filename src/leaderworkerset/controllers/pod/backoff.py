"""Per-pod retry delays for conditions the pod reconciler waits out by polling.

A missing revision or a foreign Service in the way produces no watch event when it
resolves (the revision cache is not watched by this controller, and a Service that
is not the leader's does not map to it), so the reconciler asks to be called again.
A fixed short delay would poll forever at that rate; the delay doubles up to a
bound instead, and starts over once the condition clears.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The first retry stays short: right after a rollout starts the revision can simply be
# late in the cache.
FIRST_DELAY = 1.0
MAX_DELAY = 60.0


@dataclass
class RetryBackoff:
    first: float = FIRST_DELAY
    cap: float = MAX_DELAY
    _attempts: dict[str, int] = field(default_factory=dict)

    def next(self, key: str) -> tuple[float, int]:
        """(the delay before the next try, how many tries failed before this one)."""
        attempts = self._attempts.get(key, 0)
        self._attempts[key] = attempts + 1
        # min() first keeps the power small however long the condition lasts.
        return min(self.first * 2 ** min(attempts, 32), self.cap), attempts

    def forget(self, key: str) -> None:
        self._attempts.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._attempts
