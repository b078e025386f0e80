"""Certificates and keys for the local control plane and for test webhooks."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# ECDSA keys are used for certificates because generating a handful of RSA
# keys would dominate cluster start-up time on a small machine.
_CURVE = ec.SECP256R1()
_CLOCK_SKEW = datetime.timedelta(minutes=5)

# The in-cluster names the API server answers to; 10.0.0.1 is the first IP of
# --service-cluster-ip-range, which the `kubernetes` Service gets.
APISERVER_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
APISERVER_IPS = ("127.0.0.1", "10.0.0.1")


@dataclass(frozen=True)
class CertKey:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (0600) and return their paths."""
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        crt.write_bytes(self.cert_pem)
        _write_private(key, self.key_pem)
        return crt, key


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - _CLOCK_SKEW, now + datetime.timedelta(days=days)


def make_ca(common_name: str, *, days: int = 3650) -> CertKey:
    key = ec.generate_private_key(_CURVE)
    name = _name(common_name)
    not_before, not_after = _validity(days)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKey(cert, key)


def issue_cert(
    ca: CertKey,
    common_name: str,
    *,
    organizations: Iterable[str] = (),
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str] = (),
    server: bool = False,
    client: bool = False,
    days: int = 365,
) -> CertKey:
    """Issue a leaf certificate signed by ``ca``.

    For client certificates the API server takes the user from the CN and the
    groups from the O attributes.
    """
    if not (server or client):
        raise ValueError("a certificate must be for server or client use")
    key = ec.generate_private_key(_CURVE)
    not_before, not_after = _validity(days)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return CertKey(builder.sign(ca.key, hashes.SHA256()), key)


def write_rsa_key_pair(private_path: Path, public_path: Path, *, bits: int = 2048) -> None:
    """Write the service-account signing key pair (RSA, as every consumer accepts it)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    _write_private(
        private_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


@dataclass(frozen=True)
class ControlPlanePKI:
    """Paths of every credential the control-plane components are given."""

    directory: Path

    @property
    def ca_crt(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    def crt(self, stem: str) -> Path:
        return self.directory / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.directory / f"{stem}.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"


# Client identities: the CNs and groups are the ones the API server's RBAC
# bootstrap policy grants to each component.
CLIENTS = {
    "admin": ("lws-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
}


def create_control_plane_pki(directory: Path) -> ControlPlanePKI:
    """Create a fresh CA, serving and client certificates, and the SA key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca("lws-local-ca")
    ca.write(directory, "ca")
    issue_cert(
        ca,
        "kube-apiserver",
        dns_names=APISERVER_DNS_NAMES,
        ip_addresses=APISERVER_IPS,
        server=True,
    ).write(directory, "apiserver")
    for stem, (cn, groups) in CLIENTS.items():
        issue_cert(ca, cn, organizations=groups, client=True).write(directory, stem)
    # The aggregation layer authenticates to extension API servers with a
    # certificate from a separate CA, which they trust for request headers.
    front_proxy_ca = make_ca("lws-front-proxy-ca")
    front_proxy_ca.write(directory, "front-proxy-ca")
    issue_cert(front_proxy_ca, "front-proxy-client", client=True).write(
        directory, "front-proxy-client"
    )
    pki = ControlPlanePKI(directory)
    write_rsa_key_pair(pki.sa_key, pki.sa_pub)
    return pki
