"""How API errors are classified (bodies as a v1.37 API server sends them)."""

from __future__ import annotations

from leaderworkerset.runtime.client import ApiError

TERMINATING = {
    "kind": "Status",
    "reason": "Forbidden",
    "message": 'configmaps "b0" is forbidden: unable to create new content in namespace '
    "term because it is being terminated",
    "details": {
        "name": "b0",
        "kind": "configmaps",
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace term is being terminated",
                "field": "metadata.namespace",
            }
        ],
    },
    "code": 403,
}


def test_namespace_terminating() -> None:
    assert ApiError(403, TERMINATING).namespace_terminating
    assert not ApiError(
        403, {"reason": "Forbidden", "message": "RBAC says no"}
    ).namespace_terminating


def test_conflict_and_already_exists_are_told_apart() -> None:
    conflict = ApiError(409, {"reason": "Conflict"})
    exists = ApiError(409, {"reason": "AlreadyExists"})
    assert conflict.conflict and not conflict.already_exists
    assert exists.already_exists and not exists.conflict
    assert ApiError(410, {"reason": "Expired"}).gone
    assert ApiError(404, {}).not_found


def test_apply_patches_escape_what_yaml_forbids() -> None:
    import json

    import yaml

    from leaderworkerset.runtime.client import APPLY_PATCH, _encode

    body = {"k\x85": "a\x7fb\x9f\ufffe\u2028", "plain": "é"}
    applied = _encode(body, APPLY_PATCH)
    assert b"\x7f" not in applied and b"\\u007f" in applied
    assert json.loads(applied) == body
    assert yaml.safe_load(applied.decode()) == body
    assert (
        _encode(body, "application/json")
        == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    )
