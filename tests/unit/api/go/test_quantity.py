"""Resource quantities: their value, and the text Go writes back after reading them.

Each expected text is what k8s.io/apimachinery's resource.Quantity (v0.36) prints after
reading the input, recorded from a run of Go's json.Unmarshal and json.Marshal on it.
The properties tie the two readings together: the text Go writes back has the value of
the text it read (up to Go's rounding to nano units and its int64 cap on binary ones).
"""

from __future__ import annotations

from decimal import ROUND_UP, Decimal, localcontext
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from leaderworkerset.api.go.quantity import (
    format_quantity,
    go_quantity_text,
    parse_quantity,
    sum_resources,
)


# --- the value ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("1Gi", Decimal(2**30)),
        ("2", Decimal(2)),
        (3, Decimal(3)),
        ("1e3", Decimal(1000)),
        ("1.5k", Decimal(1500)),
        ("abc", None),
        (True, None),
    ],
)
def test_parse_quantity(text: Any, value: Decimal | None) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", " ", "+", "-", ".", "-.e3", "1K", "1e", "1e+", "1.2.3"])
def test_a_quantity_has_digits_and_a_known_suffix(text: str) -> None:
    assert parse_quantity(text) is None


def test_format_and_sum() -> None:
    assert format_quantity(Decimal("2.5")) == "2500m"
    assert format_quantity(Decimal("0.0001")) == "1m"
    assert format_quantity(Decimal(4)) == "4"
    assert sum_resources({"cpu": "1"}, {"cpu": "500m", "x": "bad"}) == {"cpu": Decimal("1.5")}


# --- the text Go writes back ----------------------------------------------------------------------
GO_OUTPUTS = [
    ("0", "0"),
    ("00", "0"),
    ("2", "2"),
    ("+1", "+1"),
    ("-1", "-1"),
    ("500m", "500m"),
    ("1000m", "1"),
    ("1500m", "1500m"),
    ("0.5", "500m"),
    ("1.5", "1500m"),
    ("1Gi", "1Gi"),
    ("8Gi", "8Gi"),
    ("1024Mi", "1Gi"),
    ("1.5Gi", "1536Mi"),
    ("0.5Gi", "512Mi"),
    ("0.5Ki", "512"),
    ("1023", "1023"),
    ("1024", "1024"),
    ("1e3", "1e3"),
    ("1e4", "10e3"),
    ("1E3", "1E3"),
    ("1.5e3", "1500"),
    ("100M", "100M"),
    ("1000000", "1M"),
    ("1000k", "1M"),
    ("0.1m", "100u"),
    ("1n", "1n"),
    ("0.1n", "1n"),
    ("16Ei", "9223372036854775807"),
    ("99999999999999999999", "99999999999999999999"),
    ("1000E", "1"),
    ("10.0", "10"),
    ("-500m", "-500m"),
    ("-1.5Gi", "-1536Mi"),
    ("129e6", "129e6"),
    ("1024Ti", "1Pi"),
    ("12Mi", "12Mi"),
    ("1.1Gi", "1181116006400m"),
    ("3Mi", "3Mi"),
    ("7Ki", "7Ki"),
]


@pytest.mark.parametrize("text,expected", GO_OUTPUTS, ids=[t for t, _ in GO_OUTPUTS])
def test_as_go_writes_it(text: str, expected: str) -> None:
    assert go_quantity_text(text) == expected


def test_surrounding_space_is_ignored() -> None:
    assert go_quantity_text(" 1000m ") == "1"


@pytest.mark.parametrize("text", ["", "abc", "1Xi", "1.2.3", "--1"])
def test_not_a_quantity(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        go_quantity_text(text)


# --- both readings agree --------------------------------------------------------------------------
_BINARY = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_DECIMAL = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E"]
_NANO = Decimal("1e-9")
_MAX_INT64 = Decimal(2**63 - 1)

_digits = st.text("0123456789", max_size=12)
_exponents = st.builds(
    lambda e, sign, digits: f"{e}{sign}{digits}",
    st.sampled_from("eE"),
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 30).map(str) | st.sampled_from(["00", "05", "012"]),
)
# (sign, whole, fraction, suffix) of a quantity with at least one digit.
_parts = st.tuples(
    st.sampled_from(["", "+", "-"]),
    _digits,
    st.just("") | _digits.map(lambda d: "." + d),
    st.sampled_from(_DECIMAL + _BINARY) | _exponents,
).filter(lambda parts: parts[1] + parts[2] not in ("", "."))


def _read_by_go(text: str, suffix: str) -> Decimal:
    """The value Go holds after reading `text`: its magnitude rounded up to nano units,
    and capped at the largest int64 when the suffix is binary."""
    value = parse_quantity(text)
    assert value is not None
    with localcontext() as context:
        context.prec = 200
        magnitude = abs(value)
        if magnitude % _NANO:
            magnitude = magnitude.quantize(_NANO, rounding=ROUND_UP)
    if suffix in _BINARY:
        magnitude = min(magnitude, _MAX_INT64)
    return -magnitude if value < 0 else magnitude


def _printable(held: Decimal, suffix: str) -> bool:
    """Go prints no suffix past E (10^18) in decimal form: 1000E comes back as "1"."""
    return suffix not in _DECIMAL or abs(held) < Decimal("1e21")


@given(_parts)
def test_the_text_go_writes_has_the_value_it_read(parts: tuple[str, str, str, str]) -> None:
    text, suffix = "".join(parts), parts[3]
    held = _read_by_go(text, suffix)
    assume(_printable(held, suffix))
    assert parse_quantity(go_quantity_text(text)) == held


@given(_parts)
@example(("", "100000000000", ".00000000021", "Mi"))  # 29 digits, not whole in nano units
def test_the_value_of_an_exact_quantity_survives(parts: tuple[str, str, str, str]) -> None:
    text = "".join(parts)
    value = parse_quantity(text)
    assert value is not None
    # Decimal's default 28 digits would round a 29-digit amount into a whole number of
    # nano units, and so call exact what Go rounds up.
    with localcontext() as context:
        context.prec = 200
        nanos = value.scaleb(9)
        assume(nanos == nanos.to_integral_value() and abs(value) < Decimal("1e18"))
    assert parse_quantity(go_quantity_text(text)) == value


@given(_parts)
def test_the_text_go_writes_is_canonical(parts: tuple[str, str, str, str]) -> None:
    text, suffix = "".join(parts), parts[3]
    assume(_printable(_read_by_go(text, suffix), suffix))
    written = go_quantity_text(text)
    assert go_quantity_text(written) == written
