"""A raw-JSON Kubernetes API client: lightkube for configuration and authentication,
aiohttp for the requests, orjson for the bodies.

Objects stay plain dicts. Typed models are too slow to decode for caches of
thousands of pods, and the controller only ever reads a handful of members.
aiohttp rather than httpx: its HTTP parser is C, and reading a watch stream (a chunk
per event) or a response through httpx's pure-Python layers was the controller's
largest single cost at scale.
"""

from __future__ import annotations

import asyncio
import functools
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
import httpx2 as httpx
import orjson
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import User

from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import Resource

ResponseHook = Callable[[str, str, str], None]  # (method, status code, host)

# What a request raises when the API server cannot be reached or the exchange breaks
# off (refused, reset, TLS, timed out, a stream cut short); an answer with an error
# status is an ApiError instead.
TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)

# Connections kept to the API server, as httpx's default. Watches hold one each for
# minutes: the manager runs an informer per cached kind (seven) and the certificate
# rotator one per object it injects into (a secret and a few webhook configurations
# and CRDs), so a dozen at most, leaving more than eighty for ordinary requests.
POOL_SIZE = 100
CONNECT_TIMEOUT = 30.0  # getting a pooled or new connection, TLS handshake included

APPLY_PATCH = "application/apply-patch+yaml"
# Characters JSON carries as they are but a YAML parser will not take as they are:
# DEL and the C1 controls are forbidden, NEL and the Unicode line and paragraph
# separators are line breaks (folded to a space inside a quoted string), the two
# noncharacters are forbidden. The API server parses an apply patch as YAML, so a
# template holding one would be refused, or changed, on every retry.
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class ApiError(Exception):
    """A non-2xx answer, with the Status object the API server sent."""

    def __init__(self, status: int, body: JSON, method: str = "", path: str = "") -> None:
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", "")) or f"HTTP {status}"
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}".strip())

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def namespace_terminating(self) -> bool:
        """A create refused because the namespace is being deleted."""
        details = self.body.get("details") or {}
        causes = details.get("causes") or []
        return self.status == 403 and any(
            cause.get("reason") == "NamespaceTerminating" for cause in causes
        )

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410


