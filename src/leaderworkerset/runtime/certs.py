"""Serving certificates: TLS settings, a self-managed CA in a Secret, and CA-bundle injection.

`CertRotator` does what the cert-controller rotator does for Go managers: every replica
keeps a Secret holding a self-signed CA and a serving certificate valid, writes the
files the webhook server reads, and injects the CA into the webhook configurations (and
CRD conversion webhooks) that point at the server, so no cert-manager is needed.
Replicas race through optimistic concurrency on the Secret: the loser re-reads and
adopts the winner's certificates. The certificates themselves are built and checked by
`runtime.pki`.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import base64
import contextlib
import datetime
import errno
import logging
import math
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaderworkerset.api.config.tls import CIPHER_SUITES, TLS_VERSIONS
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import (
    CRDS,
    MUTATING_WEBHOOKS,
    SECRETS,
    VALIDATING_WEBHOOKS,
    Resource,
)
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.pki import (
    CA_CERT,
    TLS_CERT,
    TLS_KEY,
    YEAR,
    KeyPairs,
    check_key_pairs,
    generate_key_pairs,
)

log = logging.getLogger("cert-rotation")

# asyncio gives every TLS connection a read buffer of 256 KiB (and reads the decrypted
# stream in chunks of that size). The API server opens one connection per concurrent
# admission request to an HTTP/1.1 webhook, so a burst of pod creations held ~200 of
# them at once: ~50 MiB of buffers, freed a moment later but left behind in the C heap
# as resident size the process never returns. A TLS record is at most 16 KiB of
# plaintext; 32 KiB holds one whole record with room to spare. Under uvloop this cap
# does not apply: its TLS protocol mallocs its buffer without filling it, so only the
# pages a read touches become resident (a burst of 150 connections: 3-7 MiB above
# asyncio's capped buffers, bench.webhook_load --concurrency 150).
TLS_READ_BUFFER = 32 * 1024


@dataclass(frozen=True)
class TLSOptions:
    """The configuration file's `tls` block, in Go's names."""

    min_version: str = ""
    cipher_suites: tuple[str, ...] = ()


def server_ssl_context(options: TLSOptions | None = None) -> ssl.SSLContext:
    """A server context speaking only HTTP/1.1 over ALPN (no HTTP/2 rapid-reset exposure).

    Without a configured minimum this is TLS 1.2, the default of Go's servers. Serving
    with it also caps asyncio's per-connection TLS read buffer (see `TLS_READ_BUFFER`).
    """
    limit_tls_read_buffer()
    options = options or TLSOptions()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if options.min_version:
        if options.min_version not in TLS_VERSIONS:
            raise ValueError(f"unknown TLS version {options.min_version!r}")
        ctx.minimum_version = TLS_VERSIONS[options.min_version]
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if options.cipher_suites:
        names = []
        for suite in options.cipher_suites:
            if suite not in CIPHER_SUITES:
                raise ValueError(f"cipher suite {suite} not supported or doesn't exist")
            openssl = CIPHER_SUITES[suite]
            if openssl:
                names.append(openssl)
        if names:
            ctx.set_ciphers(":".join(names))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def limit_tls_read_buffer(size: int = TLS_READ_BUFFER) -> None:
    """Cap the read buffer of asyncio's TLS connections (process-wide, never raised)."""
    protocol = asyncio.sslproto.SSLProtocol
    protocol.max_size = min(protocol.max_size, size)


