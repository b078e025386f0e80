"""Bad input is refused, never rewritten: the mutating webhook refuses a member of the
wrong type instead of defaulting over it, and `lws validate` refuses what the API server
refuses before any webhook (unknown members under Strict, types inside pod templates).
The same verdicts against the real API server: tests/integration/test_bad_input_verdicts.py."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.schema_check import check_against_schema
from leaderworkerset.cli import main
from leaderworkerset.webhooks.admission import mutate_leaderworkerset
from tests.toolkit.paths import REPO

BAD = REPO / "tests" / "data" / "bad-leaderworkersets"
SIZE = "spec.leaderWorkerTemplate.size"


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((BAD / f"{name}.yaml").read_text())
    return loaded


def mutate(obj: dict[str, Any]) -> dict[str, Any]:
    response = asyncio.run(mutate_leaderworkerset({"uid": "u", "object": obj}))
    return response.to_json("u")


@pytest.mark.parametrize(
    ("name", "field", "json_type"),
    [
        ("type-replicas-string", "spec.replicas", "string"),
        ("type-size-fraction", SIZE, "number"),
        ("type-size-string", SIZE, "string"),
    ],
)
def test_the_mutating_webhook_refuses_a_wrong_type_instead_of_defaulting_it(
    name: str, field: str, json_type: str
) -> None:
    response = mutate(manifest(name))
    assert response["allowed"] is False
    assert "patch" not in response
    status = response["status"]
    assert status["code"] == 422
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueTypeInvalid",
            "field": field,
            "message": f'Invalid value: "{json_type}": {field} in body must be of type integer: '
            f'"{json_type}"',
        }
    ]


def test_the_mutating_webhook_refuses_an_int32_overflow() -> None:
    response = mutate(manifest("range-size-int32"))
    assert response["allowed"] is False
    assert [c["field"] for c in response["status"]["details"]["causes"]] == [SIZE]


def test_the_mutating_webhook_still_defaults_a_well_typed_object() -> None:
    body = manifest("type-size-string")
    body["spec"]["leaderWorkerTemplate"]["size"] = 4
    response = mutate(body)
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"


def validate(name: str, *flags: str) -> Any:
    return CliRunner().invoke(main, ["validate", *flags, str(BAD / f"{name}.yaml")])


def test_validate_refuses_unknown_members_as_the_server_does_under_strict() -> None:
    result = validate("unknown-container-member")
    assert result.exit_code == 1
    field = "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].imagePullPolicyy"
    assert result.stderr.strip() == (
        'Error: LeaderWorkerSet in version "v1" cannot be handled as a LeaderWorkerSet: '
        f'strict decoding error: unknown field "{field}"'
    )


def test_validate_warns_of_unknown_members_under_warn_and_drops_them_under_ignore() -> None:
    warned = validate("unknown-spec-member", "--field-validation=Warn")
    assert warned.exit_code == 0, warned.output
    assert 'Warning: unknown field "spec.replica"' in warned.stderr
    ignored = validate("unknown-spec-member", "--field-validation", "ignore")
    assert ignored.exit_code == 0, ignored.output
    assert "unknown field" not in ignored.stderr


def test_validate_finds_wrong_types_inside_the_pod_template() -> None:
    result = validate("type-image-integer")
    assert result.exit_code == 1
    image = "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image"
    assert (
        f'{image}: Invalid value: "integer": {image} in body must be of type string: "integer"'
        in result.stderr
    )


def test_every_sample_has_no_unknown_member_and_no_wrong_type() -> None:
    samples = REPO / "config" / "samples"
    for path in samples.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "LeaderWorkerSet":
                findings = check_against_schema(doc)
                assert findings.unknown == [] and findings.errors == [], path


def test_members_the_schema_keeps_open_are_not_unknown() -> None:
    doc = manifest("type-size-string")
    doc["spec"]["leaderWorkerTemplate"]["size"] = 2
    doc["metadata"]["labels"] = {"any.example/key": "v"}
    template = doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["spec"]["nodeSelector"] = {"pool": "gpu"}
    template["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8}}
    findings = check_against_schema(doc)
    assert findings.unknown == [] and findings.errors == []


@pytest.mark.parametrize("path", sorted(BAD.glob("*.yaml")), ids=lambda p: p.stem)
def test_validate_refuses_every_bad_fixture(path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1, result.output


def test_validate_shows_the_first_refusal_then_everything_else_to_fix() -> None:
    text = (BAD / "range-replicas-negative.yaml").read_text().replace("size: 2", "size: 0")
    result = CliRunner().invoke(main, ["validate", "-"], input=text)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    then = lines.index("and, once those are fixed:")
    replicas = "spec.replicas"
    assert lines[1:then] == [
        f"  * {replicas}: Invalid value: -1: "
        f"{replicas} in body should be greater than or equal to 0"
    ]
    rule = "size must be equal or greater than 1"
    assert lines[then + 1 :] == [f"  - {SIZE}: Invalid value: 0: {rule}"]


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*path, i))
    return found


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(doc)
    parent = copied
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return copied


def _full() -> Any:
    """A sample with every part the rules read: template metadata, both templates,
    claims, subgroups, topology annotations."""
    doc = yaml.safe_load((REPO / "config" / "samples" / "subgroups.yaml").read_text())
    template = doc["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["metadata"] = {
        "labels": {"app": "x"},
        "annotations": {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "topology.kubernetes.io/zone"},
    }
    template["leaderTemplate"] = copy.deepcopy(template["workerTemplate"])
    template["volumeClaimTemplates"] = [
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    ]
    doc["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": "50%"},
    }
    return doc


FULL = _full()
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(index=st.integers(min_value=1), value=ODD_VALUES)
def test_validate_answers_any_wrongly_typed_member_without_crashing(index: int, value: Any) -> None:
    """Whatever member is replaced by whatever value, `lws validate` gives a verdict (the
    server's stages run in order, and the rules never see what they cannot read)."""
    paths = _paths(FULL)[1:]
    path = paths[index % len(paths)]
    doc = _replaced(FULL, path, value)
    result = CliRunner().invoke(main, ["validate", "-"], input=yaml.safe_dump(doc))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        path,
        value,
        result.exception,
    )
    assert result.exit_code in (0, 1), (path, value, result.output)
