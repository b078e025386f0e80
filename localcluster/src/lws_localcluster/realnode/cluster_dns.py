"""Cluster DNS for the real node: CoreDNS runs on this machine, beside the kubelet, and
pods reach it the usual way, at the ``kube-dns`` Service's ClusterIP, which kube-proxy
forwards to the address CoreDNS listens on (an EndpointSlice without a selector, as
for any service that runs outside the cluster).
"""

from __future__ import annotations

from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import SERVICES, Resource
from leaderworkerset.runtime.client import ApiClient
from lws_localcluster.realnode import layout as n
from lws_localcluster.realnode.credentials import COREDNS_USER

CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterrolebindings",
    "ClusterRoleBinding",
    namespaced=False,
)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
FIELD_MANAGER = "lws-dev-realnode"
SERVICE = "kube-dns"
NAMESPACE = "kube-system"
ROLE = "lws-dev:coredns"

_PORTS = (("dns", "UDP"), ("dns-tcp", "TCP"))


def dns_objects() -> list[tuple[Resource, JSON]]:
    """What CoreDNS needs in the cluster: read rights, the Service and its endpoint."""
    role, binding = _read_rights()
    service, endpoints = _service()
    return [
        (CLUSTER_ROLES, role),
        (CLUSTER_ROLE_BINDINGS, binding),
        (SERVICES, service),
        (ENDPOINT_SLICES, endpoints),
    ]


def _read_rights() -> tuple[JSON, JSON]:
    role: JSON = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": ROLE},
        # What CoreDNS's kubernetes plugin watches.
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding: JSON = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": COREDNS_USER}
        ],
    }
    return role, binding


def _service() -> tuple[JSON, JSON]:
    service: JSON = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": SERVICE,
            "namespace": NAMESPACE,
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"},
        },
        "spec": {
            "clusterIP": n.CLUSTER_DNS_IP,
            "ports": [
                {"name": name, "port": 53, "protocol": protocol, "targetPort": 53}
                for name, protocol in _PORTS
            ],
        },
    }
    endpoints: JSON = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{SERVICE}-{n.NODE_NAME}",
            "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": SERVICE,
                "endpointslice.kubernetes.io/managed-by": FIELD_MANAGER,
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [n.HOST_IP], "conditions": {"ready": True}}],
        "ports": [{"name": name, "port": 53, "protocol": protocol} for name, protocol in _PORTS],
    }
    return service, endpoints


async def install_cluster_dns(api: ApiClient) -> None:
    for resource, obj in dns_objects():
        await api.apply(resource, obj, field_manager=FIELD_MANAGER)
