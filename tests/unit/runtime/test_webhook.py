"""The webhook server in-process: JSON patches, AdmissionReview handling, TLS and reload."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.runtime.pki import KeyPairs
from leaderworkerset.runtime.webhook import (
    AdmissionResponse,
    WebhookServer,
    allow,
    deny,
    deny_status,
    errored,
    escape_pointer,
    json_equal,
    json_patch,
    patched,
)
from tests.toolkit.webhook_client import (
    client_context,
    new_pairs,
    post,
    presented_certificate,
    review,
    write_pairs,
)

# --- json_patch ---------------------------------------------------------------------


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A minimal RFC 6902 add/replace applier, to check patches do what they say."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        if op["path"] == "":
            doc = copy.deepcopy(op["value"])
            continue
        *parents, last = [unescape(t) for t in op["path"].split("/")[1:]]
        target = doc
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        if op["op"] == "replace":
            assert last in target, f"replace of a missing member {op['path']}"
        else:
            assert last not in target, f"add over an existing member {op['path']}"
        target[last] = copy.deepcopy(op["value"])
    return doc


def test_added_and_replaced_members() -> None:
    original = {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"replicas": 1}}
    mutated = {
        "metadata": {"name": "a", "labels": {"x": "2", "y": "3"}},
        "spec": {"replicas": 1, "size": 4},
    }
    assert json_patch(original, mutated) == [
        {"op": "replace", "path": "/metadata/labels/x", "value": "2"},
        {"op": "add", "path": "/metadata/labels/y", "value": "3"},
        {"op": "add", "path": "/spec/size", "value": 4},
    ]


def test_no_remove_operations_for_missing_members() -> None:
    original = {"spec": {"known": 1, "unknownToThisBuild": {"a": 1}}, "status": {}}
    mutated = {"spec": {"known": 2}}
    ops = json_patch(original, mutated)
    assert ops == [{"op": "replace", "path": "/spec/known", "value": 2}]
    assert apply_patch(original, ops)["spec"]["unknownToThisBuild"] == {"a": 1}


def test_pointer_escaping() -> None:
    assert escape_pointer("a/b~c") == "a~1b~0c"
    assert escape_pointer("~1") == "~01"
    original: dict[str, Any] = {"metadata": {"annotations": {}}}
    mutated = {"metadata": {"annotations": {"leaderworkerset.sigs.k8s.io/size": "4", "a~b": "x"}}}
    ops = json_patch(original, mutated)
    assert [op["path"] for op in ops] == [
        "/metadata/annotations/leaderworkerset.sigs.k8s.io~1size",
        "/metadata/annotations/a~0b",
    ]
    assert apply_patch(original, ops) == mutated


def test_arrays_are_replaced_whole() -> None:
    original = {"containers": [{"name": "a", "env": []}, {"name": "b"}]}
    mutated = {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}, {"name": "b"}]}
    assert json_patch(original, mutated) == [
        {"op": "replace", "path": "/containers", "value": mutated["containers"]}
    ]
    assert json_patch(original, copy.deepcopy(original)) == []


def test_json_equality_rules() -> None:
    assert json_equal(1, 1.0)
    assert not json_equal(True, 1)
    assert not json_equal(0, False)
    assert not json_equal(None, {})
    assert not json_equal("1", 1)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal([1, 2], [1])
    assert json_patch({"a": True}, {"a": 1}) == [{"op": "replace", "path": "/a", "value": 1}]


def test_type_change_and_root_replacement() -> None:
    assert json_patch({"a": {"b": 1}}, {"a": "x"}) == [
        {"op": "replace", "path": "/a", "value": "x"}
    ]
    assert json_patch({"a": 1}, [1]) == [{"op": "replace", "path": "", "value": [1]}]
    assert json_patch({"a": 1}, {"a": None}) == [{"op": "replace", "path": "/a", "value": None}]


_json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
_json = st.recursive(
    _json_leaf,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b/c", "d~e", "~1", ""]), children, max_size=3)
    ),
    max_leaves=12,
)


@given(_json, _json)
def test_patch_turns_original_into_mutated_plus_its_removed_members(
    original: Any, mutated: Any
) -> None:
    ops = json_patch(original, mutated)
    assert all(op["op"] in ("add", "replace") for op in ops)
    result = apply_patch(original, ops)

    def merged(orig: Any, mut: Any) -> Any:
        if isinstance(orig, dict) and isinstance(mut, dict):
            out = dict(orig)
            for k, v in mut.items():
                out[k] = merged(orig[k], v) if k in orig else v
            return out
        return mut

    assert json_equal(result, merged(original, mutated))


# --- responses ------------------------------------------------------------------------


def test_allowed_response_shape() -> None:
    assert allow().to_json("u1") == {
        "uid": "u1",
        "allowed": True,
        "status": {"metadata": {}, "code": 200},
    }
    body = allow("fine", warnings=["careful"]).to_json("u")
    assert body["status"]["message"] == "fine" and body["warnings"] == ["careful"]


def test_denied_response_carries_code_reason_and_message() -> None:
    assert deny("no way").to_json("u") == {
        "uid": "u",
        "allowed": False,
        "status": {"metadata": {}, "code": 403, "reason": "Forbidden", "message": "no way"},
    }
    assert errored(400, "bad").to_json("u")["status"] == {
        "metadata": {},
        "code": 400,
        "message": "bad",
    }


def test_deny_status_keeps_details() -> None:
    status = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": 422,
        "reason": "Invalid",
        "message": 'X "a" is invalid: spec.size: Invalid value: 0',
        "details": {"name": "a", "causes": [{"field": "spec.size"}]},
    }
    result = deny_status(status).to_json("u")["status"]
    assert result["code"] == 422 and result["details"]["causes"] == [{"field": "spec.size"}]
    assert "kind" not in result


def test_patched_response_encodes_the_patch() -> None:
    body = patched({"a": 1}, {"a": 1, "b": 2}).to_json("u")
    assert body["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(body["patch"])) == [{"op": "add", "path": "/b", "value": 2}]
    assert "patch" not in patched({"a": 1}, {"a": 1}).to_json("u")


# --- the server over TLS -----------------------------------------------------------------


# The server runs on the session loop, which the tests run on too (pyproject).
@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, KeyPairs]]:
    pairs = new_pairs()
    write_pairs(tmp_path, pairs)

    async def mutate(request: dict[str, Any]) -> AdmissionResponse:
        obj = request["object"]
        return patched(obj, {**obj, "data": {**obj.get("data", {}), "seen": "yes"}})

    async def refuse(request: dict[str, Any]) -> AdmissionResponse:
        return deny(f"{request['object']['metadata']['name']} is not welcome")

    async def crash(request: dict[str, Any]) -> AdmissionResponse:
        raise RuntimeError("handler bug")

    srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, reload_interval=0.05)
    srv.register("/mutate", mutate)
    srv.register("/refuse", refuse)
    srv.register("/crash", crash)
    srv.register_conversion()
    await srv.start()
    try:
        yield srv, pairs
    finally:
        await srv.stop(5)


def webhook_count(srv: WebhookServer, path: str, code: str) -> float:
    value = srv.metrics.registry.get_sample_value(
        "controller_runtime_webhook_requests_total", {"webhook": path, "code": code}
    )
    return value or 0.0


async def test_mutation_round_trip(server: tuple[WebhookServer, KeyPairs]) -> None:
    srv, pairs = server
    assert srv.is_serving()
    before = webhook_count(srv, "/mutate", "200")
    status, body = await post(srv, pairs, "/mutate", review({"data": {"a": "1"}}))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == "uid-1" and response["allowed"] is True
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/data/seen", "value": "yes"}
    ]
    assert webhook_count(srv, "/mutate", "200") == before + 1
    latency = srv.metrics.registry.get_sample_value(
        "controller_runtime_webhook_latency_seconds_count", {"webhook": "/mutate"}
    )
    assert latency and latency >= 1
    in_flight = srv.metrics.registry.get_sample_value(
        "controller_runtime_webhook_requests_in_flight", {"webhook": "/mutate"}
    )
    assert in_flight == 0


async def test_denial_and_handler_errors(server: tuple[WebhookServer, KeyPairs]) -> None:
    srv, pairs = server
    _, body = await post(srv, pairs, "/refuse", review({"metadata": {"name": "cm"}}))
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == "cm is not welcome"
    assert body["response"]["status"]["code"] == 403
    assert srv.metrics.webhook_panics._value.get() == 0
    status, body = await post(srv, pairs, "/crash", review({}))
    assert status == 200
    assert body["response"]["status"] == {"metadata": {}, "code": 500, "message": "handler bug"}
    assert srv.metrics.webhook_panics._value.get() == 1


async def test_malformed_reviews(server: tuple[WebhookServer, KeyPairs]) -> None:
    srv, pairs = server
    _, body = await post(srv, pairs, "/mutate", review({}), content_type="text/plain")
    assert body["response"]["status"]["code"] == 400
    assert "expected application/json" in body["response"]["status"]["message"]
    _, body = await post(srv, pairs, "/mutate", {"kind": "AdmissionReview"})
    assert body["response"]["status"]["message"] == "got an empty AdmissionRequest"


async def test_conversion_is_identity(server: tuple[WebhookServer, KeyPairs]) -> None:
    srv, pairs = server
    objects = [{"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"a": 1}}]
    conversion = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "example.com/v2", "objects": objects},
    }
    _, body = await post(srv, pairs, "/convert", conversion)
    assert body["kind"] == "ConversionReview"
    assert body["response"]["uid"] == "c1"
    assert body["response"]["result"]["status"] == "Success"
    assert body["response"]["convertedObjects"] == [{**objects[0], "apiVersion": "example.com/v2"}]


async def test_only_http11_is_negotiated(server: tuple[WebhookServer, KeyPairs]) -> None:
    srv, pairs = server
    cert, alpn = await presented_certificate(srv.port)
    assert alpn == "http/1.1"
    assert cert == pairs.cert


async def test_certificates_reload_without_restart(
    server: tuple[WebhookServer, KeyPairs], tmp_path: Path
) -> None:
    srv, old = server
    new = new_pairs()
    write_pairs(tmp_path, new)
    # The watcher polls every 50 ms; a new handshake must present the new certificate.
    deadline = time.monotonic() + 10
    while (await presented_certificate(srv.port))[0] != new.cert:
        assert time.monotonic() < deadline, "the new certificate was never served"
        await asyncio.sleep(0.05)
    assert srv.certificate() == new.cert
    status, body = await post(srv, new, "/mutate", review({}))
    assert status == 200 and body["response"]["allowed"]
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(srv, old, "/mutate", review({}))


async def test_a_mismatched_pair_is_not_loaded(
    server: tuple[WebhookServer, KeyPairs], tmp_path: Path
) -> None:
    srv, pairs = server
    reads, errors = srv.metrics.certificate_reads, srv.metrics.certificate_read_errors
    assert (reads._value.get(), errors._value.get()) == (1, 0)  # the pair served
    other = new_pairs()
    (tmp_path / "tls.crt").write_bytes(other.cert)  # key not rotated yet
    assert not srv.reload_certificates()
    # Read and refused, by this call or the 50 ms watcher (which tries again until the
    # pair matches): every read since the first failed.
    assert errors._value.get() >= 1
    assert reads._value.get() - errors._value.get() == 1
    assert srv.certificate() == pairs.cert
    status, body = await post(srv, pairs, "/mutate", review({}))
    assert status == 200 and body["response"]["allowed"]
    (tmp_path / "tls.key").write_bytes(other.key)
    # The 50 ms watcher races this call: either may be the one that loads the pair.
    srv.reload_certificates()
    assert srv.certificate() == other.cert
    assert (await presented_certificate(srv.port))[0] == other.cert


async def test_not_serving_until_certificates_exist(tmp_path: Path) -> None:
    srv = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, reload_interval=0.05)
    await srv.start()
    try:
        assert not srv.is_serving()
        write_pairs(tmp_path, new_pairs())
        deadline = time.monotonic() + 10
        while not srv.is_serving():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        await srv.stop(5)
    assert not srv.is_serving()


def test_register_rules(tmp_path: Path) -> None:
    srv = WebhookServer(cert_dir=tmp_path)

    async def handler(request: dict[str, Any]) -> AdmissionResponse:
        return allow()

    srv.register("/a", handler)
    with pytest.raises(ValueError, match="duplicate"):
        srv.register("/a", handler)
    with pytest.raises(ValueError, match="invalid"):
        srv.register("b", handler)
    srv.register_conversion()
    assert srv.paths == ["/a", "/convert"]


async def test_a_client_closing_its_tls_connection_leaves_nothing_behind(
    server: tuple[WebhookServer, KeyPairs], caplog: pytest.LogCaptureFixture
) -> None:
    srv, pairs = server
    body = json.dumps(review({"data": {}})).encode()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", srv.port, ssl=client_context(pairs), server_hostname="127.0.0.1"
    )
    writer.write(
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    async with asyncio.timeout(5):
        assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200")
    writer.close()  # a TLS close_notify, then the socket's FIN
    await writer.wait_closed()
    deadline = time.monotonic() + 5
    while srv._http is not None and srv._http.connections:
        assert time.monotonic() < deadline, "the server kept the closed connection"
        await asyncio.sleep(0.01)
    assert not [r for r in caplog.records if "eof_received" in r.getMessage()]
