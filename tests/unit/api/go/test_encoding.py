"""Go's encoding of a template after a typed round trip. The expected texts follow
Go's encoding/json and the member lists of k8s.io/api v0.36.3; the whole-template
results were checked against upstream's code (see test_names.py for the revisions)."""

from __future__ import annotations

import json

import pytest

from leaderworkerset.api.go.encoding import (
    LEADER_WORKER_TEMPLATE,
    go_float,
    go_json,
    go_string,
    go_types,
)


def test_an_empty_template_writes_the_members_go_always_writes() -> None:
    assert go_json({}, LEADER_WORKER_TEMPLATE) == (
        '{"workerTemplate":{"metadata":{},"spec":{"containers":null}}}'
    )


def test_members_come_in_go_order_not_document_order() -> None:
    template = {"size": 2, "workerTemplate": {"spec": {"containers": []}}, "restartPolicy": "None"}
    assert go_json(template, LEADER_WORKER_TEMPLATE) == (
        '{"workerTemplate":{"metadata":{},"spec":{"containers":[]}},"size":2,'
        '"restartPolicy":"None"}'
    )


def test_container_struct_members_are_written_and_empty_ones_dropped() -> None:
    container = {"image": "img", "name": "c", "args": [], "env": None, "stdin": False}
    assert go_json(container, "core/v1.Container") == '{"name":"c","image":"img","resources":{}}'


def test_unknown_members_are_dropped() -> None:
    assert go_json({"name": "c", "image": "i", "future": 1}, "core/v1.Container") == (
        '{"name":"c","image":"i","resources":{}}'
    )


def test_maps_are_sorted_and_quantities_canonical() -> None:
    resources = {"limits": {"memory": "1024Mi", "cpu": "1000m", "nvidia.com/gpu": 8}}
    assert go_json(resources, "core/v1.ResourceRequirements") == (
        '{"limits":{"cpu":"1","memory":"1Gi","nvidia.com/gpu":"8"}}'
    )


def test_int_or_string_keeps_its_kind() -> None:
    assert go_json({"port": 8080}, "core/v1.TCPSocketAction") == '{"port":8080}'
    assert go_json({"port": "http"}, "core/v1.TCPSocketAction") == '{"port":"http"}'


def test_template_metadata_drops_a_zero_creation_timestamp() -> None:
    assert go_json({"labels": {"b": "2", "a": "1"}}, "meta/v1.ObjectMeta") == (
        '{"labels":{"a":"1","b":"2"}}'
    )
    stamped = {"creationTimestamp": "2024-01-02T03:04:05.678+01:00"}
    assert go_json(stamped, "meta/v1.ObjectMeta") == '{"creationTimestamp":"2024-01-02T02:04:05Z"}'


def test_absent_pointer_and_slice_without_omitempty_are_null() -> None:
    assert go_json({}, "core/v1.PodSpec") == '{"containers":null}'
    assert go_json({}, "core/v1.GRPCAction") == '{"port":0,"service":null}'


def test_strings_are_escaped_as_go_escapes_them() -> None:
    assert go_string('a<b>&c\u2028\n\t\x01"\\é') == (
        '"a\\u003cb\\u003e\\u0026c\\u2028\\n\\t\\u0001\\"\\\\é"'
    )


@pytest.mark.parametrize(
    "number,text",
    [
        (0.5, "0.5"),
        (2.0, "2"),
        (100.0, "100"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        (1e-10, "1e-10"),
        (-2.5, "-2.5"),
        (0.000001, "0.000001"),
    ],
)
def test_floats_as_go_writes_them(number: float, text: str) -> None:
    assert go_float(number) == text


def test_the_member_tables_cover_every_referenced_type() -> None:
    types = go_types()
    for name, members in types.items():
        for _, member_type, _ in members:
            inner = member_type.lstrip("*")
            while inner.startswith(("[]", "*", "map[")):
                inner = inner.split("]", 1)[1] if inner.startswith("map[") else inner.lstrip("[]*")
            assert "/" not in inner or inner in types, (name, member_type)


def test_the_pod_spec_table_is_go_ordered() -> None:
    names = [member for member, _, _ in go_types()["core/v1.PodSpec"]]
    assert names[:4] == ["volumes", "initContainers", "containers", "ephemeralContainers"]
    assert json.dumps(names).count('"containers"') == 1
