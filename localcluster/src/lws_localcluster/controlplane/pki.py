"""The local control plane's credentials: a CA, the API server's serving certificate,
the components' client certificates, the front-proxy pair and the service-account
signing key, and the kubeconfigs that carry the client certificates. Only `lws dev` and
the tests run a control plane; the manager never does, so none of this is in `runtime`."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization

from leaderworkerset.runtime.pki import (
    issue_cert,
    make_ca,
    new_private_key,
    private_key_pem,
    write_private,
)


def write_rsa_key_pair(private_path: Path, public_path: Path) -> None:
    """Write the service-account signing key pair (RSA, as every consumer accepts it)."""
    key = new_private_key("rsa")
    write_private(private_path, private_key_pem(key))
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


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
class ControlPlanePKI:
    """Paths of every credential the control-plane components are given."""

    directory: Path

    @property
    def ca_crt(self) -> Path:
        return self.crt("ca")

    @property
    def ca_key(self) -> Path:
        return self.key("ca")

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


APISERVER_KUBELET_CLIENT = "apiserver-kubelet-client"

# Client identities: the CNs and groups are the ones the API server's RBAC
# bootstrap policy grants to each component.
CLIENTS = {
    "admin": ("lws-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    # The API server's identity towards kubelets (logs, exec, port-forward): the
    # bootstrap policy grants the nodes/proxy rights it needs to system:masters only.
    APISERVER_KUBELET_CLIENT: ("kube-apiserver-kubelet-client", ("system:masters",)),
}


def create_control_plane_pki(directory: Path, *, host_ip: str | None = None) -> ControlPlanePKI:
    """Create a fresh CA, serving and client certificates, and the SA key pair.

    ``host_ip``: an address of this machine that pods reach the API server at (the
    real node's), which its serving certificate must then name too.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca("lws-local-ca")
    ca.write(directory, "ca")
    issue_cert(
        ca,
        "kube-apiserver",
        dns_names=APISERVER_DNS_NAMES,
        ip_addresses=(*APISERVER_IPS, *([host_ip] if host_ip else [])),
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


def kubeconfig_text(server: str, ca: bytes, cert: bytes, key: bytes, user: str) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "lws",
                    "cluster": {"server": server, "certificate-authority-data": b64(ca)},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
                }
            ],
            "contexts": [{"name": "lws", "context": {"cluster": "lws", "user": user}}],
            "current-context": "lws",
        },
        sort_keys=False,
    )


def write_kubeconfigs(pki: ControlPlanePKI, server: str, workdir: Path) -> None:
    """``<workdir>/kubeconfig`` for the admin, ``<workdir>/<client>.kubeconfig`` for each
    component, all owner-only: they hold private keys."""
    ca = pki.ca_crt.read_bytes()
    for stem, (user, _groups) in CLIENTS.items():
        if stem == APISERVER_KUBELET_CLIENT:
            continue  # the API server's own identity towards kubelets, not a user's
        text = kubeconfig_text(
            server, ca, pki.crt(stem).read_bytes(), pki.key(stem).read_bytes(), user
        )
        path = workdir / ("kubeconfig" if stem == "admin" else f"{stem}.kubeconfig")
        path.touch(mode=0o600, exist_ok=True)
        path.write_text(text)
