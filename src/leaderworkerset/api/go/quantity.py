"""Kubernetes resource quantities ("500m", "1Gi", 2) as exact decimals.

One parser for every place that reads quantities: revision comparison, TPU
detection and PodGroup minimum resources.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_SUFFIX_SCALE: Final = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_MILLI: Final = Decimal("0.001")


def parse_quantity(value: Any) -> Decimal | None:
    """The value of a quantity, or None when it is not one."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        amount = Decimal(number)
        if suffix in _SUFFIX_SCALE:
            amount *= _SUFFIX_SCALE[suffix]
        elif suffix:
            amount = amount.scaleb(int(suffix[1:]))
    except (InvalidOperation, ValueError):
        return None
    return amount


def format_quantity(amount: Decimal) -> str:
    """A quantity string for `amount`: whole numbers plain, fractions in milli-units
    (rounded up, as the API server rounds sub-milli precision)."""
    if amount == amount.to_integral_value():
        return str(int(amount))
    millis = (amount / _MILLI).to_integral_value(rounding="ROUND_CEILING")
    return f"{int(millis)}m"


def sum_resources(*lists: dict[str, Any], times: int = 1) -> dict[str, Decimal]:
    """Per-resource sums of several resource lists, each counted `times` times."""
    out: dict[str, Decimal] = {}
    for resources in lists:
        for name, value in (resources or {}).items():
            amount = parse_quantity(value)
            if amount is not None:
                out[name] = out.get(name, Decimal(0)) + amount * times
    return out
