"""Times as the API writes them, and ages as `kubectl get` prints them."""

from __future__ import annotations

from datetime import UTC, datetime

from leaderworkerset.api.objects import timestamp_of


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp (whole seconds or with a fraction); None when absent."""
    seconds = timestamp_of(value)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def human_age(seconds: float) -> str:
    """kubectl's AGE column: exact while short, coarser as it grows (5s, 3m10s, 2h, 4d)."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def age_since(timestamp: object, now: datetime) -> str:
    """The age of an object from one of its timestamps; "<unknown>" without one."""
    then = parse_time(timestamp)
    if then is None:
        return "<unknown>"
    return human_age((now - then).total_seconds())
