"""Go's `time.Duration` text form (`1m30s`, `500ms`), in float seconds."""

from __future__ import annotations

import re

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds (`1m30s`, `500ms`, `-2h`, `0`)."""
    original, sign = text, 1.0
    if text[:1] in "+-" and text:
        sign, text = (-1.0 if text[0] == "-" else 1.0), text[1:]
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            raise ValueError(f'time: invalid duration "{original}"')
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not text:
        raise ValueError(f'time: invalid duration "{original}"')
    return sign * total


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling (`15s`, `1m30s`, `500ms`)."""
    if seconds == 0:
        return "0s"
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{int(hours)}h" if hours else ""
    out += f"{int(minutes)}m" if hours or minutes else ""
    return f"{sign}{out}{secs:g}s"


class Duration(float):
    """A float of seconds that a file spells as a Go duration string."""
