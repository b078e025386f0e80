"""JSON compared by meaning rather than by bytes, for revision update detection
(spec §6.3.5): the Go controller and this one serialize the same spec
differently, and taking over a Go-written ControllerRevision must not look like
a template change (which would roll every group)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final

_QUANTITY_MAPS: Final = frozenset({"requests", "limits", "overhead"})
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


def normalized(value: Any, parent: str = "") -> Any:
    """What survives any serializer: null members and empty objects/lists are dropped
    (Go writes `"creationTimestamp":null` and `"resources":{}`, the API server's JSON
    omits them), and resource quantities compare by value ("500m" == 0.5). Dropping
    `{}` is safe for pod templates: both sides lose it alike, and the one place it
    carries meaning (`emptyDir: {}`) is also the default of a volume without source."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item is None:
                continue
            if parent in _QUANTITY_MAPS:
                item = _quantity_value(item)
            item = normalized(item, key)
            if item == {} or item == []:
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def _quantity_value(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        return value
    number, suffix = match.groups()
    try:
        amount = Decimal(number)
        if suffix in _SUFFIX_SCALE:
            amount *= _SUFFIX_SCALE[suffix]
        elif suffix:
            amount = amount.scaleb(int(suffix[1:]))
    except (InvalidOperation, ValueError):
        return value
    return ("quantity", str(amount.normalize()))
