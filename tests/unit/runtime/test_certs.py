"""Certificate generation, validity checks, TLS settings and the rotator's bookkeeping."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import base64
import dataclasses
import datetime
import errno
import hashlib
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from leaderworkerset.api.resources import CRDS, MUTATING_WEBHOOKS, SECRETS, VALIDATING_WEBHOOKS
from leaderworkerset.runtime import certs
from leaderworkerset.runtime.certs import (
    TLS_READ_BUFFER,
    CertRotator,
    CertRotatorOptions,
    CertsNotReadyError,
    TLSOptions,
    load_key_pair,
    server_ssl_context,
)
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.pki import (
    KeyPairs,
    check_key_pairs,
    generate_key_pairs,
    self_signed_cert,
)
from tests.toolkit.fake_client import Call, FakeApiClient

DNS = ("svc.ns.svc", "svc.ns.svc.cluster.local")
NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def pairs() -> KeyPairs:
    return generate_key_pairs(
        ca_name="lws-ca",
        ca_organization="lws",
        dns_names=DNS,
        ip_addresses=("127.0.0.1",),
        now=NOW,
    )


def test_ca_is_a_ten_year_rsa_ca(pairs: KeyPairs) -> None:
    ca = x509.load_pem_x509_certificate(pairs.ca_cert)
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "lws-ca"
    assert ca.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "lws"
    key = ca.public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    lifetime = ca.not_valid_after_utc - NOW
    assert datetime.timedelta(days=3640) < lifetime < datetime.timedelta(days=3660)


def test_serving_cert_names_and_usage(pairs: KeyPairs) -> None:
    ca = x509.load_pem_x509_certificate(pairs.ca_cert)
    cert = x509.load_pem_x509_certificate(pairs.cert)
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == list(DNS)
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    key = cert.public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    lifetime = cert.not_valid_after_utc - NOW
    assert datetime.timedelta(days=360) < lifetime < datetime.timedelta(days=370)


def test_valid_pairs_pass_the_check(pairs: KeyPairs) -> None:
    assert check_key_pairs(pairs, dns_names=DNS, ip_addresses=("127.0.0.1",), now=NOW) is None


def test_expiry_within_the_lookahead_needs_regeneration(pairs: KeyPairs) -> None:
    nine_months = NOW + datetime.timedelta(days=300)
    reason = check_key_pairs(pairs, dns_names=DNS, now=nine_months)
    assert reason is not None and "serving certificate expires" in reason
    # A lookahead longer than the serving validity forces a rotation at once.
    forced = check_key_pairs(pairs, dns_names=DNS, now=NOW, lookahead=datetime.timedelta(days=400))
    assert forced is not None and "expires" in forced


def test_not_yet_valid_is_invalid(pairs: KeyPairs) -> None:
    reason = check_key_pairs(pairs, dns_names=DNS, now=NOW - datetime.timedelta(days=2))
    assert reason is not None and "not valid yet" in reason


def test_missing_names_need_regeneration(pairs: KeyPairs) -> None:
    reason = check_key_pairs(pairs, dns_names=(*DNS, "other.ns.svc"), now=NOW)
    assert reason == "the serving certificate lacks the names other.ns.svc"
    reason = check_key_pairs(pairs, dns_names=DNS, ip_addresses=("10.0.0.1",), now=NOW)
    assert reason == "the serving certificate lacks the names 10.0.0.1"


def test_mismatched_keys_and_foreign_ca_are_invalid(pairs: KeyPairs) -> None:
    other = generate_key_pairs(ca_name="x", ca_organization="y", dns_names=DNS, now=NOW)
    swapped_key = KeyPairs(pairs.ca_cert, pairs.ca_key, pairs.cert, other.key)
    assert "serving key does not match" in (
        check_key_pairs(swapped_key, dns_names=DNS, now=NOW) or ""
    )
    swapped_ca = KeyPairs(other.ca_cert, other.ca_key, pairs.cert, pairs.key)
    assert "invalid" in (check_key_pairs(swapped_ca, dns_names=DNS, now=NOW) or "")
    garbage = KeyPairs(b"junk", pairs.ca_key, pairs.cert, pairs.key)
    assert "invalid" in (check_key_pairs(garbage, dns_names=DNS, now=NOW) or "")


def test_secret_data_round_trip(pairs: KeyPairs) -> None:
    data = pairs.secret_data()
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert base64.b64decode(data["tls.crt"]) == pairs.cert
    assert KeyPairs.from_secret_data(data) == pairs
    assert KeyPairs.from_secret_data(None) is None
    assert KeyPairs.from_secret_data({**data, "tls.key": ""}) is None
    assert KeyPairs.from_secret_data({**data, "ca.crt": "%%%"}) is None


def test_server_context_defaults_to_tls12_and_http11_only() -> None:
    ctx = server_ssl_context()
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert server_ssl_context(TLSOptions("VersionTLS13")).minimum_version == ssl.TLSVersion.TLSv1_3


def test_server_context_restricts_cipher_suites() -> None:
    ctx = server_ssl_context(TLSOptions(cipher_suites=("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",)))
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-RSA-AES128-GCM-SHA256"]
    with pytest.raises(ValueError, match="not supported"):
        server_ssl_context(TLSOptions(cipher_suites=("TLS_NOPE",)))


async def test_served_tls_reads_through_a_small_buffer_and_whole_bodies_arrive() -> None:
    ctx = server_ssl_context()
    assert asyncio.sslproto.SSLProtocol.max_size <= TLS_READ_BUFFER
    load_key_pair(ctx, *self_signed_cert())
    size = 10 * TLS_READ_BUFFER + 123  # many records and many buffer fills

    async def digest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await reader.readexactly(size)
        writer.write(hashlib.sha256(body).digest())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(digest, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(body)
        await writer.drain()
        assert await reader.readexactly(32) == hashlib.sha256(body).digest()
        writer.close()
        await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()


def test_self_signed_cert_loads() -> None:
    cert, key = self_signed_cert()
    load_key_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert, key)
    parsed = x509.load_pem_x509_certificate(cert)
    sans = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)


# --- the rotator against an in-memory API --------------------------------------------


def conflict_on_next_replace(api: FakeApiClient) -> None:
    """The next replace, of any object, meets a conflict (as if written in between)."""

    async def once(call: Call) -> None:
        if call.verb == "replace":
            api.on_call = None
            raise ApiError(409, {"reason": "Conflict"})

    api.on_call = once


def webhook_configuration(kind: str, name: str, hooks: int) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {"name": f"h{i}.example.com", "clientConfig": {"url": f"https://x/{i}"}}
            for i in range(hooks)
        ],
    }


@pytest.fixture
def api() -> FakeApiClient:
    fake = FakeApiClient()
    fake.put(MUTATING_WEBHOOKS, webhook_configuration("MutatingWebhookConfiguration", "m", 2))
    fake.put(VALIDATING_WEBHOOKS, webhook_configuration("ValidatingWebhookConfiguration", "v", 1))
    return fake


def rotator_options(cert_dir: Path, **changes: Any) -> CertRotatorOptions:
    return CertRotatorOptions(
        namespace="ns",
        secret_name="certs",
        service_name="svc",
        cert_dir=cert_dir,
        ca_name="lws-ca",
        ca_organization="lws",
        mutating_webhook_configurations=("m",),
        validating_webhook_configurations=("v",),
        extra_ip_addresses=("127.0.0.1",),
        **changes,
    )


def bundles(api: FakeApiClient) -> list[str]:
    out = []
    for (plural, _, _), obj in sorted(api.objects.items()):
        if plural.endswith("webhookconfigurations"):
            out += [h["clientConfig"].get("caBundle", "") for h in obj["webhooks"]]
    return out


async def test_rotator_creates_writes_and_injects(api: FakeApiClient, tmp_path: Path) -> None:
    loaded: list[bool] = []

    async def written() -> None:
        loaded.append(True)

    rotator = CertRotator(api, rotator_options(tmp_path), on_written=written)
    assert not rotator.is_ready()
    await rotator.sync()
    secret = api.objects[("secrets", "ns", "certs")]
    pairs = KeyPairs.from_secret_data(secret["data"])
    assert pairs is not None and pairs == rotator.current
    assert (tmp_path / "tls.crt").read_bytes() == pairs.cert
    assert (tmp_path / "tls.key").read_bytes() == pairs.key
    assert (tmp_path / "ca.crt").read_bytes() == pairs.ca_cert
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    assert bundles(api) == [base64.b64encode(pairs.ca_cert).decode()] * 3
    assert rotator.is_ready() and loaded == [True]
    await rotator.wait_ready(interval=0.01, within=0.01)


async def test_second_sync_writes_nothing(api: FakeApiClient, tmp_path: Path) -> None:
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    writes = list(api.writes())
    await rotator.sync()
    assert api.writes() == writes


async def test_existing_valid_secret_is_adopted(api: FakeApiClient, tmp_path: Path) -> None:
    first = CertRotator(api, rotator_options(tmp_path / "a"))
    await first.sync()
    second = CertRotator(api, rotator_options(tmp_path / "b"))
    await second.sync()
    assert second.current == first.current
    assert (tmp_path / "b" / "tls.crt").read_bytes() == (tmp_path / "a" / "tls.crt").read_bytes()


def put_secret(api: FakeApiClient, pairs: KeyPairs) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "data": pairs.secret_data()}
    secret["metadata"] = {"name": "certs", "namespace": "ns"}
    api.put(SECRETS, secret)


async def test_the_go_managers_certificate_with_the_service_name_alone_is_adopted(
    api: FakeApiClient, tmp_path: Path
) -> None:
    # cert-controller names only <service>.<namespace>.svc (what the API server dials).
    theirs = generate_key_pairs(
        ca_name="lws-ca", ca_organization="lws", dns_names=["svc.ns.svc"],
        ip_addresses=["127.0.0.1"],
    )  # fmt: skip
    put_secret(api, theirs)
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    assert rotator.current == theirs
    assert (tmp_path / "tls.crt").read_bytes() == theirs.cert
    assert bundles(api) == [base64.b64encode(theirs.ca_cert).decode()] * 3
    # What this rotator makes still carries the cluster domain's name too.
    assert rotator.options.dns_names[:2] == ("svc.ns.svc", "svc.ns.svc.cluster.local")


async def test_a_certificate_without_the_service_name_is_replaced(
    api: FakeApiClient, tmp_path: Path
) -> None:
    other = generate_key_pairs(
        ca_name="lws-ca", ca_organization="lws", dns_names=["svc.ns.svc.cluster.local"],
        ip_addresses=["127.0.0.1"],
    )  # fmt: skip
    put_secret(api, other)
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    assert rotator.current is not None and rotator.current.ca_cert != other.ca_cert


async def test_rotation_replaces_ca_and_cert_and_reinjects(
    api: FakeApiClient, tmp_path: Path
) -> None:
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    old = rotator.current
    assert old is not None
    # Rotating now is deleting the Secret (docs/operations.md): the next pass makes a
    # new pair and injects it.
    await api.delete(SECRETS, "certs", "ns")
    await rotator.sync()
    new = rotator.current
    assert new is not None
    assert new.ca_cert != old.ca_cert and new.cert != old.cert
    assert (tmp_path / "tls.crt").read_bytes() == new.cert
    assert bundles(api) == [base64.b64encode(new.ca_cert).decode()] * 3


async def test_expiring_certificates_are_regenerated(api: FakeApiClient, tmp_path: Path) -> None:
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    old = rotator.current
    strict = CertRotator(api, rotator_options(tmp_path, lookahead=datetime.timedelta(days=400)))
    await strict.sync()
    assert strict.current is not None and old is not None
    assert strict.current.cert != old.cert


async def test_reinjects_when_a_configuration_was_overwritten(
    api: FakeApiClient, tmp_path: Path
) -> None:
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    # e.g. `kubectl apply` of the manifests resets the caBundle
    api.put(MUTATING_WEBHOOKS, webhook_configuration("MutatingWebhookConfiguration", "m", 2))
    await rotator.sync()
    assert rotator.current is not None
    assert set(bundles(api)) == {base64.b64encode(rotator.current.ca_cert).decode()}


async def test_conflicts_are_retried(api: FakeApiClient, tmp_path: Path) -> None:
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    api.put(MUTATING_WEBHOOKS, webhook_configuration("MutatingWebhookConfiguration", "m", 2))
    conflict_on_next_replace(api)
    await rotator.sync()
    assert rotator.ca_injected()
    assert rotator.current is not None
    assert set(bundles(api)) == {base64.b64encode(rotator.current.ca_cert).decode()}


async def test_missing_webhook_configuration_means_not_ready(tmp_path: Path) -> None:
    api = FakeApiClient()
    rotator = CertRotator(api, rotator_options(tmp_path))
    with pytest.raises(CertsNotReadyError, match="MutatingWebhookConfiguration m not found"):
        await rotator.sync()
    assert rotator.files_current() and not rotator.ca_injected()
    with pytest.raises(CertsNotReadyError, match="CA was not injected"):
        await rotator.wait_ready(interval=0.01, within=0.05)


async def test_readiness_is_noticed_within_a_poll_of_the_files_arriving(
    api: FakeApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read-only certificate folder (a Secret volume): the kubelet brings the files
    # some time later.
    def read_only(directory: Path, pairs: KeyPairs) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(directory))

    monkeypatch.setattr(certs, "_write_cert_dir", read_only)
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    assert rotator.ca_injected() and not rotator.files_current()
    waiting = asyncio.create_task(rotator.wait_ready(interval=0.02, within=30))
    await asyncio.sleep(0.3)  # the arrival happens after several polls
    assert not waiting.done()
    pairs = rotator.current
    assert pairs is not None
    (tmp_path / "tls.crt").write_bytes(pairs.cert)
    arrived = asyncio.get_running_loop().time()
    await asyncio.wait_for(waiting, 5)
    # A doubling backoff would have slept 0.32 s and more by now.
    assert asyncio.get_running_loop().time() - arrived < 0.2


async def test_injects_into_crd_conversion_webhooks(tmp_path: Path) -> None:
    api = FakeApiClient()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {}}}},
    }
    api.put(CRDS, crd)
    options = dataclasses.replace(
        rotator_options(tmp_path),
        mutating_webhook_configurations=(),
        validating_webhook_configurations=(),
        conversion_crds=("things.example.com",),
    )
    rotator = CertRotator(api, options)
    await rotator.sync()
    stored = api.objects[("customresourcedefinitions", None, "things.example.com")]
    bundle = stored["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
    assert rotator.current is not None
    assert bundle == base64.b64encode(rotator.current.ca_cert).decode()


async def test_existing_secret_keeps_other_keys(api: FakeApiClient, tmp_path: Path) -> None:
    api.put(
        SECRETS,
        {"metadata": {"name": "certs", "namespace": "ns"}, "data": {"extra": "eA=="}},
    )
    rotator = CertRotator(api, rotator_options(tmp_path))
    await rotator.sync()
    data = api.objects[("secrets", "ns", "certs")]["data"]
    assert data["extra"] == "eA==" and "tls.crt" in data


def test_long_service_names_fit_the_common_name_limit() -> None:
    long_dns = ("lws-webhook-service." + "n" * 60 + ".svc",)
    made = generate_key_pairs(ca_name="lws-ca", ca_organization="lws", dns_names=long_dns)
    cert = x509.load_pem_x509_certificate(made.cert)
    assert len(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value) == 64
    assert check_key_pairs(made, dns_names=long_dns) is None
