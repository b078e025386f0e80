"""The real node's configuration files carry the settings this machine needs (each one
a failure without it, see docs/real-node.md), pointing at the node's own paths."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml
from lws_localcluster.realnode import configs
from lws_localcluster.realnode import layout as n

PATHS = n.NodePaths(Path("/work/cluster"), Path("/cache/containerd"))


def test_containerd_runs_runc_without_lowering_oom_scores_and_the_local_sandbox() -> None:
    config = tomllib.loads(configs.containerd_toml(PATHS, "localhost/lws-dev/pause:3.10.2"))
    assert config["root"] == "/cache/containerd"
    assert config["grpc"]["address"] == str(n.CONTAINERD_SOCKET)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "localhost/lws-dev/pause:3.10.2"
    assert cri["netns_mounts_under_state_dir"] is True
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"BinaryName": "runc", "SystemdCgroup": False}
    assert cri["cni"]["conf_dir"] == "/work/cluster/realnode/cni"


def test_registries_are_described_per_host_and_a_local_one_is_plain_http() -> None:
    config = tomllib.loads(configs.containerd_toml(PATHS, "localhost/lws-dev/pause:3.10.2"))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["registry"] == {"config_path": "/work/cluster/realnode/certs.d"}
    hosts = tomllib.loads(configs.insecure_registry_hosts("127.0.0.1:5000"))
    assert hosts == {
        "server": "http://127.0.0.1:5000",
        "host": {"http://127.0.0.1:5000": {"capabilities": ["pull", "resolve"]}},
    }
    with pytest.raises(ValueError):
        configs.insecure_registry_hosts('evil"]\n[host')


def test_the_pod_network_is_the_bridge_with_the_host_address_as_gateway() -> None:
    conflist = json.loads(configs.cni_conflist(PATHS))
    bridge = conflist["plugins"][0]
    assert (bridge["type"], bridge["bridge"], bridge["isGateway"]) == ("bridge", n.BRIDGE, True)
    (subnet,) = bridge["ipam"]["ranges"][0]
    assert subnet == {"subnet": n.POD_CIDR, "gateway": n.HOST_IP}
    assert bridge["ipam"]["dataDir"] == "/work/cluster/realnode/ipam"


def test_the_kubelet_accepts_hybrid_cgroups_and_serves_the_node_address() -> None:
    config = yaml.safe_load(
        configs.kubelet_config(PATHS, client_ca=Path("/pki/ca.crt"), lease_seconds=8)
    )
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["enforceNodeAllocatable"] == []
    assert config["containerRuntimeEndpoint"] == f"unix://{n.CONTAINERD_SOCKET}"
    assert config["clusterDNS"] == [n.CLUSTER_DNS_IP]
    assert config["address"] == n.HOST_IP
    assert config["nodeLeaseDurationSeconds"] == 8
    assert config["authentication"]["x509"]["clientCAFile"] == "/pki/ca.crt"
    assert config["authentication"]["anonymous"]["enabled"] is False


def test_kube_proxy_leaves_the_machine_sysctls_alone() -> None:
    config = yaml.safe_load(configs.kube_proxy_config(Path("/pki/kube-proxy.kubeconfig")))
    assert config["mode"] == "iptables"
    assert config["clusterCIDR"] == n.POD_CIDR
    assert config["conntrack"]["maxPerCore"] == 0
    assert config["iptables"]["localhostNodePorts"] is False


def test_coredns_listens_on_the_host_address_and_serves_the_cluster_domain() -> None:
    corefile = configs.corefile(Path("/pki/coredns.kubeconfig"))
    assert f"bind {n.HOST_IP}" in corefile
    assert f"kubernetes {n.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{" in corefile
    assert "kubeconfig /pki/coredns.kubeconfig lws" in corefile
