"""JSON compared by meaning rather than by bytes, for revision update detection:
the Go controller and this one serialize the same spec
differently, and taking over a Go-written ControllerRevision must not look like
a template change (which would roll every group). See
docs/upstream-deviations.md#semantic-revision-comparison."""

from __future__ import annotations

from typing import Any, Final

from leaderworkerset.api.go.quantity import parse_quantity

_QUANTITY_MAPS: Final = frozenset({"requests", "limits", "overhead"})


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
            if parent == "resourceFieldRef" and key == "divisor" and _is_zero(item):
                # Go writes an unset divisor as "0", which the kubelet reads as 1, as absent.
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
    amount = parse_quantity(value)
    return value if amount is None else ("quantity", str(amount.normalize()))


def _is_zero(value: Any) -> bool:
    amount = parse_quantity(value)
    return amount is not None and amount == 0