def load_key_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load PEM bytes into `ctx` (which only reads files) through a private temp dir."""
    with tempfile.TemporaryDirectory(prefix="tls-") as tmp:
        cert_path, key_path = Path(tmp, TLS_CERT), Path(tmp, TLS_KEY)
        cert_path.write_bytes(cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key_pem)
        ctx.load_cert_chain(cert_path, key_path)


# --- The rotator -----------------------------------------------------------------


class CertsNotReadyError(RuntimeError):
    pass


@dataclass(frozen=True)
class CertRotatorOptions:
    namespace: str
    secret_name: str
    service_name: str
    cert_dir: Path
    ca_name: str
    ca_organization: str
    mutating_webhook_configurations: tuple[str, ...] = ()
    validating_webhook_configurations: tuple[str, ...] = ()
    conversion_crds: tuple[str, ...] = ()
    extra_dns_names: tuple[str, ...] = ()
    extra_ip_addresses: tuple[str, ...] = ()
    ca_validity: datetime.timedelta = 10 * YEAR
    cert_validity: datetime.timedelta = YEAR
    lookahead: datetime.timedelta = datetime.timedelta(days=90)
    check_interval: float = 12 * 3600.0
    watch: bool = True

    @property
    def dns_names(self) -> tuple[str, ...]:
        """The names a certificate made here carries."""
        svc = f"{self.service_name}.{self.namespace}.svc"
        return (svc, f"{svc}.cluster.local", *self.extra_dns_names)

    @property
    def required_dns_names(self) -> tuple[str, ...]:
        """The names a certificate found in the Secret must carry to be kept: the one
        the API server dials (`<service>.<namespace>.svc`, the only name cert-controller
        checks) and any extra ones asked for. So the Go manager's certificate, which has
        that name alone, is adopted in a handover instead of replaced; a new CA would
        fail every admission until the kubelet syncs the new files into the pods (up
        to its sync period, about a minute)."""
        return (f"{self.service_name}.{self.namespace}.svc", *self.extra_dns_names)


class CertRotator:
    """Keeps the serving certificate valid and its CA injected; runs on every replica."""

    needs_leader_election = False

    def __init__(
        self,
        client: ApiClient,
        options: CertRotatorOptions,
        # Awaited once new files are written (the server's reload).
        on_written: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.on_written = on_written
        self.current: KeyPairs | None = None
        self._injected_bundle: str | None = None
        self._dirty = asyncio.Event()
        self._sync_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._cert_dir_writable = True

    # -- runnable

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._loop(), name="cert-rotator"))
        if self.options.watch:
            for resource, namespace, name in self._watched():
                task = asyncio.create_task(
                    self._watch(resource, namespace, name), name=f"cert-rotator-watch-{name}"
                )
                self._tasks.append(task)

    async def stop(self, deadline: float) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=max(0.0, deadline))
        self._tasks.clear()

    # -- readiness

    def files_current(self) -> bool:
        """The webhook server's files hold the certificate the Secret holds."""
        if self.current is None:
            return False
        try:
            return Path(self.options.cert_dir, TLS_CERT).read_bytes() == self.current.cert
        except OSError:
            return False

    def ca_injected(self) -> bool:
        return self.current is not None and self._injected_bundle == _bundle(self.current)

    def is_ready(self) -> bool:
        return self.files_current() and self.ca_injected()

    async def wait_ready(self, *, interval: float = 1.0, within: float = 1023.0) -> None:
        """Poll readiness every `interval` seconds; CertsNotReadyError after `within`,
        the whole of cert-controller's backoff (1 s doubled ten times). A steady poll,
        not that backoff: a Secret volume's files arrive whenever the kubelet next syncs
        the pod (within about 90 s), and a doubling wait noticed them up to 50 s late
        on the real node."""
        for _ in range(max(1, math.ceil(within / interval))):
            if self.is_ready():
                return
            await asyncio.sleep(interval)
        if not self.is_ready():
            what = "the CA was not injected" if self.files_current() else "no certificate files"
            raise CertsNotReadyError(f"certificates not ready: {what} in {self.options.cert_dir}")

    # -- work

    def trigger(self) -> None:
        self._dirty.set()

    async def sync(self) -> None:
        """One pass: a valid Secret, current files, the CA in every target."""
        async with self._sync_lock:
            pairs = await self._ensure_secret()
            self.current = pairs
            await self._write_files(pairs)
            await self._inject(_bundle(pairs))

    async def _loop(self) -> None:
        retry = 1.0
        while True:
            self._dirty.clear()
            wait = self.options.check_interval
            try:
                await self.sync()
                retry = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("certificate sync failed: %s", exc)
                wait, retry = retry, min(retry * 2, 60.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dirty.wait(), wait)

    async def _ensure_secret(self) -> KeyPairs:
        opts = self.options
        for _ in range(10):
            secret = await self.client.get_or_none(SECRETS, opts.secret_name, opts.namespace)
            pairs = KeyPairs.from_secret_data(secret.get("data")) if secret else None
            reason: str | None
            if pairs is None:
                reason = "no certificates in the secret"
            else:
                reason = check_key_pairs(
                    pairs,
                    dns_names=opts.required_dns_names,
                    ip_addresses=opts.extra_ip_addresses,
                    lookahead=opts.lookahead,
                )
            if reason is None and pairs is not None:
                return pairs
            log.info(
                "refreshing certificates", extra={"reason": reason, "secret": opts.secret_name}
            )
            fresh = await asyncio.to_thread(
                generate_key_pairs,
                ca_name=opts.ca_name,
                ca_organization=opts.ca_organization,
                dns_names=opts.dns_names,
                ip_addresses=opts.extra_ip_addresses,
                ca_validity=opts.ca_validity,
                cert_validity=opts.cert_validity,
            )
            try:
                if secret is None:
                    await self.client.create(SECRETS, _new_secret(opts, fresh), opts.namespace)
                else:
                    secret["data"] = {**(secret.get("data") or {}), **fresh.secret_data()}
                    await self.client.replace(SECRETS, secret)
            except ApiError as exc:
                if exc.conflict or exc.already_exists:
                    # Another replica wrote first: adopt its certificates if they are good.
                    continue
                raise
            return fresh
        raise RuntimeError(f"secret {opts.namespace}/{opts.secret_name} keeps changing")

    async def _write_files(self, pairs: KeyPairs) -> None:
        if self.files_current():
            return
        directory = Path(self.options.cert_dir)
        if self._cert_dir_writable:
            try:
                await asyncio.to_thread(_write_cert_dir, directory, pairs)
            except OSError as exc:
                if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                    raise
                # A Secret volume: the kubelet syncs the files within its sync period.
                self._cert_dir_writable = False
                log.info(
                    "certificate directory is read-only; waiting for the kubelet to sync it",
                    extra={"certDir": str(directory)},
                )
        if self.on_written is not None and self.files_current():
            await self.on_written()

    async def _inject(self, bundle: str) -> None:
        opts = self.options
        for resource, names in (
            (MUTATING_WEBHOOKS, opts.mutating_webhook_configurations),
            (VALIDATING_WEBHOOKS, opts.validating_webhook_configurations),
            (CRDS, opts.conversion_crds),
        ):
            for name in names:
                await self._inject_one(resource, name, bundle)
        self._injected_bundle = bundle

    async def _inject_one(self, resource: Resource, name: str, bundle: str) -> None:
        for _ in range(10):
            obj = await self.client.get_or_none(resource, name)
            if obj is None:
                raise CertsNotReadyError(f"{resource.kind} {name} not found for CA injection")
            if not _set_ca_bundle(obj, bundle):
                return
            try:
                await self.client.replace(resource, obj)
            except ApiError as exc:
                if exc.conflict:
                    continue
                raise
            log.info("injected CA bundle", extra={"kind": resource.kind, "object": name})
            return
        raise RuntimeError(f"{resource.kind} {name} keeps changing")

    def _watched(self) -> list[tuple[Resource, str | None, str]]:
        opts = self.options
        targets: list[tuple[Resource, str | None, str]] = [
            (SECRETS, opts.namespace, opts.secret_name)
        ]
        targets += [(MUTATING_WEBHOOKS, None, n) for n in opts.mutating_webhook_configurations]
        targets += [(VALIDATING_WEBHOOKS, None, n) for n in opts.validating_webhook_configurations]
        targets += [(CRDS, None, n) for n in opts.conversion_crds]
        return targets

    async def _watch(self, resource: Resource, namespace: str | None, name: str) -> None:
        retry = 1.0
        while True:
            try:
                async for event in self.client.watch(
                    resource, namespace, field_selector=f"metadata.name={name}", bookmarks=False
                ):
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self.trigger()
                    retry = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("watch ended", extra={"kind": resource.kind, "error": str(exc)})
                await asyncio.sleep(retry)
                retry = min(retry * 2, 30.0)


