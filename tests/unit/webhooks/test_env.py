"""LWS environment variables and their ordering, and the Go
parsing helpers the pod mutation shares."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.api.go.ints import go_div, go_mod
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.webhooks.denial import Denied, atoi
from leaderworkerset.webhooks.env import add_lws_env, lws_env, with_env_first
from tests.toolkit.pods import container, lws_labels
from tests.toolkit.pods import pod as a_pod

KEY = "0123456789abcdef0123456789abcdef01234567"


def pod(**spec: Any) -> dict[str, Any]:
    return a_pod(
        "test-1-2",
        "ns",
        labels=lws_labels("test", group_index="1", group_key=KEY, worker="2"),
        annotations={c.ANNOTATION_SIZE: "4"},
        containers=[container("main")],
        spec={"subdomain": "test", **spec},
    )


def var(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


@pytest.mark.parametrize(
    ("hash_mode", "leader_address"),
    [(False, "test-1.test.ns"), (True, f"{KEY[:8]}.test.ns")],
    ids=[c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH],
)
def test_values(hash_mode: bool, leader_address: str) -> None:
    """The leader's host is named by the group index (Ordinal) or the group key's first
    8 characters (Hash)."""
    assert lws_env(pod(), hash_mode=hash_mode) == [
        var(c.ENV_LEADER_ADDRESS, leader_address),
        var(c.ENV_GROUP_SIZE, "4"),
        var(c.ENV_WORKER_INDEX, "2"),
    ]


def test_size_is_copied_verbatim_and_subdomain_may_be_empty() -> None:
    body = pod()
    body["metadata"]["annotations"][c.ANNOTATION_SIZE] = "04"
    del body["spec"]["subdomain"]
    assert lws_env(body, hash_mode=False)[:2] == [
        var(c.ENV_LEADER_ADDRESS, "test-1..ns"),
        var(c.ENV_GROUP_SIZE, "04"),
    ]


@pytest.mark.parametrize(
    ("where", "key", "what", "hash_mode"),
    [
        ("labels", c.LABEL_SET_NAME, "name label", False),
        ("labels", c.LABEL_GROUP_INDEX, "group index label", False),
        ("annotations", c.ANNOTATION_SIZE, "size annotation", False),
        ("labels", c.LABEL_WORKER_INDEX, "worker index label", False),
        ("labels", c.LABEL_GROUP_KEY, "group key label", True),
    ],
)
def test_missing_inputs_are_denied(where: str, key: str, what: str, hash_mode: bool) -> None:
    body = pod()
    del body["metadata"][where][key]
    with pytest.raises(Denied) as info:
        lws_env(body, hash_mode=hash_mode)
    assert info.value.message == (
        f"Failure constructing environment variables, no {what} found for pod ns/test-1-2"
    )


def test_group_key_is_not_needed_in_ordinal_mode() -> None:
    body = pod()
    del body["metadata"]["labels"][c.LABEL_GROUP_KEY]
    assert lws_env(body, hash_mode=False)[0]["value"] == "test-1.test.ns"


def test_checks_run_in_upstream_order() -> None:
    body = pod()
    body["metadata"]["labels"] = {}
    body["metadata"]["annotations"] = {}
    with pytest.raises(Denied, match="no name label found"):
        lws_env(body, hash_mode=False)


def test_every_container_and_init_container_but_not_ephemeral_ones() -> None:
    body = pod(
        initContainers=[{"name": "init", "env": [var("A", "1")]}],
        ephemeralContainers=[{"name": "debug"}],
    )
    body["spec"]["containers"].append({"name": "side", "env": None})
    add_lws_env(body, hash_mode=False)
    expected = lws_env(body, hash_mode=False)
    assert body["spec"]["containers"][0]["env"] == expected
    assert body["spec"]["containers"][1]["env"] == expected
    assert body["spec"]["initContainers"][0]["env"] == [*expected, var("A", "1")]
    assert "env" not in body["spec"]["ephemeralContainers"][0]


def test_user_values_are_overwritten_and_duplicates_collapsed() -> None:
    user = [
        var("B", "1"),
        var(c.ENV_WORKER_INDEX, "99"),
        var("A", "2"),
        var("B", "3"),
        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        var(c.ENV_LEADER_ADDRESS, "elsewhere"),
    ]
    body = pod()
    body["spec"]["containers"][0]["env"] = user
    add_lws_env(body, hash_mode=False)
    assert body["spec"]["containers"][0]["env"] == [
        var(c.ENV_LEADER_ADDRESS, "test-1.test.ns"),
        var(c.ENV_GROUP_SIZE, "4"),
        var(c.ENV_WORKER_INDEX, "2"),
        var("B", "1"),
        var("A", "2"),
        user[4],
    ]


def test_reapplying_changes_nothing() -> None:
    body = pod()
    body["spec"]["containers"][0]["env"] = [var("X", "1"), var("X", "2")]
    add_lws_env(body, hash_mode=False)
    once = [dict(v) for v in body["spec"]["containers"][0]["env"]]
    add_lws_env(body, hash_mode=False)
    assert body["spec"]["containers"][0]["env"] == once


names = st.sampled_from(["A", "B", "C", "PATH", *c.LWS_ENV_NAMES])
env_lists = st.lists(st.builds(var, names, st.text(max_size=3)), max_size=12)


@given(env_lists)
def test_ordering_invariants(user: list[dict[str, str]]) -> None:
    first = [var(name, "lws") for name in c.LWS_ENV_NAMES]
    result = with_env_first(first, user)
    result_names = [v["name"] for v in result]
    assert result[:3] == first
    assert len(result_names) == len(set(result_names))
    kept = [v for v in user if v["name"] not in c.LWS_ENV_NAMES]
    first_seen = [v for i, v in enumerate(kept) if v["name"] not in {u["name"] for u in kept[:i]}]
    assert result[3:] == first_seen
    assert with_env_first(first, result) == result


# --- Go parsing helpers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("42", 42), ("+7", 7), ("-3", -3), ("007", 7)]
)
def test_atoi_accepts_what_go_accepts(text: str, value: int) -> None:
    assert atoi(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "invalid syntax"),
        (" 1", "invalid syntax"),
        ("1_000", "invalid syntax"),
        ("1.0", "invalid syntax"),
        ("٣", "invalid syntax"),
        ("9223372036854775808", "value out of range"),
        ("-9223372036854775809", "value out of range"),
    ],
)
def test_atoi_rejects_like_go(text: str, reason: str) -> None:
    with pytest.raises(Denied) as info:
        atoi(text)
    assert info.value.message == f'strconv.Atoi: parsing "{text}": {reason}'


def test_atoi_int64_bounds() -> None:
    assert atoi("9223372036854775807") == 2**63 - 1
    assert atoi("-9223372036854775808") == -(2**63)


@pytest.mark.parametrize(
    ("a", "b", "quotient", "remainder"),
    [(7, 2, 3, 1), (-1, 2, 0, -1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (0, 3, 0, 0)],
)
def test_go_division_truncates(a: int, b: int, quotient: int, remainder: int) -> None:
    assert (go_div(a, b), go_mod(a, b)) == (quotient, remainder)
