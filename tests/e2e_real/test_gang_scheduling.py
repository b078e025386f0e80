"""Gang scheduling by Kubernetes' Workload API on the real node: our chart installed with
the kubernetes provider and the WorkloadAwareScheduling gate, and one LeaderWorkerSet
with `spec.scheduling: {}` (one group of three pause containers) comes up Ready, each of
its pods in a PodGroup that kube-scheduler placed as a whole (docs/gang-scheduling.md).

The real node's control plane is the same ControlPlane as every local cluster, so the
API is on by the same flags; the test checks it on the running components (their
`kubernetes_feature_enabled` metric and the API server's discovery), not on the flags.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import yaml
from lws_localcluster.controlplane import APISERVER, CONTROLLER_MANAGER, SCHEDULER
from lws_localcluster.controlplane.flags import WORKLOAD_API_FEATURE_GATES
from lws_localcluster.realnode.layout import NODE_NAME

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import LEADERWORKERSETS, POD_GROUPS, PODS, WORKLOADS, Resource
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.realnode import NAMESPACE, RELEASE, RealCluster, chart_values
from tests.toolkit.cluster import condition, wait_ready
from tests.toolkit.installs import (
    Steps,
    controller_pods_ready,
    create_once_admitted,
    import_images,
    no_lws_pods_left,
    remove_any_controller,
)
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.paths import REPO
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

NAME = "gang"
SIZE = 3
# The chart's values that make the controller serve spec.scheduling (charts/lws/values.yaml).
GANG_VALUES: dict[str, object] = {
    "gangSchedulingManagement": {"schedulerProvider": s.PROVIDER_KUBERNETES},
    "featureGates": {"WorkloadAwareScheduling": True},
}
PLACED = "PodGroupInitiallyScheduled"
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")


@pytest.fixture(scope="module")
async def cluster_api(real_cluster: RealCluster) -> AsyncIterator[ApiClient]:
    api = ApiClient.from_kubeconfig(real_cluster.kubeconfig)
    try:
        print(f"removed: {remove_any_controller(real_cluster.tools) or 'nothing'}")
        await no_lws_pods_left(api)
        yield api
        remove_any_controller(real_cluster.tools)
    finally:
        await api.close()


def feature_enabled(metrics: str, gate: str) -> bool:
    """Whether a component's /metrics says `gate` is on (kubernetes_feature_enabled)."""
    for line in metrics.splitlines():
        if line.startswith("kubernetes_feature_enabled{") and f'name="{gate}"' in line:
            return line.rsplit(" ", 1)[-1] in ("1", "1.0")
    return False


async def workload_api_served(real_cluster: RealCluster, api: ApiClient) -> None:
    """The Workload API is on in every component of the real node's control plane."""
    discovery = await api.request("GET", f"/apis/{WORKLOADS.group}/{WORKLOADS.version}")
    served = {r["name"] for r in discovery["resources"]}
    assert {WORKLOADS.plural, POD_GROUPS.plural} <= served, served
    cp = real_cluster.control_plane
    texts = {
        APISERVER: cp.api_get("/metrics", timeout=30).decode(),
        SCHEDULER: cp.component_metrics(SCHEDULER) or "",
        CONTROLLER_MANAGER: cp.component_metrics(CONTROLLER_MANAGER) or "",
    }
    for component, text in texts.items():
        for gate in WORKLOAD_API_FEATURE_GATES:
            assert feature_enabled(text, gate), f"{component}: {gate} is off"


def gang_lws(image: str) -> JSON:
    container = {
        "name": "pause",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
    }
    return leaderworkerset(NAME, replicas=1, size=SIZE, container=container, scheduling={})


async def helm_install_with_gangs(real_cluster: RealCluster, api: ApiClient) -> None:
    """Our chart with the gang values on top of the suite's (image, two replicas, small
    requests); the Configuration the chart renders must carry them."""
    image = real_cluster.images["controller"]
    values = yaml.safe_dump({**chart_values(image), **GANG_VALUES})
    real_cluster.tools.run(
        "helm", "install", RELEASE, REPO / "charts" / "lws", "--namespace", NAMESPACE,
        "--create-namespace", "--values", "-", "--wait", "--timeout", "4m",
        stdin=values, timeout=300,
    )  # fmt: skip
    await controller_pods_ready(api, 2, image.ref)
    maps = await api.list(CONFIG_MAPS, NAMESPACE)
    configs = [
        yaml.safe_load(text)
        for m in maps["items"]
        for text in (m.get("data") or {}).values()
        if "gangSchedulingManagement" in text
    ]
    assert configs, "no manager Configuration with gangSchedulingManagement"
    assert configs[0]["gangSchedulingManagement"] == GANG_VALUES["gangSchedulingManagement"]
    assert configs[0]["featureGates"] == GANG_VALUES["featureGates"]


async def gangs_placed(api: ApiClient) -> dict[str, str]:
    """Pod name -> its PodGroup, once every pod of the set names one that exists and
    that the scheduler placed (PodGroupInitiallyScheduled True)."""
    pods = (await api.list(PODS, "default", label_selector=f"{c.LABEL_SET_NAME}={NAME}"))["items"]
    if len(pods) != SIZE:
        return {}
    groups = {
        g["metadata"]["name"]: g
        for g in (await api.list(POD_GROUPS, "default"))["items"]
        if condition(g, PLACED) == "True"
    }
    named = {
        p["metadata"]["name"]: ((p["spec"].get("schedulingGroup") or {}).get("podGroupName") or "")
        for p in pods
    }
    return named if all(name in groups for name in named.values()) else {}


async def test_a_gang_scheduled_group_comes_up_ready_on_the_real_node(
    cluster_api: ApiClient, real_cluster: RealCluster
) -> None:
    steps = Steps("gang scheduling")
    api = cluster_api
    with steps.step("the Workload API served by the real node's control plane"):
        await workload_api_served(real_cluster, api)
    with steps.step("helm install with gangSchedulingManagement and WorkloadAwareScheduling"):
        await helm_install_with_gangs(real_cluster, api)
    pause = import_images(real_cluster, "pause")["pause"]

    with steps.step(f"an LWS with spec.scheduling (1 group of {SIZE}) Ready"):
        await create_once_admitted(api, gang_lws(pause.ref), "default")
        lws = await wait_ready(api, "default", NAME, 1, within=180)
    assert condition(lws, s.CONDITION_WORKLOAD_SCHEDULING_READY) == "True", lws.get("status")
    with steps.step("each pod in a PodGroup the scheduler placed"):
        named = await eventually(lambda: gangs_placed(api), "every pod's gang placed", within=60)
    (group,) = set(named.values())
    stored = await api.get(POD_GROUPS, group, "default")
    assert stored["spec"]["schedulingPolicy"] == {"gang": {"minCount": SIZE}}
    workload = await api.get(WORKLOADS, NAME, "default")
    assert stored["spec"]["workloadRef"]["workloadName"] == workload["metadata"]["name"]
    for pod in (await api.list(PODS, "default", label_selector=f"{c.LABEL_SET_NAME}={NAME}"))[
        "items"
    ]:
        assert pod["spec"]["nodeName"] == NODE_NAME
        assert condition(pod, "Ready") == "True"

    with steps.step("LWS deleted, its pods and PodGroup gone"):
        await api.delete(LEADERWORKERSETS, NAME, namespace="default")
        await no_lws_pods_left(api)
        await eventually(lambda: _gone(api, group), f"PodGroup {group} deleted", within=120)
    print(steps.summary())


async def _gone(api: ApiClient, pod_group: str) -> bool:
    return await api.get_or_none(POD_GROUPS, pod_group, "default") is None
