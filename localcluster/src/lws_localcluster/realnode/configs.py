"""The configuration files of the real node's components, rendered from its layout.

Each setting that differs from a component's default is one this machine needs, and
the comment beside it says what failed without it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from lws_localcluster.realnode import layout as n
from lws_localcluster.realnode.layout import NodePaths


def containerd_toml(paths: NodePaths, sandbox_image: str) -> str:
    # TOML written by hand: only strings, booleans and tables, and no TOML writer is a
    # dependency of this package.
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join(
        [
            "version = 2",
            f'root = "{paths.containerd_root}"',
            f'state = "{paths.containerd_state}"',
            # The snapshotters that need kernel modules or tools this machine lacks only
            # log errors at every start.
            "disabled_plugins = ["
            + ", ".join(
                f'"io.containerd.snapshotter.v1.{s}"' for s in ("aufs", "btrfs", "devmapper", "zfs")
            )
            + "]",
            "[grpc]",
            f'  address = "{n.CONTAINERD_SOCKET}"',
            "[ttrpc]",
            f'  address = "{n.RUN_DIR / "containerd.sock.ttrpc"}"',
            f"[{cri}]",
            # No registry is reachable: the pause image is built here and imported.
            f'  sandbox_image = "{sandbox_image}"',
            # This machine lets no process lower its oom_score_adj: without this every
            # sandbox fails ("write to /proc/self/oom_score_adj: Permission denied").
            "  restrict_oom_score_adj = true",
            # Under the state dir, so that a later start can find a killed run's ones.
            "  netns_mounts_under_state_dir = true",
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            # runc, not crun: crun refuses this kernel's hybrid cgroup v1/v2 layout.
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            '  BinaryName = "runc"',
            "  SystemdCgroup = false",
            f"[{cri}.cni]",
            '  bin_dir = "/usr/lib/cni"',
            f'  conf_dir = "{paths.cni_conf_dir}"',
            # Registries the node pulls from are described there (insecure_registry).
            f"[{cri}.registry]",
            f'  config_path = "{paths.registry_hosts}"',
            "",
        ]
    )


def insecure_registry_hosts(host: str) -> str:
    """hosts.toml for a registry served over plain HTTP at `host` (HOST:PORT), such as
    one on this machine's loopback: containerd would otherwise speak HTTPS to it."""
    if not re.fullmatch(r"[A-Za-z0-9.-]+(:\d+)?", host):
        raise ValueError(f"not a registry host[:port]: {host!r}")
    return "\n".join(
        [
            f'server = "http://{host}"',
            f'[host."http://{host}"]',
            '  capabilities = ["pull", "resolve"]',
            "",
        ]
    )


def cni_conflist(paths: NodePaths) -> str:
    config: dict[str, Any] = {
        "cniVersion": "1.0.0",
        "name": n.CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": n.BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                # A pod reaching itself through a Service comes back over its own port.
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": n.POD_CIDR, "gateway": n.HOST_IP}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    # Inside the cluster's work dir, so that no lease outlives it.
                    "dataDir": str(paths.ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(config, indent=2) + "\n"


def kubelet_config(paths: NodePaths, *, client_ca: Path, lease_seconds: int) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": n.HOST_IP,
        "port": n.KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": n.KUBELET_HEALTHZ_PORT,
        "tlsCertFile": str(paths.pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(paths.pki / "kubelet-serving.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{n.CONTAINERD_SOCKET}",
        "clusterDNS": [n.CLUSTER_DNS_IP],
        "clusterDomain": n.CLUSTER_DOMAIN,
        # The kernel mounts cgroup v1 and v2 side by side ("hybrid"), which the kubelet
        # refuses unless told otherwise.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        # The kubelet cannot reserve cgroups for the system here; pods still get theirs.
        "enforceNodeAllocatable": [],
        # The node shares the machine with the control plane: only a nearly full disk
        # or memory should make it evict, and imported images have no registry to come
        # back from, so they are never collected.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        # The release pushed to the test registry and the image imported for other tests
        # are the same bytes (one image ID) under two names. Once the kubelet has pulled
        # one, its pull record (KEP-2535, on by default) lists only that name, so a pod
        # naming the other must pull again to prove its credentials, from a docker.io
        # this machine cannot reach. A single-tenant test node has no credentials to
        # guard.
        "imagePullCredentialsVerificationPolicy": "NeverVerify",
        # The lease is renewed at a quarter of its duration: this keeps the renewals
        # as frequent as the node lifecycle controller's grace period needs.
        "nodeLeaseDurationSeconds": lease_seconds,
        "rotateCertificates": False,
        "shutdownGracePeriod": "0s",
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(kubeconfig: Path) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": n.NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": n.POD_CIDR,
        "healthzBindAddress": f"127.0.0.1:{n.KUBE_PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{n.KUBE_PROXY_METRICS_PORT}",
        # Zero leaves the machine's conntrack sysctls alone, which a VM may not allow.
        "conntrack": {"maxPerCore": 0, "min": 0},
        # NodePorts on 127.0.0.1 would need route_localnet on every interface.
        "iptables": {"localhostNodePorts": False},
    }
    return yaml.safe_dump(config, sort_keys=False)


def corefile(kubeconfig: Path) -> str:
    zone = f"{n.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa"
    return "\n".join(
        [
            ".:53 {",
            f"    bind {n.HOST_IP}",
            "    errors",
            f"    health 127.0.0.1:{n.COREDNS_HEALTH_PORT}",
            f"    ready 127.0.0.1:{n.COREDNS_READY_PORT}",
            f"    kubernetes {zone} {{",
            f"        kubeconfig {kubeconfig} lws",
            "        pods insecure",
            "        fallthrough in-addr.arpa ip6.arpa",
            # Short: a replaced leader's new address should resolve within seconds.
            "        ttl 5",
            "    }",
            "    forward . /etc/resolv.conf",
            "    cache 5",
            "    loadbalance",
            "}",
            "",
        ]
    )
