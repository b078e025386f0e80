"""What a node's death does in a local cluster, without one: which control planes run
kube-controller-manager's node lifecycle controller and with which timings, the
playground controller's bounds on that time scale, and a simulated kubelet that goes
silent writing nothing (so that only the node lifecycle controller speaks for the
node) while one that reports NotReady still writes its status and taints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lws_localcluster.controlplane import (
    APISERVER,
    CONTROLLER_MANAGER,
    ControlPlane,
    Ports,
)
from lws_localcluster.manager_process import ManagerProcess
from lws_localcluster.node_lifecycle import (
    PLAYGROUND,
    PLAYGROUND_GROUP_REPLACEMENT,
    NodeLifecycle,
)
from lws_localcluster.nodesim.fleet import NodeFleet, SimNode
from lws_localcluster.nodesim.nodes import NodeSpec

from leaderworkerset.api.resources import LEASES, NODES
from tests.toolkit.fake_client import FakeApiClient


def args_of(cp: ControlPlane, component: str) -> list[str]:
    cp.ports = Ports(1, 2, 3, 4, 5)
    return cp.component_args(component)


def flag(args: list[str], name: str) -> str | None:
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")), None)


def test_a_control_plane_runs_no_node_lifecycle_unless_asked(tmp_path: Path) -> None:
    kcm = args_of(ControlPlane(tmp_path), CONTROLLER_MANAGER)
    controllers = flag(kcm, "controllers") or ""
    assert "-node-lifecycle-controller" in controllers.split(",")
    assert flag(kcm, "node-monitor-grace-period") is None
    apiserver = args_of(ControlPlane(tmp_path), APISERVER)
    assert flag(apiserver, "default-unreachable-toleration-seconds") is None


def test_the_playground_control_plane_runs_it_with_short_timings(tmp_path: Path) -> None:
    cp = ControlPlane(tmp_path, node_lifecycle=PLAYGROUND)
    kcm = args_of(cp, CONTROLLER_MANAGER)
    controllers = (flag(kcm, "controllers") or "").split(",")
    assert "*" in controllers and "-node-lifecycle-controller" not in controllers
    assert "-taint-eviction-controller" not in controllers
    assert flag(kcm, "node-monitor-grace-period") == "20s"
    assert flag(kcm, "node-monitor-period") == "2s"
    apiserver = args_of(cp, APISERVER)
    assert flag(apiserver, "default-not-ready-toleration-seconds") == "30"
    assert flag(apiserver, "default-unreachable-toleration-seconds") == "30"


def test_heartbeats_must_fit_the_grace_period_several_times() -> None:
    # Ten renewals per grace period in the playground; fewer than five is refused.
    assert PLAYGROUND.grace_period / PLAYGROUND.lease_interval >= 10
    with pytest.raises(ValueError, match="grace period of at least 25s"):
        NodeLifecycle(grace_period=20, lease_interval=5.0)


def test_the_playground_controller_bounds_replacements_on_that_time_scale(
    tmp_path: Path,
) -> None:
    controller = ManagerProcess("c", tmp_path, tmp_path / "kubeconfig")
    assert "groupReplacement" not in controller.configuration()
    controller.group_replacement = PLAYGROUND_GROUP_REPLACEMENT
    bounds = controller.configuration()["groupReplacement"]
    assert bounds == {"nodeNotReadyRelease": "15s", "terminationOverrunRelease": "30s"}
    # Pods are evicted after their toleration; the node bound has run out by then.
    assert int(bounds["nodeNotReadyRelease"].rstrip("s")) < PLAYGROUND.toleration_seconds


def fleet_with_node(condition_taints: bool) -> tuple[NodeFleet, FakeApiClient]:
    api = FakeApiClient()
    api.put(NODES, {"metadata": {"name": "n1", "resourceVersion": "1"}, "spec": {}})
    fleet = NodeFleet(api, "172.30.0.0/16", condition_taints=condition_taints)
    fleet.nodes["n1"] = SimNode(NodeSpec("n1"), "172.30.0.1", uid="u", ready_since="t0")
    return fleet, api


def written(api: FakeApiClient) -> list[tuple[str, str, dict[str, Any]]]:
    """(lease, status or node, name, body) of each PATCH, in order."""
    return [
        (
            "lease"
            if call.plural == LEASES.plural
            else str(call.options.get("subresource") or "node"),
            call.name,
            call.body,
        )
        for call in api.calls_of("patch")
    ]


async def test_a_silent_kubelet_writes_nothing() -> None:
    fleet, api = fleet_with_node(condition_taints=True)
    await fleet.set_ready("n1", False, None)
    assert api.writes() == []
    node = fleet.nodes["n1"]
    assert not node.ready and node.ready_since != "t0"


async def test_a_kubelet_reporting_not_ready_writes_status_and_taints_unless_told() -> None:
    fleet, api = fleet_with_node(condition_taints=True)
    await fleet.set_ready("n1", False, "False")
    kinds = [kind for kind, _, _ in written(api)]
    assert kinds == ["status", "node"]
    taints = written(api)[1][2]["spec"]["taints"]
    assert {(t["key"], t["effect"]) for t in taints} == {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    }

    # Where the node lifecycle controller runs, the taints are its alone.
    fleet, api = fleet_with_node(condition_taints=False)
    await fleet.set_ready("n1", False, "False")
    await fleet.set_ready("n1", True)
    assert [kind for kind, _, _ in written(api)] == ["status", "status", "lease"]
    ready = written(api)[1][2]["status"]["conditions"][-1]
    assert (ready["type"], ready["status"]) == ("Ready", "True")
