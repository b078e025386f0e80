"""The admission webhook server: AdmissionReview v1 over HTTPS, with hot certificate reload.

A handler receives the AdmissionRequest dict and returns an `AdmissionResponse`. Mutations
travel as JSONPatch made of `add`/`replace` operations only: like controller-runtime's
defaulting webhooks we never emit `remove`, so fields this build does not know (a newer
API server's) are never stripped from the object.

The server re-reads `tls.crt`/`tls.key` whenever they change and loads them into its live
SSLContext; new handshakes present the new certificate, so rotation needs no restart.

The server runs on a thread of its own, with its own event loop: the API server waits
for every admission before it creates a pod, and on the manager's loop a review waited
behind whatever was ready there (a watch chunk of many events, a status pass over a
thousand groups), a full loop iteration to start and another after its body arrived.
A handler is registered as running on that thread (the default: it may read caches,
which are plain dicts, but nothing that belongs to the manager's loop) or on the
manager's loop; `on_manager_loop` wraps an async function (an API call) so that a
webhook-thread handler can await it. HTTP is `http_server`'s: httptools' parser frames
each request, and a review is answered with no more than it needs.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import enum
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson

from leaderworkerset.api.objects import JSON
from leaderworkerset.runtime import http_server
from leaderworkerset.runtime.certs import TLSOptions
from leaderworkerset.runtime.certs import server_ssl_context as _server_ssl_context
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiError
from leaderworkerset.runtime.eventloop import LoopFactory, same_kind
from leaderworkerset.runtime.health import listen_socket
from leaderworkerset.runtime.keypair_files import KeyPairFiles
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.pki import TLS_CERT, TLS_KEY

log = logging.getLogger("webhook")

ADMISSION_V1 = "admission.k8s.io/v1"
MAX_REQUEST_SIZE = 7 * 1024 * 1024  # controller-runtime's limit; pods with big specs fit
CONVERSION_PATH = "/convert"
# A reload asked from another thread runs on the server's; it takes milliseconds, so a
# longer wait means that loop is stuck or stopping, and the caller loads the files itself.
RELOAD_WAIT = 5.0

P = ParamSpec("P")
T = TypeVar("T")


# --- JSON patch ------------------------------------------------------------------


def escape_pointer(token: str) -> str:
    """RFC 6901: `~` first, so the `~1` made for `/` is not escaped again."""
    return token.replace("~", "~0").replace("/", "~1")


def json_equal(a: Any, b: Any) -> bool:
    """Equality of decoded JSON: 1 == 1.0 (one JSON number), but True is not 1."""
    if a is b:
        return True
    # Python's == is this equality with True and 1 taken as one value: what it calls
    # unequal is unequal here too. Equal, the two are equal here when their JSON texts
    # are; only a different member order, a float beside an int or a bool beside a
    # number needs the walk below. Both checks run in C, the walk in Python.
    if a != b:
        return False
    try:
        if orjson.dumps(a) == orjson.dumps(b):
            return True
    except orjson.JSONEncodeError:
        pass
    return _json_equal(a, b)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def json_patch(original: Any, mutated: Any) -> list[JSON]:
    """The `add`/`replace` operations that turn `original` into `mutated`.

    Members missing from `mutated` are left alone (no `remove`), and an array that
    differs is replaced whole.
    """
    ops: list[JSON] = []
    if original is not mutated:
        _diff(original, mutated, "", ops)
    return ops


def _diff(original: Any, mutated: Any, path: str, ops: list[JSON]) -> None:
    if isinstance(original, dict) and isinstance(mutated, dict):
        for key, value in mutated.items():
            if key not in original:
                ops.append({"op": "add", "path": _child(path, key), "value": value})
            elif original[key] is not value:
                # A member both sides share (a snapshot shares what a mutation leaves
                # alone) is equal without a look inside.
                _diff(original[key], value, _child(path, key), ops)
        return
    if not json_equal(original, mutated):
        ops.append({"op": "replace", "path": path, "value": mutated})


def _child(path: str, key: Any) -> str:
    return f"{path}/{escape_pointer(str(key))}"


# --- Responses --------------------------------------------------------------------


@dataclass
class AdmissionResponse:
    """What a handler decides; `result` is the metav1.Status the API server relays."""

    allowed: bool
    result: JSON = field(default_factory=lambda: {"code": 200})
    warnings: list[str] = field(default_factory=list)
    patch: list[JSON] | None = None

    def to_json(self, uid: str) -> JSON:
        response: JSON = {
            "uid": uid,
            "allowed": self.allowed,
            "status": {"metadata": {}, **self.result},
        }
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(self.patch)).decode()
        if self.warnings:
            response["warnings"] = list(self.warnings)
        return response


def allow(message: str = "", warnings: list[str] | None = None) -> AdmissionResponse:
    result: JSON = {"code": 200}
    if message:
        result["message"] = message
    return AdmissionResponse(True, result, list(warnings or []))


def deny(
    message: str, *, code: int = 403, reason: str = "Forbidden", warnings: list[str] | None = None
) -> AdmissionResponse:
    result: JSON = {"code": code, "reason": reason, "message": message}
    return AdmissionResponse(False, result, list(warnings or []))


def deny_status(status: JSON, warnings: list[str] | None = None) -> AdmissionResponse:
    """Deny with a full metav1.Status, e.g. a 422 Invalid with field causes."""
    result = {k: v for k, v in status.items() if k not in ("apiVersion", "kind", "status")}
    return AdmissionResponse(False, result, list(warnings or []))


def errored(code: int, message: str) -> AdmissionResponse:
    return AdmissionResponse(False, {"code": code, "message": message})


def patched(
    original: Any, mutated: Any, warnings: list[str] | None = None, message: str = ""
) -> AdmissionResponse:
    response = allow(message, warnings)
    response.patch = json_patch(original, mutated)
    return response


AdmissionHandler = Callable[[JSON], Awaitable[AdmissionResponse]]
# --- Server -------------------------------------------------------------------------


class RunsOn(enum.Enum):
    """Where a handler runs."""

    # The server's own thread and loop: reads of caches (plain dicts) only, and
    # awaits of what `WebhookServer.on_manager_loop` wrapped.
    WEBHOOK_THREAD = "webhook-thread"
    # The loop that started the server (the manager's): the handler may use its
    # API client and anything else of that loop, and waits for the loop to be free.
    MANAGER_LOOP = "manager-loop"


class WebhookServer:
    """HTTPS (HTTP/1.1 only) serving registered admission paths and `/convert`, on a
    thread of its own."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        cert_dir: Path,
        host: str = "",
        port: int = 9443,
        cert_name: str = TLS_CERT,
        key_name: str = TLS_KEY,
        tls: TLSOptions | None = None,
        reload_interval: float = 1.0,
        metrics: RuntimeMetrics | None = None,
        handshake_timeout: float = http_server.TLS_HANDSHAKE_TIMEOUT,
    ) -> None:
        self.metrics = metrics or RuntimeMetrics()
        self.handshake_timeout = handshake_timeout
        self.cert_files = KeyPairFiles(
            Path(cert_dir, cert_name), Path(cert_dir, key_name), log, self.metrics
        )
        self.host = host
        self.port = port
        self.reload_interval = reload_interval
        self.ssl_context = _server_ssl_context(tls)
        self._handlers: dict[str, tuple[AdmissionHandler, RunsOn]] = {}
        self._conversion_paths: set[str] = set()
        self._reload_lock = threading.Lock()
        self._started = False
        # The loop that called start(), and the server's own thread and loop.
        self._manager_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Used on the server's thread only.
        self._listener: asyncio.AbstractServer | None = None
        self._http: http_server.Server | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._serving = False

    def register(
        self, path: str, handler: AdmissionHandler, *, runs_on: RunsOn = RunsOn.WEBHOOK_THREAD
    ) -> None:
        if self._started:
            raise RuntimeError("register webhooks before the server starts")
        if not path.startswith("/") or path in self._handlers:
            raise ValueError(f"invalid or duplicate webhook path {path!r}")
        self._handlers[path] = (handler, runs_on)

    def register_conversion(self, path: str = CONVERSION_PATH) -> None:
        """An identity ConversionReview handler: every served version has one schema."""
        if self._started:
            raise RuntimeError("register webhooks before the server starts")
        self._conversion_paths.add(path)

    @property
    def paths(self) -> list[str]:
        return sorted([*self._handlers, *self._conversion_paths])

    def on_manager_loop(self, fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        """`fn` made awaitable from the server's thread: each call runs on the loop that
        started the server (at once when awaited there, or before the server started).

        Its own timeouts apply as they are; cancelling the caller (a review abandoned
        at shutdown) cancels the call on the manager's loop.
        """

        async def run(*args: P.args, **kwargs: P.kwargs) -> T:
            # Awaited inside a coroutine of its own: `fn` may return any awaitable, and
            # the awaitable must be made on the loop that awaits it.
            return await fn(*args, **kwargs)

        async def call(*args: P.args, **kwargs: P.kwargs) -> T:
            loop = self._manager_loop
            if loop is None or loop is asyncio.get_running_loop():
                return await fn(*args, **kwargs)
            future = asyncio.run_coroutine_threadsafe(run(*args, **kwargs), loop)
            return await asyncio.wrap_future(future)

        return call

    # -- certificates

    def certificate(self) -> bytes | None:
        """The PEM certificate new handshakes present."""
        loaded = self.cert_files.loaded
        return loaded[0] if loaded else None

    def reload_certificates(self) -> bool:
        """Load the files if they changed and form a valid pair; True when loaded.

        Callable from any thread: while the server runs, the live SSLContext is changed
        on the server's thread only (OpenSSL does not allow changing a context while
        another thread makes connections from it); the caller waits for the answer.
        An event loop should await `reload_certificates_async` instead.
        """
        answer = self._submit_reload()
        if answer is None:
            return self._reload()
        try:
            return answer.result(RELOAD_WAIT)
        except TimeoutError:
            return self._reload_after_timeout()

    async def reload_certificates_async(self) -> bool:
        """`reload_certificates` for a caller on an event loop (the manager's): it waits
        for the server's thread without blocking its own loop, whose lease renewals and
        reconciles go on meanwhile."""
        answer = self._submit_reload()
        if answer is None:
            return self._reload()
        try:
            # Shielded: giving up waiting must not withdraw the queued reload.
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(answer)), RELOAD_WAIT)
        except TimeoutError:
            return self._reload_after_timeout()

    def _submit_reload(self) -> concurrent.futures.Future[bool] | None:
        """The reload queued on the server's thread; None when the caller may load the
        files itself (no server thread, the server's own thread, or a closed loop)."""
        loop = self._loop
        if loop is None or self._thread is threading.current_thread():
            return None
        answer: concurrent.futures.Future[bool] = concurrent.futures.Future()

        def reload() -> None:
            try:
                answer.set_result(self._reload())
            except BaseException as exc:
                answer.set_exception(exc)

        try:
            loop.call_soon_threadsafe(reload)
        except RuntimeError:
            return None  # the loop has closed: nothing serves from the context any more
        return answer

    def _reload_after_timeout(self) -> bool:
        if self._thread is not None and self._thread.is_alive():
            # A slow server thread still serves from the context, so it is not changed
            # from here; the queued reload, or the thread's own watch of the files,
            # loads them.
            return False
        return self._reload()

    def _reload(self) -> bool:
        with self._reload_lock:
            return self.cert_files.load_into(self.ssl_context)

    async def _watch_certificates(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval)
            try:
                self._reload()
            except Exception:
                log.exception("certificate reload failed")

    # -- runnable

    async def start(self) -> None:
        """Return once listening; an error starting (a port in use) raises here."""
        if self._started:
            raise RuntimeError("the webhook server has already started")
        self._reload()
        sock = listen_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        self._started = True
        self._manager_loop = asyncio.get_running_loop()
        listening: concurrent.futures.Future[None] = concurrent.futures.Future()
        thread = threading.Thread(
            target=self._run,
            args=(sock, listening, same_kind(self._manager_loop)),
            name="webhook-server",
            daemon=True,
        )
        self._thread = thread
        thread.start()
        try:
            await asyncio.wrap_future(listening)
        except BaseException:
            await asyncio.to_thread(thread.join)
            self._thread, self._manager_loop, self._started = None, None, False
            raise
        log.info("serving webhooks", extra={"port": self.port, "paths": self.paths})

    def _run(
        self, sock: Any, listening: concurrent.futures.Future[None], new_loop: LoopFactory
    ) -> None:
        """The server's thread: its loop, of the manager's kind, serves until stop()
        asks it to end."""
        loop = new_loop()
        # Known before the site accepts: a reload asked from then on runs on this loop.
        self._loop = loop
        try:
            try:
                loop.run_until_complete(self._listen(sock))
            except BaseException as exc:
                sock.close()
                listening.set_exception(exc)
                return
            listening.set_result(None)
            loop.run_forever()
        finally:
            self._loop = None
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _listen(self, sock: Any) -> None:
        endpoints: dict[str, http_server.Endpoint] = {}
        for path in self._handlers:
            endpoints[path] = self._admission_endpoint(path)
        for path in self._conversion_paths:
            endpoints[path] = self._conversion_endpoint(path)
        http = http_server.Server(
            endpoints, max_body=MAX_REQUEST_SIZE, on_connection=self.metrics.webhook_connections.inc
        )
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            http.protocol,
            sock=sock,
            ssl=self.ssl_context,
            backlog=1024,
            ssl_handshake_timeout=self.handshake_timeout,
        )
        self._http = http
        self._serving = True
        self._watcher = asyncio.create_task(self._watch_certificates(), name="webhook-certs")

    async def stop(self, deadline: float) -> None:
        """Let in-flight reviews finish within `deadline` seconds, then end the thread."""
        self._serving = False
        thread, loop = self._thread, self._loop
        if thread is None:
            return
        self._thread = None
        ends = time.monotonic() + max(0.1, deadline)
        try:
            if loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop ended on its own
                    stopped = asyncio.run_coroutine_threadsafe(self._close(deadline), loop)
                    # The reviews in flight may be waiting on this loop
                    # (on_manager_loop): wait without blocking it.
                    with contextlib.suppress(TimeoutError, concurrent.futures.CancelledError):
                        await asyncio.wait_for(asyncio.wrap_future(stopped), max(0.1, deadline) + 1)
        finally:
            # Even when the stop itself is cancelled, the thread is told to end: a
            # server left running would keep its port and loop for the process' life.
            if loop is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, max(0.1, ends - time.monotonic()))
        if thread.is_alive():
            log.warning("the webhook server's thread did not end in time")

    async def _close(self, deadline: float) -> None:
        self._serving = False
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.close()
        if self._http is not None:
            # In-flight reviews are answered; `deadline` (seconds) bounds the wait.
            await self._http.shutdown(max(0.1, deadline))

    def is_serving(self) -> bool:
        """Ready: listening, with a certificate to present."""
        return self._serving and self.cert_files.loaded is not None

    # -- endpoints

    def _admission_endpoint(self, path: str) -> http_server.Endpoint:
        handler, runs_on = self._handlers[path]
        if runs_on is RunsOn.MANAGER_LOOP:
            handler = self.on_manager_loop(handler)
        instrumented = _Instrumented(path, self.metrics)

        async def endpoint(request: http_server.Request) -> http_server.Response:
            with instrumented() as record:
                review, response = _read_review(request)
                if response is None:
                    try:
                        response = await handler(review["request"])
                    except Exception as exc:
                        log.exception("webhook handler failed", extra={"webhook": path})
                        if not isinstance(exc, (ApiError, *TRANSPORT_ERRORS)):
                            self.metrics.webhook_panics.inc()
                        response = errored(500, str(exc))
                uid = str((review.get("request") or {}).get("uid", ""))
                body = {
                    "apiVersion": review.get("apiVersion") or ADMISSION_V1,
                    "kind": "AdmissionReview",
                    "response": response.to_json(uid),
                }
                return record(http_server.Response(200, orjson.dumps(body)))

        return endpoint

    def _conversion_endpoint(self, path: str) -> http_server.Endpoint:
        instrumented = _Instrumented(path, self.metrics)

        async def endpoint(request: http_server.Request) -> http_server.Response:
            with instrumented() as record:
                try:
                    review = orjson.loads(request.body)
                    req = review["request"]
                    desired = req["desiredAPIVersion"]
                    converted = [{**obj, "apiVersion": desired} for obj in req.get("objects") or []]
                    response: JSON = {
                        "uid": req.get("uid", ""),
                        "convertedObjects": converted,
                        "result": {"metadata": {}, "status": "Success"},
                    }
                except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                    review = {}
                    response = {
                        "uid": "",
                        "result": {"metadata": {}, "status": "Failure", "message": str(exc)},
                    }
                body = {
                    "apiVersion": review.get("apiVersion") or "apiextensions.k8s.io/v1",
                    "kind": "ConversionReview",
                    "response": response,
                }
                return record(http_server.Response(200, orjson.dumps(body)))

        return endpoint


