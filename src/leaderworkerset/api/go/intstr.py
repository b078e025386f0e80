"""Int-or-percent arithmetic (Kubernetes `intstr.GetScaledValueFromIntOrPercent`).

Shared by validation and by the rolling-update arithmetic, which must round the
same way: maxUnavailable rounds down, maxSurge rounds up.
"""

from __future__ import annotations

import re

IntOrString = int | str

PERCENT_PATTERN = re.compile(r"^[0-9]+%$")


def is_percent(value: IntOrString) -> bool:
    return isinstance(value, str) and PERCENT_PATTERN.fullmatch(value) is not None


def scaled_value(value: IntOrString, total: int, round_up: bool) -> int:
    """An int as is; "N%" as N% of total, rounded as asked. ValueError for other strings."""
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(f"invalid type: string is not a percentage: {value!r}")
    try:
        percent = int(value[:-1])
    except ValueError as exc:
        raise ValueError(f"invalid value for IntOrString: invalid value {value!r}") from exc
    product = percent * total
    return -(-product // 100) if round_up else product // 100
