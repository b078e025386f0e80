"""Integer parsing and arithmetic that behave like Go's.

Sizes and indices in annotations and labels are parsed and divided the way the
upstream controller does, so that the same input yields the same groups and the
same error text.
"""

from __future__ import annotations

import json
import re

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class GoIntError(ValueError):
    """A string Go's strconv.Atoi rejects; the message is Go's own."""


def go_atoi(text: str) -> int:
    """Parse like Go's strconv.Atoi.

    Python's int() accepts spaces and underscores that Go rejects, and users
    compare these messages with the upstream controller's.
    """
    if isinstance(text, str) and len(text) < 19 and text.isascii() and text.isdigit():
        return int(text)  # the usual size or index, read without building an error text
    quoted = json.dumps(text, ensure_ascii=False)
    if _DECIMAL.fullmatch(text) is None:
        raise GoIntError(f"strconv.Atoi: parsing {quoted}: invalid syntax")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise GoIntError(f"strconv.Atoi: parsing {quoted}: value out of range")
    return value


def go_atoi_or_none(value: object) -> int | None:
    """`go_atoi` for a value read off an object (a label, an annotation): None when it
    is not a string Go's strconv.Atoi reads."""
    if not isinstance(value, str):
        return None
    try:
        return go_atoi(value)
    except GoIntError:
        return None


def go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero; Python's floors."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def go_mod(a: int, b: int) -> int:
    return a - b * go_div(a, b)
