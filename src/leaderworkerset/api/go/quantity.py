"""Kubernetes resource quantities ("500m", "1Gi", 2): their value and their text.

One parser of the syntax Go's `resource.ParseQuantity` accepts (sign, digits, an
optional fraction, an optional suffix) serves both readings of a quantity:

* its value, an exact Decimal, for every place that compares or adds quantities:
  revision comparison, TPU detection and PodGroup minimum resources;
* the canonical text Go's `resource.Quantity` writes back after reading it, which
  upstream's DisaggregatedSet revision hash covers (`api/go/encoding.py`). Go keeps
  the text it parsed only when that text is already canonical ("500m", "1Gi", "2");
  otherwise it prints a canonical form: "1000m" becomes "1", "1024Mi" "1Gi", "0.5"
  "500m", "1.5Gi" "1536Mi", rounding up to nano units and choosing between decimal
  (k, M, ...), binary (Ki, Mi, ...) and exponent (e3) suffixes as Go does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal, localcontext
from enum import Enum
from typing import Any, Final

# Go's grammar: [+-] digits [. digits] [suffix]; which suffixes exist is _SUFFIXES' say.
_SYNTAX: Final = re.compile(r"([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP][-+0-9a-zA-Z]*)?")
_EXPONENT: Final = re.compile(r"[eE]([-+]?[0-9]+)")


class Format(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SUFFIXES: Final = {
    "": 0,
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT: Final = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = {0: "", **{p // 10: s for s, p in _BINARY_SUFFIXES.items()}}
_NANO: Final = Decimal("1e-9")
_MILLI: Final = Decimal("0.001")
_MAX_INT64: Final = 2**63 - 1
# Digits an int64 always holds (Go's maxInt64Factors).
_INT64_DIGITS: Final = 18
# Enough digits for any quantity exactly: they have at most a few dozen.
_EXACT: Final = 200


@dataclass(frozen=True)
class _Parsed:
    """A quantity's text taken apart: amount = ±whole.fraction x base**exponent."""

    text: str
    negative: bool
    whole: str  # without leading zeros, "" when none are left
    fraction: str
    base: int
    exponent: int
    form: Format
    has_digits: bool  # Go reads "+", "-" and "." as zero; parse_quantity does not

    @property
    def value(self) -> Decimal:
        digits = (self.whole or "0") + (f".{self.fraction}" if self.fraction else "")
        number = Decimal(f"-{digits}" if self.negative else digits)
        with localcontext() as context:
            context.prec = _EXACT
            if self.base == 10:
                return number.scaleb(self.exponent)
            return number * (1 << self.exponent)


def _parse(text: str) -> _Parsed:
    text = text.strip()
    match = _SYNTAX.fullmatch(text) if text else None
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    sign, zeros, whole, fraction, suffix = match.groups()
    fraction, suffix = fraction or "", suffix or ""
    if suffix in _DECIMAL_SUFFIXES:
        base, exponent, form = 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    elif suffix in _BINARY_SUFFIXES:
        base, exponent, form = 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    elif exponent_match := _EXPONENT.fullmatch(suffix):
        base, exponent, form = 10, int(exponent_match[1]), Format.DECIMAL_EXPONENT
    else:
        raise ValueError(f"not a quantity suffix: {suffix!r}")
    has_digits = bool(zeros or whole or fraction)
    return _Parsed(text, sign == "-", whole, fraction, base, exponent, form, has_digits)


# --- the value ------------------------------------------------------------------------------------
def parse_quantity(value: Any) -> Decimal | None:
    """The value of a quantity, or None when it is not one."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        parsed = _parse(str(value))
        return parsed.value if parsed.has_digits else None
    except (ArithmeticError, ValueError):
        return None


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


# --- the text Go writes back ----------------------------------------------------------------------
def go_quantity_text(text: str) -> str:
    """What Go's Quantity.MarshalJSON writes for a quantity it read from `text`."""
    if text.strip() == "0":
        return "0"
    parsed = _parse(text)
    if _kept_as_written(parsed):
        return parsed.text
    form = parsed.form
    with localcontext() as context:
        context.prec = _EXACT
        amount = abs(parsed.value)
        # Go keeps nano precision, rounding the magnitude up.
        amount = amount.quantize(_NANO, rounding=ROUND_UP) if amount % _NANO else amount
        if form is Format.BINARY_SI:
            amount = min(amount, Decimal(_MAX_INT64))
            if 0 < amount < 1:
                form = Format.DECIMAL_SI
        return _canonical(-amount if parsed.negative else amount, form)


def _kept_as_written(parsed: _Parsed) -> bool:
    """Go's fast path keeps the parsed text when it fits an int64 and is canonical."""
    whole, fraction, exponent = parsed.whole or "0", parsed.fraction, parsed.exponent
    if parsed.form is Format.BINARY_SI:
        if fraction or exponent < 0:
            return False
        precision = 15 - len(whole) - int(exponent * 3 / 10) - 1
        value = int(whole)
        fits = value * 2**exponent <= _MAX_INT64
        return precision >= 0 and fits and exponent % 10 == 0 and value & 0x07 != 0
    if _INT64_DIGITS - len(whole) - len(fraction) < 0:
        return False
    scale = exponent - len(fraction)
    shifted = whole + fraction
    if scale < -9 or int(shifted) > _MAX_INT64:
        return False
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _canonical(amount: Decimal, form: Format) -> str:
    if amount == 0:
        return "0"
    if form is Format.BINARY_SI and not -1024 < amount < 1024:
        rounded = amount.to_integral_value(rounding=ROUND_UP)
        if rounded == amount:
            return _binary(int(rounded))
    if form is Format.BINARY_SI:
        form = Format.DECIMAL_SI
    mantissa, exponent = _mantissa_exponent(amount)
    if form is Format.DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    # Go prints no suffix for an exponent it has none for (1e21 and up).
    return f"{mantissa}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"


def _mantissa_exponent(amount: Decimal) -> tuple[int, int]:
    """amount = mantissa x 10**exponent, exponent a multiple of 3, as few digits as that
    allows (Go's AsCanonicalBytes)."""
    sign, digits, exponent = amount.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digits)))
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return (-mantissa if sign else mantissa), exponent


def _binary(value: int) -> str:
    power = 0
    magnitude = abs(value)
    while magnitude % 1024 == 0:
        magnitude //= 1024
        power += 1
    number = -magnitude if value < 0 else magnitude
    return f"{number}{_BINARY_BY_POWER.get(power, '')}"
