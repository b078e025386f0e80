"""A resource quantity as Go's `resource.Quantity` writes it back after reading it.

Go keeps the text it parsed only when that text is already canonical ("500m", "1Gi",
"2"); otherwise it prints a canonical form: "1000m" becomes "1", "1024Mi" "1Gi",
"0.5" "500m", "1.5Gi" "1536Mi". Upstream's revision hash covers that text, so it is
reproduced here exactly, including Go's rounding up to nano units and its choice
between decimal (k, M, ...), binary (Ki, Mi, ...) and exponent (e3) suffixes.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Decimal, localcontext
from enum import Enum
from typing import Final

_SYNTAX = re.compile(r"^([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP][-+0-9a-zA-Z]*)?$")
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
_MAX_INT64: Final = 2**63 - 1
# Digits an int64 always holds (Go's maxInt64Factors).
_INT64_DIGITS: Final = 18


class Format(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


def go_quantity_text(text: str) -> str:
    """What Go's Quantity.MarshalJSON writes for a quantity it read from `text`."""
    text = text.strip()
    if text == "0":
        return text
    match = _SYNTAX.match(text) if text else None
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    sign, _, whole, fraction, suffix = match.groups()
    whole, fraction, suffix = whole or "0", fraction or "", suffix or ""
    base, exponent, form = _interpret(suffix)
    if _kept_as_written(whole, fraction, exponent, form):
        return text
    # Exact arithmetic: a quantity has at most a few dozen digits.
    with localcontext() as context:
        context.prec = 200
        amount = Decimal(f"{whole}.{fraction or '0'}")
        amount = amount.scaleb(exponent) if base == 10 else amount * (2**exponent)
        # Go keeps nano precision, rounding the magnitude up.
        amount = amount.quantize(_NANO, rounding=ROUND_UP) if amount % _NANO else amount
        if form is Format.BINARY_SI:
            amount = min(amount, Decimal(_MAX_INT64))
            if 0 < amount < 1:
                form = Format.DECIMAL_SI
        return _canonical(-amount if sign == "-" else amount, form)


def _interpret(suffix: str) -> tuple[int, int, Format]:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[-+]?[0-9]+", suffix[1:]):
        return 10, int(suffix[1:]), Format.DECIMAL_EXPONENT
    raise ValueError(f"not a quantity suffix: {suffix!r}")


def _kept_as_written(whole: str, fraction: str, exponent: int, form: Format) -> bool:
    """Go's fast path keeps the parsed text when it fits an int64 and is canonical."""
    if form is Format.BINARY_SI:
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
