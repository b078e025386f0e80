"""A raw-JSON Kubernetes API client: lightkube for configuration and authentication,
httpx for the requests, orjson for the bodies.

Objects stay plain dicts. Typed models are too slow to decode for caches of
thousands of pods, and the controller only ever reads a handful of members.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
from lightkube.config.client_adapter import AsyncClient as _lightkube_async_client
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import KubeConfig, SingleConfig

from leaderworkerset.api.objects import JSON

ResponseHook = Callable[[str, str, str], None]  # (method, status code, host)

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


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: enough to build every URL for it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
CORE_EVENTS = Resource("", "v1", "events", "Event")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
LEADERWORKERSETS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")


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

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.qps)
                self._stamp = time.monotonic()
                self._tokens = 1
            self._tokens -= 1


class ApiClient:
    """Async JSON requests against one API server."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        qps: float = 500.0,
        burst: int = 500,
        on_response: ResponseHook | None = None,
        namespace: str = "default",
    ) -> None:
        self.http = http
        self.namespace = namespace
        self._limiter = TokenBucket(qps, burst)
        self._on_response = on_response

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
        # Watches hold a response open for minutes, so only connecting is time-bounded
        # here; ordinary requests pass their own timeout.
        params = ConnectionParams(timeout=httpx.Timeout(30.0, read=None), trust_env=False)
        http = _lightkube_async_client(config, params)
        http.headers["User-Agent"] = user_agent
        http.headers["Accept"] = "application/json"
        return cls(http, qps=qps, burst=burst, on_response=on_response, namespace=config.namespace)

    async def close(self) -> None:
        await self.http.aclose()

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
        response = await self.http.request(
            method,
            path,
            params=_clean(params),
            content=content,
            headers=headers,
            timeout=httpx.Timeout(request_timeout) if request_timeout else httpx.USE_CLIENT_DEFAULT,
        )
        self._observe(method, response)
        data = _decode(response.content)
        if response.status_code >= 400:
            raise ApiError(response.status_code, data, method, path)
        return data

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
        async with self.http.stream(
            "GET",
            path,
            params=_clean(params),
            timeout=httpx.Timeout(30.0, read=timeout_seconds + 30),
        ) as response:
            self._observe("WATCH", response)
            if response.status_code >= 400:
                raise ApiError(response.status_code, _decode(await response.aread()), "GET", path)
            lines = LineSplitter()
            async for chunk in response.aiter_bytes():
                for line in lines.feed(chunk):
                    yield orjson.loads(line)
            for line in lines.flush():
                yield orjson.loads(line)

    def _observe(self, method: str, response: httpx.Response) -> None:
        if self._on_response is not None:
            self._on_response(method, str(response.status_code), response.url.host)


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
