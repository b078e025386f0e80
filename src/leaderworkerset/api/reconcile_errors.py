"""The failure a reconcile reports on purpose, below every layer that raises or counts it."""

from __future__ import annotations


class ReconcileError(Exception):
    """A reconcile that cannot go on for a reason its message gives (a user's setting,
    an object in the way): retried with back-off and logged without a traceback, and
    not counted as a panic, which is kept for what the code did not expect."""
