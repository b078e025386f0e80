"""How a retry loop reports its failures, so that routine ones do not read as faults.

An API server answers some requests with errors in normal operation, and a client that
retries gets past them: 429 while the storage of a resource is (re)initializing (a CRD
just created, an API server just started), 410 for a resourceVersion it no longer keeps,
a watch it ends early, and while it restarts refused connections and 5xx answers. Those
are logged at debug. The same failures still there after :data:`PERSISTENT_TRIES` tries
or :data:`PERSISTENT_SECONDS` seconds are logged once at warning (the API server is
down, or overloaded, for longer than a restart takes), and the recovery after that
warning at info. Any other failure (403: the RBAC is missing a rule; 404: the resource
is not served) is a fault to fix and is logged at warning every time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiError

# A streak of routine failures this long is no longer routine. The informers' backoff
# (0.2 s doubling to 30 s, jittered down by up to half) reaches 8 tries after 25-51 s,
# so the 30 s bound usually comes first; an API server restart (5-15 s here) stays below.
PERSISTENT_TRIES = 8
PERSISTENT_SECONDS = 30.0

# 408 and 504: the API server timed a request out; 429: too many requests, or the
# storage of the resource is (re)initializing; 410: the version asked for has expired.
_ROUTINE_STATUSES = frozenset({408, 410, 429, 504})


def routine_failure(exc: BaseException | None) -> bool:
    """A failure that normal operation of an API server causes and a retry gets past;
    None stands for a stream the server ended early without an error."""
    if exc is None:
        return True
    if isinstance(exc, ApiError):
        return exc.status in _ROUTINE_STATUSES or exc.status >= 500
    return isinstance(exc, TRANSPORT_ERRORS)


class FailureStreak:
    """The consecutive failures of one retry loop, and the level each is logged at.

    :meth:`failed` logs one failure (``message % args``, then the error) at the level
    the module docstring gives; :meth:`succeeded` ends the streak.
    """

    def __init__(
        self,
        logger: logging.Logger,
        name: str,
        *,
        tries: int = PERSISTENT_TRIES,
        seconds: float = PERSISTENT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = logger
        self.name = name
        self.tries = tries
        self.seconds = seconds
        self.clock = clock
        self.failures = 0
        self._since = 0.0
        self.warned = False

    def failed(self, exc: BaseException | None, message: str, *args: object) -> int:
        """Log one failure; returns the level it was logged at."""
        now = self.clock()
        if self.failures == 0:
            self._since = now
        self.failures += 1
        lasted = now - self._since
        error = exc if exc is not None else "stream closed early"
        if not routine_failure(exc):
            level = logging.WARNING
        elif not self.warned and (self.failures >= self.tries or lasted >= self.seconds):
            level = logging.WARNING
            self.warned = True
            message += " (failing for %.0fs, %d tries; further failures are logged at debug)"
            args = (*args, lasted, self.failures)
        else:
            level = logging.DEBUG
        self.log.log(level, "%s: " + message + ": %s", self.name, *args, error)
        return level

    def succeeded(self, what: str = "working again") -> None:
        """End the streak; after a warning, say so at info."""
        if self.warned:
            self.log.info(
                "%s: %s after %d failed tries over %.0fs",
                self.name,
                what,
                self.failures,
                self.clock() - self._since,
            )
        self.failures = 0
        self.warned = False
