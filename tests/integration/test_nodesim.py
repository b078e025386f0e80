"""The node simulator against the real control plane: pod lifecycle, termination
timing and the faults tests inject."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from lws_localcluster.nodesim.api import JsonObj, list_all
from lws_localcluster.nodesim.cache import PodCache, PodKey
from lws_localcluster.nodesim.pods import (
    PodRuntime,
    desired_status,
    ensure_containers,
    status_patch,
)
from lws_localcluster.nodesim.simulator import (
    TERMINATION_DELAY_ANNOTATION,
    NodeSimulator,
    NodeSpec,
)

from leaderworkerset.api.resources import NODES, PODS
from leaderworkerset.runtime.cache import DeletedFinalStateUnknown
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.nodesim import (
    NodePool,
    SimulatorFactory,
    isolated,
    isolated_pod_spec,
    unique_node_name,
)
from tests.fixtures.pods import (
    PodEventRecorder,
    condition,
    condition_is,
    get_pod,
    is_ready,
    wait_pod,
    wait_pod_gone,
)
from tests.toolkit.pods import container, pod, pod_manifest
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.asyncio(loop_scope="session")]


async def run_pod(api: ApiClient, namespace: str, manifest: JsonObj) -> JsonObj:
    await api.create(PODS, manifest, namespace)
    return await wait_pod(api, namespace, manifest["metadata"]["name"], is_ready)


async def assert_terminating_until(api: ApiClient, namespace: str, name: str, until: float) -> None:
    """The pod exists with a deletionTimestamp on every check until loop time ``until``."""
    loop = asyncio.get_running_loop()
    checks = 0
    while loop.time() < until:
        pod = await get_pod(api, namespace, name)
        assert pod is not None, f"pod {name} was deleted early (after {checks} checks)"
        assert pod["metadata"].get("deletionTimestamp"), "pod is not terminating"
        checks += 1
        await asyncio.sleep(0.2)
    assert checks > 0


async def test_pod_runs_with_kubelet_status(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    manifest = pod_manifest(
        "web",
        containers=2,
        initContainers=[
            {"name": "setup", "image": "registry.k8s.io/pause:3.10"},
            {"name": "proxy", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Always"},
        ],
    )
    pod = await run_pod(nodesim_api, namespace, manifest)
    status = pod["status"]
    node = node_simulator.node(pod["spec"]["nodeName"])
    assert status["hostIP"] == node.internal_ip
    assert status["podIP"].startswith("10.") and status["podIP"] != status["hostIP"]
    assert status["startTime"]
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition_is(pod, kind), kind
    running = [c for c in status["containerStatuses"] if c["state"].get("running")]
    assert [c["name"] for c in running] == ["c0", "c1"]
    assert all(c["ready"] and c["started"] and c["containerID"] for c in running)
    init = {c["name"]: c for c in status["initContainerStatuses"]}
    assert init["setup"]["state"]["terminated"]["reason"] == "Completed"
    assert init["proxy"]["state"].get("running")

    # The simulator must not react to its own (or unrelated) writes with more writes.
    patched = await nodesim_api.patch(
        PODS, "web", {"metadata": {"labels": {"touched": "yes"}}}, namespace=namespace
    )
    await _wait_simulator_saw(node_simulator, namespace, "web", patched)
    again = await get_pod(nodesim_api, namespace, "web")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_termination_delay_holds_pod_terminating(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    delay = 6.0
    manifest = pod_manifest("slow", annotations={TERMINATION_DELAY_ANNOTATION: str(delay)})
    await run_pod(nodesim_api, namespace, manifest)
    loop = asyncio.get_running_loop()
    await nodesim_api.delete(PODS, "slow", namespace)
    deleted_at = loop.time()

    await assert_terminating_until(nodesim_api, namespace, "slow", deleted_at + delay / 2)
    await wait_pod_gone(nodesim_api, namespace, "slow", within=delay + 15)
    elapsed = loop.time() - deleted_at
    assert delay * 0.95 <= elapsed <= delay + 10, elapsed


async def test_termination_delay_is_capped_by_grace_period(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    manifest = pod_manifest(
        "graceful",
        annotations={TERMINATION_DELAY_ANNOTATION: "120"},
        terminationGracePeriodSeconds=2,
    )
    await run_pod(nodesim_api, namespace, manifest)
    loop = asyncio.get_running_loop()
    await nodesim_api.delete(PODS, "graceful", namespace)
    deleted_at = loop.time()
    await wait_pod_gone(nodesim_api, namespace, "graceful", within=20)
    elapsed = loop.time() - deleted_at
    assert 1.9 <= elapsed < 20, elapsed  # capped by the 2 s grace period, not 120 s


async def test_stalled_termination_waits_for_release(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    await run_pod(nodesim_api, namespace, pod_manifest("stuck"))
    await node_simulator.set_termination_delay(namespace, "stuck", 1.0)
    await node_simulator.stall_termination(namespace, "stuck")
    loop = asyncio.get_running_loop()
    await nodesim_api.delete(PODS, "stuck", namespace)
    # Well past the 1s delay: the stall, not the delay, holds it.
    await assert_terminating_until(nodesim_api, namespace, "stuck", loop.time() + 3)
    await node_simulator.release_termination(namespace, "stuck")
    await wait_pod_gone(nodesim_api, namespace, "stuck", within=15)


async def test_node_termination_delay_and_terminal_phase(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    node = await extra_nodes.add(isolate=True, termination_delay=2.0)
    manifest = pod_manifest("on-slow-node", **isolated_pod_spec(node.name))
    await run_pod(nodesim_api, namespace, manifest)
    loop = asyncio.get_running_loop()
    async with PodEventRecorder(nodesim_api, namespace, "on-slow-node") as recorder:
        await nodesim_api.delete(PODS, "on-slow-node", namespace)
        deleted_at = loop.time()
        await wait_pod_gone(nodesim_api, namespace, "on-slow-node", within=15)
        elapsed = loop.time() - deleted_at

        async def saw_deleted() -> bool:
            return any(kind == "DELETED" for kind, _ in recorder.events)

        await eventually(saw_deleted, what="DELETED event")
    assert elapsed >= 1.9, elapsed
    # Like the kubelet, containers end and the phase turns terminal before the delete.
    kinds = [kind for kind, _ in recorder.events]
    assert kinds[-1] == "DELETED", kinds
    ended = [obj for kind, obj in recorder.events if kind == "MODIFIED"][-1]
    assert ended["status"]["phase"] == "Succeeded", recorder.phases()
    assert ended["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


async def test_fail_pod_persists(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    await run_pod(nodesim_api, namespace, pod_manifest("doomed"))
    await node_simulator.fail_pod(namespace, "doomed", pod_reason="Simulated")
    failed = await wait_pod(
        nodesim_api, namespace, "doomed", lambda p: p["status"]["phase"] == "Failed"
    )
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 1
    assert terminated["reason"] == "Error"
    assert failed["status"]["reason"] == "Simulated"
    assert condition_is(failed, "Ready", "False")

    # A later event for the pod must not revive it.
    patched = await nodesim_api.patch(
        PODS, "doomed", {"metadata": {"labels": {"poke": "1"}}}, namespace=namespace
    )
    await _wait_simulator_saw(node_simulator, namespace, "doomed", patched)
    pod = await get_pod(nodesim_api, namespace, "doomed")
    assert pod is not None and pod["status"]["phase"] == "Failed"
    # Terminal pods go without waiting for any termination delay.
    await nodesim_api.delete(PODS, "doomed", namespace)
    await wait_pod_gone(nodesim_api, namespace, "doomed", within=15)


async def test_restart_container(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    before = await run_pod(nodesim_api, namespace, pod_manifest("flaky", containers=2))
    old_id = before["status"]["containerStatuses"][1]["containerID"]

    restart = asyncio.create_task(
        node_simulator.restart_container(namespace, "flaky", "c1", downtime=2.0)
    )
    down = await wait_pod(
        nodesim_api, namespace, "flaky", lambda p: condition_is(p, "Ready", "False")
    )
    c1 = down["status"]["containerStatuses"][1]
    assert c1["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert condition(down, "ContainersReady")["reason"] == "ContainersNotReady"  # type: ignore[index]
    await restart

    def restarted(p: JsonObj) -> bool:
        return is_ready(p) and p["status"]["containerStatuses"][1]["restartCount"] == 1

    pod = await wait_pod(nodesim_api, namespace, "flaky", restarted)
    c0, c1 = pod["status"]["containerStatuses"]
    assert c0["restartCount"] == 0
    assert c1["lastState"]["terminated"]["exitCode"] == 1
    assert c1["state"]["running"] and c1["containerID"] != old_id

    # Without downtime: straight back to running, second restart counted.
    await node_simulator.restart_container(namespace, "flaky", "c1")
    await wait_pod(
        nodesim_api,
        namespace,
        "flaky",
        lambda p: is_ready(p) and p["status"]["containerStatuses"][1]["restartCount"] == 2,
    )


async def test_container_readiness_fault_persists(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    await run_pod(nodesim_api, namespace, pod_manifest("shy"))
    await node_simulator.set_container_ready(namespace, "shy", False)
    pod = await wait_pod(nodesim_api, namespace, "shy", lambda p: condition_is(p, "Ready", "False"))
    assert condition_is(pod, "ContainersReady", "False")
    assert pod["status"]["phase"] == "Running"

    patched = await nodesim_api.patch(
        PODS, "shy", {"metadata": {"labels": {"poke": "1"}}}, namespace=namespace
    )
    await _wait_simulator_saw(node_simulator, namespace, "shy", patched)
    assert condition_is(await get_pod(nodesim_api, namespace, "shy"), "Ready", "False")

    await node_simulator.set_container_ready(namespace, "shy", True)
    await wait_pod(nodesim_api, namespace, "shy", is_ready)


async def test_node_not_ready_freezes_its_pods(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    simulator = extra_nodes.simulator
    node = await extra_nodes.add(isolate=True)
    await run_pod(nodesim_api, namespace, pod_manifest("stranded", **isolated_pod_spec(node.name)))

    await simulator.set_node_ready(node.name, False)
    api_node = await nodesim_api.get(NODES, node.name)
    assert condition_is(api_node, "Ready", "False")
    taints = {(t["key"], t["effect"]) for t in api_node["spec"].get("taints") or []}
    assert ("node.kubernetes.io/not-ready", "NoSchedule") in taints
    assert ("node.kubernetes.io/not-ready", "NoExecute") in taints

    # A dead kubelet reports nothing: the fault stays unreported while the node is down.
    await simulator.set_container_ready(namespace, "stranded", False)
    pod = await get_pod(nodesim_api, namespace, "stranded")
    assert pod is not None and condition_is(pod, "Ready")
    # ... and deleted pods stay Terminating.
    await simulator.set_termination_delay(namespace, "stranded", 0)
    await nodesim_api.delete(PODS, "stranded", namespace)
    loop = asyncio.get_running_loop()
    await assert_terminating_until(nodesim_api, namespace, "stranded", loop.time() + 2)

    await simulator.set_node_ready(node.name, True)
    api_node = await nodesim_api.get(NODES, node.name)
    assert condition_is(api_node, "Ready")
    keys = {t["key"] for t in api_node["spec"].get("taints") or []}
    assert not keys & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    await wait_pod_gone(nodesim_api, namespace, "stranded", within=15)


async def test_custom_simulator_with_extended_resources(
    nodesim_api: ApiClient, node_simulator_factory: SimulatorFactory, namespace: str
) -> None:
    name = unique_node_name("tpu")
    spec = isolated(
        NodeSpec(
            name,
            cpu="4",
            memory="16Gi",
            pods=20,
            gpus=2,
            extended={"google.com/tpu": 4},
            labels={"cloud.google.com/gke-nodepool": "tpu-pool"},
        )
    )
    await node_simulator_factory([spec])
    node = await nodesim_api.get(NODES, name)
    assert node["status"]["allocatable"]["google.com/tpu"] == "4"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
    manifest = pod_manifest("tpu-user", **isolated_pod_spec(name))
    manifest["spec"]["containers"][0]["resources"] = {
        "limits": {"google.com/tpu": "4", "nvidia.com/gpu": "2"}
    }
    pod = await run_pod(nodesim_api, namespace, manifest)
    assert pod["spec"]["nodeName"] == name


async def test_marks_many_pods_running(
    nodesim_api: ApiClient,
    node_simulator_factory: SimulatorFactory,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Throughput of the simulator alone: the pods exist, bound by nodeName to a node
    the simulator does not have yet, so neither pod creation nor the scheduler sets the
    pace; then the node is added and every pod must turn Running, then be deleted."""
    count = int(os.environ.get("NODESIM_PERF_PODS", "1000"))
    simulator = await node_simulator_factory([])
    name = unique_node_name("perf")
    create_slots = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        manifest = pod_manifest(f"p{i}", labels={"perf": "yes"}, nodeName=name)
        async with create_slots:
            await nodesim_api.create(PODS, manifest, namespace)

    await asyncio.gather(*(create(i) for i in range(count)))

    async def pods_left() -> list[JsonObj]:
        pods, _ = await list_all(nodesim_api, PODS, namespace, label_selector="perf=yes")
        return pods

    started, cpu = time.monotonic(), time.process_time()
    await simulator.add_node(NodeSpec(name, cpu="1000", memory="4Ti", pods=count + 10))

    async def all_started() -> bool:
        return simulator.stats.pods_started >= count

    await eventually(all_started, within=60 + count / 20, interval=0.02, what="pods running")
    running, running_cpu = time.monotonic() - started, time.process_time() - cpu
    pods = await pods_left()
    assert len(pods) == count and all(is_ready(p) for p in pods)
    writes = simulator.stats.status_writes

    async def delete(pod: JsonObj) -> None:
        async with create_slots:
            await nodesim_api.delete(PODS, pod["metadata"]["name"], namespace)

    started = time.monotonic()
    await asyncio.gather(*(delete(p) for p in pods))

    async def all_gone() -> bool:
        return not await pods_left()

    await eventually(all_gone, within=60 + count / 20, interval=0.2, what="pods deleted")
    deleted = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\nnodesim: {count} pods Running in {running:.1f}s ({count / running:.0f}/s, "
            f"{writes} status writes, {running_cpu:.1f}s CPU in this process); "
            f"deleted in {deleted:.1f}s ({count / deleted:.0f}/s, "
            f"{simulator.stats.deletes} deletes); write errors {simulator.stats.write_errors}"
        )


