"""Certificates and keys: CAs, serving and client certificates, and their checks.

The one place that builds X.509 material: the webhook certificate rotator keeps a
`KeyPairs` in a Secret, the metrics server serves a throwaway self-signed certificate,
and `lws_localcluster.controlplane.pki` issues the local control plane's credentials.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The file names of a CA and a serving pair, in a certificate directory and in a Secret.
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"

YEAR = datetime.timedelta(days=365)
_BACKDATE = datetime.timedelta(hours=1)  # tolerate clock skew between us and API servers

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
# ECDSA keys are the default because generating a handful of RSA keys would dominate
# local cluster start-up on a small machine; the webhook rotator asks for RSA, as
# Go's cert-controller makes.
KeyKind = Literal["ecdsa", "rsa"]


# --- Keys ---------------------------------------------------------------------------


def new_private_key(kind: KeyKind = "ecdsa") -> PrivateKey:
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def private_key_pem(key: PrivateKey) -> bytes:
    """PKCS#1 for RSA, SEC 1 for ECDSA: what Go's cert tooling writes."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)


# --- Certificates -------------------------------------------------------------------


@dataclass(frozen=True)
class CertKey:
    cert: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return private_key_pem(self.key)

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (0600) and return their paths."""
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        crt.write_bytes(self.cert_pem)
        write_private(key, self.key_pem)
        return crt, key


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    # X.509 caps a CN at 64 characters; clients match the SANs, so a cut CN is harmless.
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]))
    return x509.Name(attrs)


def _key_usage(*, cert_sign: bool, key_encipherment: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _sans(dns_names: Iterable[str], ip_addresses: Iterable[str]) -> list[x509.GeneralName]:
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    return sans


def _sign(
    subject: x509.Name,
    key: PrivateKey,
    issuer: CertKey | None,
    *,
    now: datetime.datetime | None,
    validity: datetime.timedelta,
    extensions: Iterable[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    """A certificate for `key`, signed by `issuer` (or by `key` itself when None)."""
    now = now or datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer.key if issuer else key, hashes.SHA256())


def make_ca(
    common_name: str,
    *,
    organizations: Iterable[str] = (),
    key_kind: KeyKind = "ecdsa",
    validity: datetime.timedelta = 10 * YEAR,
    now: datetime.datetime | None = None,
) -> CertKey:
    """A self-signed CA."""
    key = new_private_key(key_kind)
    extensions: list[tuple[x509.ExtensionType, bool]] = [
        (x509.BasicConstraints(ca=True, path_length=None), True),
        (_key_usage(cert_sign=True), True),
        (x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False),
    ]
    name = _name(common_name, organizations)
    return CertKey(_sign(name, key, None, now=now, validity=validity, extensions=extensions), key)


def issue_cert(
    ca: CertKey,
    common_name: str,
    *,
    organizations: Iterable[str] = (),
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str] = (),
    server: bool = False,
    client: bool = False,
    key_kind: KeyKind = "ecdsa",
    validity: datetime.timedelta = YEAR,
    now: datetime.datetime | None = None,
) -> CertKey:
    """Issue a leaf certificate signed by ``ca``.

    For client certificates the API server takes the user from the CN and the
    groups from the O attributes.
    """
    if not (server or client):
        raise ValueError("a certificate must be for server or client use")
    key = new_private_key(key_kind)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    # Only an RSA key can encipher the TLS key exchange; an ECDSA key just signs.
    encipher = isinstance(key, rsa.RSAPrivateKey)
    extensions: list[tuple[x509.ExtensionType, bool]] = [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (_key_usage(cert_sign=False, key_encipherment=encipher), True),
        (x509.ExtendedKeyUsage(usages), False),
        (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), False),
    ]
    sans = _sans(dns_names, ip_addresses)
    if sans:
        extensions.append((x509.SubjectAlternativeName(sans), False))
    name = _name(common_name, organizations)
    return CertKey(_sign(name, key, ca, now=now, validity=validity, extensions=extensions), key)


def self_signed_cert(
    host: str = "localhost", ip_addresses: Iterable[str] = ("127.0.0.1",)
) -> tuple[bytes, bytes]:
    """A throwaway (cert, key) for a server nobody verifies by CA, like the metrics server."""
    key = new_private_key("ecdsa")
    now = datetime.datetime.now(datetime.UTC)
    extensions: list[tuple[x509.ExtensionType, bool]] = [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        (x509.SubjectAlternativeName(_sans([host], ip_addresses)), False),
    ]
    name = _name(f"{host}@{int(now.timestamp())}")
    cert = _sign(name, key, None, now=now, validity=YEAR, extensions=extensions)
    return CertKey(cert, key).cert_pem, private_key_pem(key)


# --- A CA with its serving certificate -----------------------------------------------


@dataclass(frozen=True)
class KeyPairs:
    """A CA and the serving certificate it signed, all PEM."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def secret_data(self) -> dict[str, str]:
        files = {CA_CERT: self.ca_cert, CA_KEY: self.ca_key, TLS_CERT: self.cert, TLS_KEY: self.key}
        return {name: base64.b64encode(data).decode() for name, data in files.items()}

    @classmethod
    def from_secret_data(cls, data: dict[str, str] | None) -> KeyPairs | None:
        data = data or {}
        try:
            raw = {
                name: base64.b64decode(data[name]) for name in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
            }
        except (KeyError, ValueError):
            return None
        if not all(raw.values()):
            return None
        return cls(raw[CA_CERT], raw[CA_KEY], raw[TLS_CERT], raw[TLS_KEY])


