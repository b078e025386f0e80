"""The real node's identities, issued by the control plane's CA.

The names are the ones the API server's authorizers expect: the Node authorizer
admits ``system:node:<name>`` in ``system:nodes`` to its own node's objects only, the
bootstrap RBAC policy binds ``system:node-proxier`` to ``system:kube-proxy``, and
CoreDNS gets a ClusterRole of its own (``cluster_dns``).
"""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from leaderworkerset.runtime.pki import CertKey, PrivateKey, issue_cert
from lws_localcluster.controlplane.pki import ControlPlanePKI, kubeconfig_text
from lws_localcluster.realnode import layout as n

KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
COREDNS = "coredns"
COREDNS_USER = "system:lws-dev:coredns"

CLIENTS = {
    KUBELET: (f"system:node:{n.NODE_NAME}", ("system:nodes",)),
    KUBE_PROXY: ("system:kube-proxy", ()),
    COREDNS: (COREDNS_USER, ()),
}


def _load_ca(pki: ControlPlanePKI) -> CertKey:
    cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert not isinstance(key, (bytes, type(None)))
    loaded: PrivateKey = key  # type: ignore[assignment]
    return CertKey(cert, loaded)


def kubeconfig_path(directory: Path, component: str) -> Path:
    return directory / f"{component}.kubeconfig"


def write_node_credentials(control_plane: ControlPlanePKI, directory: Path, server: str) -> None:
    """A kubeconfig per node component, and the kubelet's serving certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _load_ca(control_plane)
    ca_pem = control_plane.ca_crt.read_bytes()
    for component, (user, groups) in CLIENTS.items():
        pair = issue_cert(ca, user, organizations=groups, client=True)
        path = kubeconfig_path(directory, component)
        path.touch(mode=0o600, exist_ok=True)
        path.write_text(kubeconfig_text(server, ca_pem, pair.cert_pem, pair.key_pem, user))
    # The API server reaches the kubelet at the node's InternalIP (logs, exec).
    serving = issue_cert(
        ca, n.NODE_NAME, dns_names=(n.NODE_NAME,), ip_addresses=(n.HOST_IP,), server=True
    )
    serving.write(directory, "kubelet-serving")