async def _wait_simulator_saw(
    simulator: NodeSimulator, namespace: str, name: str, written: JsonObj
) -> None:
    """Until the simulator has processed the watch event of ``written``."""
    version = int(written["metadata"]["resourceVersion"])

    async def observed() -> bool:
        cached = simulator.cached_pod(namespace, name)
        return cached is not None and int(cached["metadata"]["resourceVersion"]) >= version

    await eventually(observed, what=f"simulator to observe {namespace}/{name}@{version}")
    async with asyncio.timeout(10):
        await simulator.settle()


def _cached_pod(name: str, uid: str, version: int, node: str = "n1") -> JsonObj:
    return pod(
        name,
        "ns",
        uid=uid,
        resource_version=str(version),
        node=node,
        containers=[container("c0", "img")],
        status={},
    )


async def test_cache_relist_and_replacement_without_cluster() -> None:
    """What the simulator relies on after a 410: the informer's relist hands over the pods
    deleted meanwhile, which the cache forgets; stale events are ignored; and a recreated
    pod (same name, new UID) starts afresh."""
    changed: list[PodKey] = []
    forgotten: list[str] = []

    def runtime(pod: JsonObj) -> PodRuntime:
        meta = pod["metadata"]
        return PodRuntime(meta["uid"], "ns", meta["name"], "n1", "10.0.0.1", "t", 0.0)

    cache = PodCache(
        is_our_node=lambda node: node == "n1",
        new_runtime=runtime,
        changed=changed.append,
        forgotten=lambda key, rt: forgotten.append(rt.uid if rt else "-"),
    )
    cache.on_add(_cached_pod("a", "uid-a", 5))
    cache.on_add(_cached_pod("b", "uid-b", 6))
    cache.on_add(_cached_pod("elsewhere", "uid-x", 7, node="n2"))
    assert changed == ["ns/a", "ns/b"]

    older = _cached_pod("a", "uid-a", 4)
    cache.on_update(older, older)  # older than cached
    assert len(changed) == 2

    # A relist that no longer finds b, and finds a changed.
    cache.on_delete(DeletedFinalStateUnknown(_cached_pod("b", "uid-b", 6)))
    cache.on_update(_cached_pod("a", "uid-a", 5), _cached_pod("a", "uid-a", 8))
    assert set(cache.pods) == {"ns/a"} and forgotten == ["uid-b"]

    cache.on_add(_cached_pod("a", "uid-a2", 9))
    assert forgotten == ["uid-b", "uid-a"]
    assert cache.runtime("ns/a") is cache.runtimes["uid-a2"]