def _bundle(pairs: KeyPairs) -> str:
    return base64.b64encode(pairs.ca_cert).decode()


def _new_secret(opts: CertRotatorOptions, pairs: KeyPairs) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": opts.secret_name, "namespace": opts.namespace},
        "type": "Opaque",
        "data": pairs.secret_data(),
    }


def _set_ca_bundle(obj: JSON, bundle: str) -> bool:
    """Put `bundle` into every client config of a webhook configuration or CRD."""
    configs: list[dict[str, Any]] = []
    if obj.get("kind") == "CustomResourceDefinition":
        conversion = obj.get("spec", {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            webhook = conversion.setdefault("webhook", {})
            configs.append(webhook.setdefault("clientConfig", {}))
    else:
        configs += [hook.setdefault("clientConfig", {}) for hook in obj.get("webhooks") or []]
    changed = False
    for config in configs:
        if config.get("caBundle") != bundle:
            config["caBundle"] = bundle
            changed = True
    return changed


def _write_cert_dir(directory: Path, pairs: KeyPairs) -> None:
    """Replace each file atomically; readers tell a half-rotated pair by the key mismatch."""
    directory.mkdir(parents=True, exist_ok=True)
    files = ((CA_CERT, pairs.ca_cert, 0o644), (TLS_KEY, pairs.key, 0o600))
    for name, data, mode in (*files, (TLS_CERT, pairs.cert, 0o644)):
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, directory / name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
