"""The control plane's command lines, built without starting anything: each component
gets its own ports and files, and extra arguments come last so that they override."""

from __future__ import annotations

from pathlib import Path

import pytest
from lws_localcluster.controlplane import (
    APISERVER,
    COMPONENTS,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    Ports,
)
from lws_localcluster.controlplane.flags import apiserver_address_args, component_args
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
