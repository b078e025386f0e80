"""Probe and metrics endpoints, and the listening-socket helpers every server shares.

`/healthz` and `/readyz` answer in the apiserver's healthz format (`ok`, or one
`[+]name ok` / `[-]name failed` line a check with `?verbose`). Metrics are served like
controller-runtime's metrics server: when secure, HTTPS and callers authenticated by
TokenReview and authorized by SubjectAccessReview (results cached), so scraping needs
`get` on the non-resource URL `/metrics`; otherwise plain HTTP that anyone who reaches
the port may read. The certificate is the pair in the metrics certificate directory
when both files are there at start (a mounted Secret, e.g. issued by cert-manager, so
Prometheus can verify it), reloaded when they change; otherwise a self-generated one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from leaderworkerset.api.objects import JSON
from leaderworkerset.runtime.certs import TLSOptions, load_key_pair, server_ssl_context
from leaderworkerset.runtime.client import ApiClient, ApiError, TokenBucket
from leaderworkerset.runtime.http_server import KEEPALIVE_TIMEOUT, TLS_HANDSHAKE_TIMEOUT
from leaderworkerset.runtime.keypair_files import KeyPairFiles
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.pki import TLS_CERT, TLS_KEY, self_signed_cert

log = logging.getLogger("health")
# controller-runtime's logger name for its metrics server.
metrics_log = logging.getLogger("controller-runtime.metrics")

Check = Callable[[], bool | Awaitable[bool]]
# controller-runtime's default CertDir of the metrics server. Go's os.TempDir() is
# $TMPDIR or /tmp, unchecked; tempfile.gettempdir() would probe for a writable folder at
# import, which a read-only root file system without a /tmp mount does not have. The
# charts mount cert-manager's metrics Secret there.
DEFAULT_METRICS_CERT_DIR = Path(
    os.environ.get("TMPDIR") or "/tmp", "k8s-metrics-server", "serving-certs"
)
K = TypeVar("K")
V = TypeVar("V")


# --- Sockets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BindAddress:
    host: str
    port: int
    scheme: str = ""  # "http"/"https" when the address said so, else the server's default


def parse_bind_address(address: str) -> BindAddress | None:
    """A Go listen address (`:8081`, `127.0.0.1:8443`, `[::1]:0`), optionally with an
    `http://`/`https://` prefix; None when it disables the server (`0` or empty)."""
    scheme = ""
    for prefix in ("http://", "https://"):
        if address.startswith(prefix):
            scheme, address = prefix[:-3], address[len(prefix) :]
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"invalid bind address {address!r}: want host:port")
    return BindAddress(host.strip("[]"), int(port), scheme)


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket; an empty host means every interface, IPv6 and IPv4."""
    if host in ("", "::"):
        try:
            sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            return _bind(sock, ("::", port))
        except OSError:
            if host == "::":
                raise
            host = "0.0.0.0"
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return _bind(socket.socket(family, kind, proto), addr)


def _bind(sock: socket.socket, addr: Any) -> socket.socket:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
    except BaseException:
        sock.close()
        raise
    return sock


@dataclass(frozen=True)
class SlowClientTimeouts:
    """How long the probe and metrics servers wait on a client.

    `idle` is aiohttp's keep-alive timer, which runs from the connection's start (after
    the TLS handshake) and from each answer, and closes the connection if no whole
    request head has arrived by then. So it bounds an idle connection and a head sent
    slowly or left unfinished alike (aiohttp's default, 3630 s, let a client hold a
    connection for an hour). 75 s is the webhook server's idle timeout, under the 90 s
    after which Go clients (Prometheus) drop idle connections themselves; scrapes and
    probes come more often than that. A request being answered is never cut off.
    `handshake` bounds the TLS handshake, as the webhook server's does.
    """

    idle: float = KEEPALIVE_TIMEOUT
    handshake: float = TLS_HANDSHAKE_TIMEOUT