class TokenBucket:
    """client-go's QPS/burst limiter: `burst` requests at once, then `qps` a second."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def try_take(self) -> bool:
        """A token without waiting; False when none is left."""
        if self.qps <= 0:
            return True
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.qps)
                self._stamp = self._clock()
                self._tokens = 1
            self._tokens -= 1


class ApiClient:
    """Async JSON requests against one API server.

    The HTTP session is opened on first use, inside the running event loop (aiohttp
    binds a session to the loop it was made in), so a client can be built anywhere.
    """

    def __init__(
        self,
        server: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        auth: httpx.Auth | None = None,
        user_agent: str = "lws",
        qps: float = 500.0,
        burst: int = 500,
        on_response: ResponseHook | None = None,
        namespace: str = "default",
    ) -> None:
        self.namespace = namespace
        self._server = server.rstrip("/")
        self._host = urlsplit(self._server).hostname or ""
        self._ssl_context = ssl_context
        self._auth = auth
        # Auth flows see the method and the server: lightkube's read or set headers
        # only, and a URL parsed once spares each request a parse.
        self._auth_url = httpx.URL(self._server)
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        self._limiter = TokenBucket(qps, burst)
        self._on_response = on_response
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: Path | str | None = None,
        *,
        context: str | None = None,
        qps: float = 500.0,
        burst: int = 500,
        user_agent: str = "lws",
        on_response: ResponseHook | None = None,
    ) -> ApiClient:
        """From a kubeconfig file, or (None) in-cluster config, $KUBECONFIG, ~/.kube/config."""
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        single = config.get(context_name=context)
        if single is None:
            raise ValueError(f"kubeconfig has no context {context!r}")
        return cls.from_config(
            single, qps=qps, burst=burst, user_agent=user_agent, on_response=on_response
        )

    @classmethod
    def from_config(
        cls,
        config: SingleConfig,
        *,
        qps: float = 500.0,
        burst: int = 500,
        user_agent: str = "lws",
        on_response: ResponseHook | None = None,
    ) -> ApiClient:
        user = config.user if config.user is not None else User()
        return cls(
            config.cluster.server,
            ssl_context=verify_cluster(config.cluster, user, config.abs_file, trust_env=False),
            auth=user_auth(user),
            user_agent=user_agent,
            qps=qps,
            burst=burst,
            on_response=on_response,
            namespace=config.namespace,
        )

    async def close(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("the API client is closed")
        connector = aiohttp.TCPConnector(
            limit=POOL_SIZE,
            ssl=self._ssl_context if self._ssl_context is not None else True,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,  # no proxies or .netrc from the environment
        )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = 30.0,
    ) -> JSON:
        await self._limiter.acquire()
        content = None if body is None else _encode(body, content_type)
        headers = {"Content-Type": content_type} if content is not None else None
        response = await self._send(
            method, path, _clean(params), content, headers, _timeout(request_timeout)
        )
        try:
            data = await response.read()
        finally:
            response.release()
        self._observe(method, response.status)
        decoded = _decode(data)
        if response.status >= 400:
            raise ApiError(response.status, decoded, method, path)
        return decoded

    async def _send(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        content: bytes | None,
        headers: dict[str, str] | None,
        limits: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """One request, its headers read; authenticated by the httpx Auth flow, which
        may answer a 401 with a second request (a re-read token, a new exec token)."""
        session = self._session or self._open()
        send = functools.partial(
            session.request,
            method,
            self._server + path,
            params=params,
            data=content,
            timeout=limits,
            allow_redirects=False,
        )
        if self._auth is None:
            return await send(headers=headers)
        flow = self._auth.async_auth_flow(httpx.Request(method, self._auth_url))
        try:
            authed = await anext(flow)
            response = await send(headers=_with_auth(headers, authed))
            if response.status != 401:
                return response
            try:
                retry = await flow.asend(httpx.Response(401, request=authed))
            except StopAsyncIteration:
                return response
            except BaseException:
                # A token file gone mid-rotation, an exec plugin failing: the 401's
                # connection goes back to the pool now, not whenever (and on whichever
                # thread) the collector frees the response.
                response.release()
                raise
            response.release()
            return await send(headers=_with_auth(headers, retry))
        finally:
            await flow.aclose()

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        return await self.request("GET", resource.path(namespace, name))

    async def get_or_none(
        self, resource: Resource, name: str, namespace: str | None = None
    ) -> JSON | None:
        try:
            return await self.get(resource, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> JSON:
        params = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
            "resourceVersion": resource_version,
        }
        return await self.request(
            "GET", resource.path(namespace), params=params, request_timeout=120
        )

    async def create(self, resource: Resource, obj: JSON, namespace: str | None = None) -> JSON:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        return await self.request("POST", resource.path(ns), body=obj)

    async def replace(
        self,
        resource: Resource,
        obj: JSON,
        *,
        subresource: str | None = None,
    ) -> JSON:
        meta = obj["metadata"]
        path = resource.path(meta.get("namespace"), meta["name"], subresource)
        return await self.request("PUT", path, body=obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> JSON:
        params = {"fieldManager": field_manager, "force": force}
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            params=params,
            body=patch,
            content_type=content_type,
        )

    async def apply(
        self, resource: Resource, obj: JSON, *, field_manager: str, force: bool = True
    ) -> JSON:
        """Server-side apply of a whole object (JSON is valid apply YAML)."""
        meta = obj["metadata"]
        return await self.patch(
            resource,
            meta["name"],
            obj,
            namespace=meta.get("namespace"),
            content_type=APPLY_PATCH,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: JSON | None = None,
    ) -> JSON:
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            body["preconditions"] = preconditions
        return await self.request("DELETE", resource.path(namespace, name), body=body)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncIterator[JSON]:
        """Watch events ({"type": ..., "object": ...}) until the server ends the stream.

        A 410 Gone arrives either as an HTTP status (ApiError) or as an ERROR event
        whose object is a Status with code 410; callers relist in both cases.
        """
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true" if bookmarks else None,
        }
        await self._limiter.acquire()
        path = resource.path(namespace)
        # The stream stays open for minutes: connecting is bounded, and each read by
        # the server's own end of the watch plus a margin.
        timeout = aiohttp.ClientTimeout(
            total=None, connect=CONNECT_TIMEOUT, sock_read=timeout_seconds + 30
        )
        response = await self._send("GET", path, _clean(params), None, None, timeout)
        try:
            self._observe("WATCH", response.status)
            if response.status >= 400:
                raise ApiError(response.status, _decode(await response.read()), "GET", path)
            lines = LineSplitter()
            async for chunk in response.content.iter_any():
                for line in lines.feed(chunk):
                    yield orjson.loads(line)
            for line in lines.flush():
                yield orjson.loads(line)
        finally:
            # Back to the pool when the server ended the stream, else closed.
            response.release()

    def _observe(self, method: str, status: int) -> None:
        if self._on_response is not None:
            self._on_response(method, str(status), self._host)


class Lister(Protocol):
    """What a paged LIST needs: :meth:`ApiClient.list`, or a test's fake of it."""

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> JSON: ...