def generate_key_pairs(
    *,
    ca_name: str,
    ca_organization: str,
    dns_names: Iterable[str],
    ip_addresses: Iterable[str] = (),
    now: datetime.datetime | None = None,
    ca_validity: datetime.timedelta = 10 * YEAR,
    cert_validity: datetime.timedelta = YEAR,
) -> KeyPairs:
    """A fresh RSA-2048 CA and a server-auth certificate for `dns_names` signed by it."""
    now = now or datetime.datetime.now(datetime.UTC)
    dns = list(dns_names)
    if not dns:
        raise ValueError("a serving certificate needs at least one DNS name")
    ca = make_ca(
        ca_name, organizations=(ca_organization,), key_kind="rsa", validity=ca_validity, now=now
    )
    leaf = issue_cert(
        ca,
        dns[0],
        dns_names=dns,
        ip_addresses=ip_addresses,
        server=True,
        key_kind="rsa",
        validity=cert_validity,
        now=now,
    )
    return KeyPairs(ca_cert=ca.cert_pem, ca_key=ca.key_pem, cert=leaf.cert_pem, key=leaf.key_pem)


def _same_public_key(cert: x509.Certificate, key_pem: bytes) -> bool:
    key = serialization.load_pem_private_key(key_pem, password=None)
    der = serialization.Encoding.DER
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    return bool(
        key.public_key().public_bytes(der, spki) == cert.public_key().public_bytes(der, spki)
    )


def check_key_pairs(
    pairs: KeyPairs,
    *,
    dns_names: Iterable[str],
    ip_addresses: Iterable[str] = (),
    now: datetime.datetime | None = None,
    lookahead: datetime.timedelta = datetime.timedelta(days=90),
) -> str | None:
    """Why `pairs` must be regenerated, or None when they are good past `now + lookahead`."""
    now = now or datetime.datetime.now(datetime.UTC)
    horizon = now + lookahead
    try:
        ca = x509.load_pem_x509_certificate(pairs.ca_cert)
        cert = x509.load_pem_x509_certificate(pairs.cert)
        if not _same_public_key(ca, pairs.ca_key):
            return "the CA key does not match the CA certificate"
        if not _same_public_key(cert, pairs.key):
            return "the serving key does not match the serving certificate"
        cert.verify_directly_issued_by(ca)
        constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound) as exc:
        return f"the certificates are invalid: {exc}"
    if not constraints.ca:
        return "the CA certificate is not a CA"
    for label, c in (("CA", ca), ("serving", cert)):
        if c.not_valid_before_utc > now:
            return f"the {label} certificate is not valid yet"
        if c.not_valid_after_utc < horizon:
            return f"the {label} certificate expires at {c.not_valid_after_utc.isoformat()}"
    have_dns = set(sans.get_values_for_type(x509.DNSName))
    missing = [d for d in dns_names if d not in have_dns]
    have_ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    missing += [ip for ip in ip_addresses if str(ipaddress.ip_address(ip)) not in have_ips]
    if missing:
        return f"the serving certificate lacks the names {', '.join(missing)}"
    return None