def _read_review(request: http_server.Request) -> tuple[JSON, AdmissionResponse | None]:
    """The AdmissionReview, or an error response (answered with HTTP 200, as upstream)."""
    if request.content_type != "application/json":
        return {}, errored(400, f"contentType={request.content_type}, expected application/json")
    try:
        review = orjson.loads(request.body)
    except orjson.JSONDecodeError as exc:
        return {}, errored(400, f"couldn't decode the AdmissionReview: {exc}")
    if not isinstance(review, dict) or not isinstance(review.get("request"), dict):
        return {}, errored(400, "got an empty AdmissionRequest")
    return review, None


class _Instrumented:
    """controller-runtime's webhook metrics around one request of one path.

    The path's series are looked up once, not per request: a labelled lookup takes
    a lock and hashes the label values.
    """

    def __init__(self, path: str, metrics: RuntimeMetrics) -> None:
        self.path = path
        self.in_flight = metrics.webhook_in_flight.labels(webhook=path)
        self.latency = metrics.webhook_latency.labels(webhook=path)
        self._requests_total = metrics.webhook_requests
        self._requests: dict[int, Any] = {}

    def __call__(self) -> _Request:
        return _Request(self)

    def count(self, status: int) -> None:
        counter = self._requests.get(status)
        if counter is None:
            counter = self._requests[status] = self._requests_total.labels(
                webhook=self.path, code=str(status)
            )
        counter.inc()


class _Request:
    def __init__(self, instrumented: _Instrumented) -> None:
        self.instrumented = instrumented
        self.started = 0.0

    def __enter__(self) -> Callable[[http_server.Response], http_server.Response]:
        self.started = time.perf_counter()
        self.instrumented.in_flight.inc()
        return self.record

    def record(self, response: http_server.Response) -> http_server.Response:
        self.instrumented.count(response.status)
        return response

    def __exit__(self, *exc: object) -> None:
        self.instrumented.in_flight.dec()
        self.instrumented.latency.observe(time.perf_counter() - self.started)