async def delete_exact(
    client: ApiClient,
    resource: Resource,
    obj: JSON,
    *,
    resource_version: str | None = None,
    propagation_policy: str | None = None,
) -> bool:
    """DELETE the object `obj` shows, by its UID (and at `resource_version`, if given),
    so that another object of its name, or this one changed since, is never hit. False
    when refused as gone or not the one meant (404, 409)."""
    meta = meta_of(obj)
    preconditions = {"uid": meta.get("uid")}
    if resource_version:
        preconditions["resourceVersion"] = resource_version
    try:
        await client.delete(
            resource,
            str(meta["name"]),
            str(meta["namespace"]),
            propagation_policy=propagation_policy,
            preconditions=preconditions,
        )
    except ApiError as exc:
        if exc.not_found or exc.conflict:
            return False
        raise
    return True


async def list_pages(
    lister: Lister,
    resource: Resource,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    page_size: int | None = 500,
) -> AsyncIterator[JSON]:
    """Every page of a LIST in turn, each asked for with the previous page's continue
    token, until a page comes without one. The pages are cut from the first page's
    snapshot (its resourceVersion); a token that expired meanwhile fails the next
    request with 410 Gone, and only the caller knows whether to start over."""
    token: str | None = None
    while True:
        page = await lister.list(
            resource,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=page_size,
            continue_token=token,
        )
        yield page
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return


class LineSplitter:
    """Splits a watch stream's bytes into its newline-delimited JSON documents.

    Bytes, not text: orjson parses bytes, so decoding each event to str first only
    costs a copy, and a split on b"\n" can never fall inside a UTF-8 sequence. Only
    "\n" ends a line; JSON text carries no raw newline, while a str line splitter
    would also break at a raw U+0085 or U+2028 inside a string value.
    """

    def __init__(self) -> None:
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes; what follows its last newline is kept."""
        if b"\n" not in chunk:
            self._partial += chunk
            return []
        lines = chunk.split(b"\n")
        if self._partial:
            self._partial += lines[0]
            lines[0] = bytes(self._partial)
            self._partial.clear()
        self._partial += lines.pop()
        return [line for line in lines if _has_document(line)]

    def flush(self) -> list[bytes]:
        """The last line, when the stream ended without a newline after it."""
        line = bytes(self._partial)
        self._partial.clear()
        return [line] if _has_document(line) else []


def _has_document(line: bytes) -> bool:
    # Blank lines (a CRLF-terminated stream's "\r" included) separate nothing.
    return line != b"" and line != b"\r"


def _clean(params: dict[str, Any] | None) -> dict[str, Any] | None:
    if not params:
        return None
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def _timeout(request_timeout: float | None) -> aiohttp.ClientTimeout:
    # httpx's meaning, kept: the time to get a connection and the time any one read
    # may wait, not a bound on the whole exchange. None bounds only connecting.
    if not request_timeout:
        return _NO_READ_TIMEOUT
    return aiohttp.ClientTimeout(total=None, connect=request_timeout, sock_read=request_timeout)


_NO_READ_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT)


def _with_auth(headers: dict[str, str] | None, authed: httpx.Request) -> dict[str, str]:
    out = dict(headers) if headers else {}
    for name, value in authed.headers.items():
        if name not in _HTTPX_OWN_HEADERS:
            out[name] = value
    return out


# Set by httpx.Request itself, not by an auth flow.
_HTTPX_OWN_HEADERS = frozenset(("host", "content-length", "transfer-encoding"))


def _decode(content: bytes) -> JSON:
    if not content:
        return {}
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        return {"message": content.decode("utf-8", "replace")[:500]}
    return data if isinstance(data, dict) else {"items": data}


def _encode(body: Any, content_type: str) -> bytes:
    content = orjson.dumps(body)
    if content_type != APPLY_PATCH:
        return content
    text = content.decode()
    if _NOT_YAML_PRINTABLE.search(text) is None:
        return content
    # JSON escapes are YAML escapes too, and these characters can only sit in strings.
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()