# Request heads: aiohttp's defaults, named so they are ours. A bearer token (a
# ServiceAccount JWT is 1-2 KiB) fits in a field; a head is at most about 1 MiB.
MAX_LINE = 8190
MAX_FIELD = 8190
MAX_HEADERS = 128


class _HandshakeBoundedSite(web.SockSite):
    """aiohttp's SockSite with a TLS handshake timeout, which it does not pass on."""

    def __init__(
        self,
        runner: web.AppRunner,
        sock: socket.socket,
        *,
        ssl_context: ssl.SSLContext | None,
        handshake_timeout: float,
    ) -> None:
        super().__init__(runner, sock, ssl_context=ssl_context)
        self.handshake_timeout = handshake_timeout

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        kwargs: dict[str, Any] = {}
        if self._ssl_context is not None:
            kwargs["ssl_handshake_timeout"] = self.handshake_timeout
        self._server = await asyncio.get_running_loop().create_server(
            server, sock=self._sock, ssl=self._ssl_context, backlog=self._backlog, **kwargs
        )


class _Site:
    """One aiohttp application on one socket, with slow clients timed out and request
    bodies never read."""

    def __init__(self, name: str, timeouts: SlowClientTimeouts) -> None:
        self.name = name
        self.timeouts = timeouts
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def serve(
        self, app: web.Application, bind: BindAddress, ssl_context: ssl.SSLContext | None
    ) -> None:
        runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=5,
            keepalive_timeout=self.timeouts.idle,
            # No endpoint reads a body. aiohttp would read and drop what is left of one
            # for 10 s after the answer; with 0 it closes the connection instead.
            lingering_time=0,
            max_line_size=MAX_LINE,
            max_field_size=MAX_FIELD,
            max_headers=MAX_HEADERS,
        )
        await runner.setup()
        sock = listen_socket(bind.host, bind.port)
        self.port = sock.getsockname()[1]
        try:
            await _HandshakeBoundedSite(
                runner, sock, ssl_context=ssl_context, handshake_timeout=self.timeouts.handshake
            ).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        log.info(f"serving {self.name}", extra={"port": self.port})

    async def close(self, deadline: float) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.cleanup(), max(0.1, deadline))


# --- Probes ---------------------------------------------------------------------------


class HealthServer:
    """Plain-HTTP liveness and readiness endpoints with named checks."""

    needs_leader_election = False

    def __init__(
        self,
        bind_address: str,
        *,
        liveness_path: str = "/healthz",
        readiness_path: str = "/readyz",
        timeouts: SlowClientTimeouts = SlowClientTimeouts(),
    ) -> None:
        self.bind = parse_bind_address(bind_address)
        self.liveness_path = "/" + liveness_path.strip("/")
        self.readiness_path = "/" + readiness_path.strip("/")
        self.healthz: dict[str, Check] = {}
        self.readyz: dict[str, Check] = {}
        self._site = _Site("health probes", timeouts)

    @property
    def port(self) -> int:
        return self._site.port

    def add_healthz_check(self, name: str, check: Check) -> None:
        self.healthz[name] = check

    def add_readyz_check(self, name: str, check: Check) -> None:
        self.readyz[name] = check

    async def start(self) -> None:
        if self.bind is None:
            return
        app = web.Application()
        for path, checks in (
            (self.liveness_path, self.healthz),
            (self.readiness_path, self.readyz),
        ):
            endpoint = _checks_endpoint(path.lstrip("/"), checks)
            app.router.add_get(path, endpoint)
            app.router.add_get(path + "/{check}", endpoint)
        await self._site.serve(app, self.bind, None)

    async def stop(self, deadline: float) -> None:
        await self._site.close(deadline)


async def run_check(check: Check) -> tuple[bool, str]:
    try:
        result = check()
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        return False, str(exc) or type(exc).__name__
    return bool(result), ""


