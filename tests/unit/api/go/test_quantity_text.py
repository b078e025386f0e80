"""Quantities as Go writes them back. Each expected text is what
k8s.io/apimachinery's resource.Quantity (v0.36) prints after reading the input, recorded
from a run of Go's json.Unmarshal and json.Marshal on it."""

from __future__ import annotations

import pytest

from leaderworkerset.api.go.quantity_text import go_quantity_text

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