async def test_status_patch_is_idempotent_without_cluster() -> None:
    """No write loop: once the kubelet status is in place, nothing is left to patch."""
    pod = _cached_pod("a", "uid-a", 1)
    pod["spec"]["readinessGates"] = [{"conditionType": "example.com/gate"}]
    rt = PodRuntime("uid-a", "ns", "a", "n1", "10.244.0.9", "2026-01-01T00:00:00Z", 0.0)
    ensure_containers(rt, pod, "2026-01-01T00:00:00Z")
    patch = status_patch(pod, desired_status(pod, rt, "172.20.0.1"))
    assert patch is not None
    ready = next(c for c in patch["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReadinessGatesNotReady"

    # What the API server stores: the patch applied, directives and nulls dropped.
    stored = {k: v for k, v in patch["status"].items() if k not in ("hostIPs", "podIPs")}
    stored["hostIPs"] = [{"ip": "172.20.0.1"}]
    stored["podIPs"] = [{"ip": "10.244.0.9"}]
    stored["conditions"] = [
        {k: v for k, v in c.items() if v is not None} for c in stored["conditions"]
    ]
    pod["status"] = stored
    assert status_patch(pod, desired_status(pod, rt, "172.20.0.1")) is None

    # Someone else sets the gate: only then is Ready recomputed.
    stored["conditions"].append({"type": "example.com/gate", "status": "True"})
    patch = status_patch(pod, desired_status(pod, rt, "172.20.0.1"))
    assert patch is not None
    ready = next(c for c in patch["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] is None
    assert all(c["type"] != "example.com/gate" for c in patch["status"]["conditions"])