def _checks_endpoint(
    kind: str, checks: dict[str, Check]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def endpoint(request: web.Request) -> web.Response:
        only = request.match_info.get("check")
        if only is not None and only not in checks:
            return web.Response(status=404, text=f"no {kind} check named {only!r}\n")
        excluded = set(request.query.getall("exclude", []))
        lines, failed = [], []
        for name, check in checks.items():
            if (only is not None and name != only) or name in excluded:
                continue
            ok, why = await run_check(check)
            if ok:
                lines.append(f"[+]{name} ok")
            else:
                failed.append(name)
                lines.append(f"[-]{name} failed: {why or 'reason withheld'}")
                log.info(f"{kind} check failed", extra={"check": name, "reason": why or None})
        if failed:
            return web.Response(status=500, text="\n".join([*lines, f"{kind} check failed"]) + "\n")
        if "verbose" in request.query:
            return web.Response(text="\n".join([*lines, f"{kind} check passed"]) + "\n")
        return web.Response(text="ok")

    return endpoint


# --- Metrics -------------------------------------------------------------------------


class TTLCache(Generic[K, V]):
    """A small expiring map; the oldest entries go first when it is full."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._items: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] < time.monotonic():
            del self._items[key]
            return None
        return item[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if len(self._items) >= self.max_entries:
            del self._items[next(iter(self._items))]
        self._items[key] = (time.monotonic() + ttl, value)


@dataclass(frozen=True)
class UserInfo:
    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ReviewsExhausted(Exception):
    """An unknown token arrived while the review budget was spent."""


class DelegatedAuth:
    """TokenReview authentication and SubjectAccessReview authorization, cached with
    controller-runtime's TTLs (tokens 1 min; allowed 5 min, denied 30 s).

    Beyond controller-runtime, the reviews of tokens not in the cache share a small
    budget: the reviews go out on the manager's own client, whose rate limit the
    reconcilers need, and anyone who reaches the port can send a new token each time.
    Past it, a caller with an unknown token is answered 429; known ones are not."""

    TOKEN_TTL = 60.0
    ALLOW_TTL = 300.0
    DENY_TTL = 30.0
    # A Prometheus scrapes with one token a minute or so; two dozen pods' scrapers, a
    # burst of them after a restart, stay well within this.
    REVIEWS_PER_SECOND = 5.0
    REVIEWS_BURST = 20

    def __init__(self, client: ApiClient, budget: TokenBucket | None = None) -> None:
        self.client = client
        self._tokens: TTLCache[str, UserInfo | bool] = TTLCache()
        self._decisions: TTLCache[tuple[Any, ...], bool] = TTLCache()
        self.budget = budget or TokenBucket(self.REVIEWS_PER_SECOND, self.REVIEWS_BURST)

    async def authenticate(self, token: str) -> UserInfo | None:
        """The token's user, None if it authenticates no one; ReviewsExhausted when it
        is not cached and the budget is spent."""
        key = hashlib.sha256(token.encode()).hexdigest()  # never keep raw tokens around
        cached = self._tokens.get(key)
        if cached is not None:
            return cached if isinstance(cached, UserInfo) else None
        if not self.budget.try_take():
            raise ReviewsExhausted
        review = await self.client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        user: UserInfo | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = tuple(sorted((k, tuple(v)) for k, v in (info.get("extra") or {}).items()))
            user = UserInfo(
                info.get("username", ""),
                info.get("uid", ""),
                tuple(info.get("groups") or ()),
                extra,
            )
        self._tokens.put(key, user if user is not None else False, self.TOKEN_TTL)
        return user

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        key = (user, verb, path)
        cached = self._decisions.get(key)
        if cached is not None:
            return cached
        spec: JSON = {
            "user": user.username,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = await self.client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed, self.ALLOW_TTL if allowed else self.DENY_TTL)
        return allowed

    async def check(self, request: web.Request) -> web.Response | None:
        """None when the caller may proceed, else the 401/403/429/500 to answer."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return web.Response(status=401, text="Unauthorized\n")
        try:
            user = await self.authenticate(token.strip())
            if user is None:
                return web.Response(status=401, text="Unauthorized\n")
            if not await self.authorize(user, request.method.lower(), request.path):
                return web.Response(
                    status=403,
                    text=f"Authorization denied for user {user.username} "
                    f"({request.method.lower()} {request.path})\n",
                )
        except ReviewsExhausted:
            return web.Response(
                status=429, text="Too many new tokens\n", headers={"Retry-After": "1"}
            )
        except (ApiError, OSError) as exc:
            log.error("metrics authorization failed: %s", exc)
            return web.Response(status=500, text="Internal Server Error\n")
        return None


class MetricsServer:
    """`/metrics` from the registry. Secure (the default): HTTPS, and `auth` checks every
    caller; the certificate is `cert_dir`'s `tls.crt`/`tls.key` when both exist at start
    (watched for changes), else self-generated. Not secure: plain HTTP, nobody is
    checked. An `http://` or `https://` prefix on the bind address overrides `secure`."""

    needs_leader_election = False

    def __init__(
        self,
        bind_address: str,
        *,
        secure: bool = True,
        auth: DelegatedAuth | None = None,
        tls: TLSOptions | None = None,
        registry: CollectorRegistry | None = None,
        metrics: RuntimeMetrics | None = None,
        cert_dir: Path = DEFAULT_METRICS_CERT_DIR,
        reload_interval: float = 1.0,
        timeouts: SlowClientTimeouts = SlowClientTimeouts(),
    ) -> None:
        self.bind_address = bind_address
        self.bind = parse_bind_address(bind_address)
        scheme = self.bind.scheme if self.bind else ""
        self.secure = scheme == "https" if scheme else secure
        # Authentication without TLS would send bearer tokens in the clear.
        self.auth = auth if self.secure else None
        self.tls = tls
        # What to serve: the process's (the Manager's RuntimeMetrics'); without, nothing.
        if registry is None:
            registry = metrics.registry if metrics is not None else CollectorRegistry()
        self.registry = registry
        # `metrics` counts the certificate's reads, as certwatcher does for either server.
        self.cert_files = KeyPairFiles(
            Path(cert_dir, TLS_CERT), Path(cert_dir, TLS_KEY), log, metrics
        )
        self.reload_interval = reload_interval
        self._watcher: asyncio.Task[None] | None = None
        self._site = _Site("metrics", timeouts)

    @property
    def port(self) -> int:
        return self._site.port

    async def start(self) -> None:
        if self.bind is None:
            return
        ssl_context = await self._ssl_context() if self.secure else None
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        await self._site.serve(app, self.bind, ssl_context)
        # controller-runtime's line, so log queries written for the Go manager match.
        metrics_log.info(
            "Serving metrics server",
            extra={"bindAddress": self.bind_address, "secure": self.secure},
        )

    async def _ssl_context(self) -> ssl.SSLContext:
        ssl_context = server_ssl_context(self.tls)
        # Like controller-runtime, the choice is made once: files that appear later
        # are not picked up, files that were there are watched.
        if self.cert_files.exist():
            if not self.cert_files.load_into(ssl_context):
                raise RuntimeError(
                    f"metrics certificate {self.cert_files.cert_path} and key "
                    f"{self.cert_files.key_path} do not form a valid pair"
                )
            self._watcher = asyncio.create_task(self._watch_certificates(ssl_context))
        else:
            cert, key = await asyncio.to_thread(self_signed_cert)
            load_key_pair(ssl_context, cert, key)
        return ssl_context

    async def _watch_certificates(self, ssl_context: ssl.SSLContext) -> None:
        # The context is changed on this loop, the one whose connections use it.
        while True:
            await asyncio.sleep(self.reload_interval)
            try:
                self.cert_files.load_into(ssl_context)
            except Exception:
                log.exception("metrics certificate reload failed")

    async def stop(self, deadline: float) -> None:
        if self._watcher is not None:
            watcher, self._watcher = self._watcher, None
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await self._site.close(deadline)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.auth is not None:
            refusal = await self.auth.check(request)
            if refusal is not None:
                return refusal
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = content_type
        return response
