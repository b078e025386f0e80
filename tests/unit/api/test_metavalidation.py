"""The declarative-validation wording (apimachinery's validate/content) of names and
label keys, which Kubernetes' scheduling.k8s.io blocks are checked with."""

from __future__ import annotations

import pytest

from leaderworkerset.api.metavalidation import (
    content_dns1123_label_errors,
    content_dns1123_subdomain_errors,
    content_label_key_errors,
)

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("gpu-0", []),
        ("gpu.a", ["must not contain dots"]),
        ("GPU", [LABEL_MSG]),
        ("a" * 64, ["must be no more than 63 bytes"]),
        ("-a" * 40, ["must be no more than 63 bytes", LABEL_MSG]),
        ("gpu\n", [LABEL_MSG]),
    ],
)
def test_dns1123_label(value: str, messages: list[str]) -> None:
    assert content_dns1123_label_errors(value) == messages


def test_dns1123_subdomain() -> None:
    assert content_dns1123_subdomain_errors("gpu.example.com") == []
    (msg,) = content_dns1123_subdomain_errors("Bad_Template")
    assert msg.startswith("a lowercase RFC 1123 subdomain must consist of lower case")
    assert msg.endswith(
        "(e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )
    assert content_dns1123_subdomain_errors("a" * 254)[0] == "must be no more than 253 bytes"


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("topology.kubernetes.io/rack", []),
        ("rack", []),
        ("/rack", ["prefix part must be non-empty"]),
        ("example.com/", ["name part must be non-empty", "name part " + KEY_MSG]),
        ("my key", ["name part " + KEY_MSG]),
        ("k" * 64, ["name part must be no more than 63 bytes"]),
        (
            "a/b/c",
            [
                "a valid label key "
                + KEY_MSG
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ],
        ),
    ],
)
def test_label_key(value: str, messages: list[str]) -> None:
    assert content_label_key_errors(value) == messages


def test_label_key_prefix_is_a_subdomain() -> None:
    (msg,) = content_label_key_errors("Example.com/rack")
    assert msg.startswith("prefix part a lowercase RFC 1123 subdomain must consist of")
