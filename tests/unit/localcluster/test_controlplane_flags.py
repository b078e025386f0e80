"""The control plane's command lines, built without starting anything: each component
gets its own ports and files, every component but etcd runs with the Workload API
unless asked not to, the scheduler reads a configuration file only for a shorter
back-off, and extra arguments come last so that they override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lws_localcluster.binaries import parse_kubernetes_version
from lws_localcluster.controlplane import (
    APISERVER,
    COMPONENTS,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    ControlPlane,
    Ports,
)
from lws_localcluster.controlplane.flags import (
    AUDIT_POLICY,
    SCHEDULER_CONFIG,
    apiserver_address_args,
    audit_policy,
    component_args,
    scheduler_config,
)
from lws_localcluster.controlplane.pki import ControlPlanePKI

PORTS = Ports(etcd_client=1, etcd_peer=2, apiserver=3, controller_manager=4, scheduler=5)


def args(component: str, tmp_path: Path, **kwargs: object) -> list[str]:
    pki = ControlPlanePKI(tmp_path / "pki")
    return component_args(component, PORTS, tmp_path, pki, **kwargs)  # type: ignore[arg-type]


def test_each_component_listens_on_its_own_port(tmp_path: Path) -> None:
    assert "--listen-client-urls=http://127.0.0.1:1" in args(ETCD, tmp_path)
    assert "--initial-cluster=lws=http://127.0.0.1:2" in args(ETCD, tmp_path)
    apiserver = args(APISERVER, tmp_path)
    assert "--secure-port=3" in apiserver
    assert "--etcd-servers=http://127.0.0.1:1" in apiserver
    assert "--secure-port=4" in args(CONTROLLER_MANAGER, tmp_path)
    assert "--secure-port=5" in args(SCHEDULER, tmp_path)
    assert f"--kubeconfig={tmp_path / 'scheduler.kubeconfig'}" in args(SCHEDULER, tmp_path)


def test_extra_arguments_come_last(tmp_path: Path) -> None:
    extra = {component: [f"--v=4-{component}"] for component in COMPONENTS}
    for component in COMPONENTS:
        assert args(component, tmp_path, extra_args=extra)[-1] == f"--v=4-{component}"


def test_the_api_server_binds_loopback_unless_given_a_host_address() -> None:
    assert "--endpoint-reconciler-type=none" in apiserver_address_args(None)
    assert apiserver_address_args("10.1.2.3") == [
        "--bind-address=10.1.2.3",
        "--advertise-address=10.1.2.3",
    ]


def test_an_unknown_component_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kubelet"):
        args("kubelet", tmp_path)


GATES = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"


def test_every_component_but_etcd_runs_with_the_workload_api_gates(tmp_path: Path) -> None:
    apiserver = args(APISERVER, tmp_path)
    assert GATES in apiserver
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in apiserver
    for component in (CONTROLLER_MANAGER, SCHEDULER):
        component_flags = args(component, tmp_path)
        assert GATES in component_flags
        assert not any(a.startswith("--runtime-config") for a in component_flags)
    assert not any(a.startswith("--feature-gates") for a in args(ETCD, tmp_path))


def test_a_cluster_without_the_workload_api_sets_no_gate(tmp_path: Path) -> None:
    for component in COMPONENTS:
        flags = args(component, tmp_path, workload_api=False)
        assert not any(a.startswith(("--feature-gates", "--runtime-config")) for a in flags)


def test_extra_gates_come_after_the_workload_api_gates(tmp_path: Path) -> None:
    # kube components merge repeated --feature-gates flags, a later value of a gate
    # winning: extra gates add to the Workload API's or turn one of them off.
    extra = {SCHEDULER: ["--feature-gates=GenericWorkload=false"]}
    scheduler = args(SCHEDULER, tmp_path, extra_args=extra)
    assert scheduler.index(GATES) < scheduler.index("--feature-gates=GenericWorkload=false")


def test_a_control_plane_has_the_workload_api_unless_asked_not_to(tmp_path: Path) -> None:
    on, off = ControlPlane(tmp_path), ControlPlane(tmp_path, workload_api=False)
    for cp in (on, off):
        cp.ports = PORTS
    assert GATES in on.component_args(SCHEDULER)
    assert GATES not in off.component_args(SCHEDULER)
    assert GATES not in off.component_args(APISERVER)


def test_the_scheduler_reads_a_configuration_file_only_for_a_shorter_back_off(
    tmp_path: Path,
) -> None:
    assert not any(a.startswith("--config") for a in args(SCHEDULER, tmp_path))
    scheduler = args(SCHEDULER, tmp_path, pod_max_backoff=1)
    assert f"--config={tmp_path / SCHEDULER_CONFIG}" in scheduler
    assert "--leader-elect=false" in scheduler
    # The file, not --kubeconfig (ignored beside --config), says how to reach the API.
    config = json.loads(scheduler_config(tmp_path, pod_max_backoff=1))
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "scheduler.kubeconfig")
    assert (config["podInitialBackoffSeconds"], config["podMaxBackoffSeconds"]) == (1, 1)
    with pytest.raises(ValueError, match="at least 1s"):
        scheduler_config(tmp_path, pod_max_backoff=0)


def test_a_control_plane_writes_the_scheduler_configuration_it_is_started_with(
    tmp_path: Path,
) -> None:
    cp = ControlPlane(tmp_path, pod_max_backoff=2)
    cp.ports = PORTS
    assert f"--config={cp.workdir / SCHEDULER_CONFIG}" in cp.component_args(SCHEDULER)
    assert not any(a.startswith("--config") for a in cp.component_args(APISERVER))


def test_the_audit_log_is_kept_only_when_asked_for_and_only_for_the_named_users(
    tmp_path: Path,
) -> None:
    plain, audited = ControlPlane(tmp_path), ControlPlane(tmp_path, audit_users=["u1", "u2"])
    for cp in (plain, audited):
        cp.ports = PORTS
    assert not [a for a in plain.component_args(APISERVER) if a.startswith("--audit")]
    assert plain.audit_log is None
    apiserver = audited.component_args(APISERVER)
    assert f"--audit-policy-file={tmp_path.resolve() / AUDIT_POLICY}" in apiserver
    assert f"--audit-log-path={audited.audit_log}" in apiserver
    assert "--audit-log-format=json" in apiserver
    for other in (CONTROLLER_MANAGER, SCHEDULER, ETCD):
        assert not [a for a in audited.component_args(other) if a.startswith("--audit")]
    policy = json.loads(audit_policy(["u1", "u2"]))
    assert policy["rules"] == [{"level": "Metadata", "users": ["u1", "u2"]}, {"level": "None"}]


@pytest.mark.parametrize("version", [(1, 34, 4), (1, 35, 4), (1, 36, 3)])
def test_a_release_before_the_workload_api_gets_none_of_its_flags(
    tmp_path: Path, version: tuple[int, int, int]
) -> None:
    # Those releases refuse to start on a gate or group version they do not know.
    for component in COMPONENTS:
        flags = args(component, tmp_path, version=version)
        assert not any(a.startswith(("--feature-gates", "--runtime-config")) for a in flags)
    cp = ControlPlane(tmp_path)
    cp.ports, cp.version = PORTS, version
    assert cp.workload_api and not cp.serves_workload_api
    assert GATES not in cp.component_args(APISERVER)


@pytest.mark.parametrize("version", [(1, 37, 2), (1, 38, 0), None])
def test_the_workload_api_release_and_later_get_its_flags(
    tmp_path: Path, version: tuple[int, int, int] | None
) -> None:
    # None: a build that does not say its version is taken to be hack/'s default.
    assert GATES in args(APISERVER, tmp_path, version=version)
    assert ControlPlane(tmp_path).serves_workload_api


def test_the_release_is_read_as_version_prints_it() -> None:
    assert parse_kubernetes_version("Kubernetes v1.34.4\n") == (1, 34, 4)
    assert parse_kubernetes_version("Kubernetes v1.37.2-dirty") == (1, 37, 2)
    assert parse_kubernetes_version("Kubernetes v0.0.0-master+$Format:%H$") == (0, 0, 0)
    assert parse_kubernetes_version("unknown") is None
