"""Create `replicas` groups of `size` pods several ways, each on a fresh local control
plane of the same build, and print one table:

    python -m bench.scale --replicas 1000 --size 8 [--hash | --modes ordinal,hash]
        [--runs 3] [--idle 60] [--with-upstream] [--baseline /path/to/other/src]
        [--scheduling [both|only]] [--json FILE] [--plot DIR]

floor     the StatefulSets a LeaderWorkerSet ends up with, created directly (no LWS
          controller): the time Kubernetes itself needs for these pods
ours      `lws controller` as its own process, with its webhooks (`ours-hash`: the
          Hash workload, when --modes has both identities)
upstream  upstream's Go manager (hack/build-upstream-lws.sh), with --with-upstream;
          always the Ordinal workload (it has no Group Identity)
base      `lws controller` run from another source tree (--baseline SRC), to compare
          a change with what it changes in one run
*-gang    with --scheduling: the same with gang scheduling by Kubernetes' Workload API.
          floor-gang creates a Workload, a PodGroup per group and one StatefulSet of
          `size` pods per group naming it; ours-gang (base-gang) runs the controller with
          the kubernetes provider and the WorkloadAwareScheduling gate on an LWS with
          `spec.scheduling: {}`. Upstream's v0.9.0 manager serves neither, so it never
          runs with gangs. `--scheduling` (both) runs every configuration without and
          with gangs in the same run; `--scheduling only` keeps the plain floor and runs
          the rest with gangs only.

The node simulator runs as a process of its own (bench/nodesim_process.py), about
100 pods per node; the driver watches pods and polls the LeaderWorkerSet.
Columns: seconds from the create to all pods Ready and to the LeaderWorkerSet's
status saying so (readyReplicas == replicas and Available), the manager's CPU
seconds (utime + stime over that interval), its peak memory and the growth of its
memory per pod, its API writes (rest_client_requests_total,
POST/PUT/PATCH/DELETE), the pod webhook's p50/p99 latency
(controller_runtime_webhook_latency_seconds), writes in an idle period afterwards,
and the time to all pods Ready as a multiple of the same run's floor (and, for a gang
configuration, of the same run's gang floor). CPU and memory
cover the manager's process and its children (if it has any);
memory is their summed PSS, sampled every half second (bench.processes). CPU ms per
pod and writes per group are the CPU and writes columns over the run's pods and groups.

--json FILE appends each configuration's result as one JSON line as soon as it is
measured (bench.curve assembles a cost curve from the lines of several invocations);
--plot DIR draws pods Ready over time, a line per configuration and run. With more
than one kind of floor or with --scheduling, a second table follows: where the CPU went
(ours, kube-scheduler, kube-apiserver, kube-controller-manager) and our writes per group
by method.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import APISERVER, CONTROLLER_MANAGER, SCHEDULER, ControlPlane
from lws_localcluster.manager_process import (
    ManagerProcess,
    UpstreamManager,
    WebhookTLS,
    install_upstream_needs,
    route_webhooks,
)

from bench import plots, workload
from bench.processes import (
    Metrics,
    PeakMemory,
    Simulator,
    process_tree,
    quantile,
    sum_by,
    tree_cpu_seconds,
)
from bench.timeline import Timeline, thin
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    LEADERWORKERSETS,
    NAMESPACES,
    POD_GROUPS,
    PODS,
    SERVICES,
    STATEFULSETS,
    WORKLOADS,
    Resource,
)
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.client import ApiClient, ApiError

REPO = Path(__file__).resolve().parents[1]
PODS_PER_NODE = 100
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
# Creates, updates, patches, deletes.
WRITE_ORDER = ("POST", "PUT", "PATCH", "DELETE")
MODES = {"ordinal": c.GROUP_IDENTITY_ORDINAL, "hash": c.GROUP_IDENTITY_HASH}
# Points of the Ready-over-time series kept in a JSON line (the PNG gets them all).
SERIES_POINTS = 200
FLOOR = "floor"
# The name suffix of a configuration with gang scheduling.
GANG = "-gang"
GANG_FLOOR = FLOOR + GANG
# What the scheduler writes on a PodGroup once it has placed the whole gang.
GANG_PLACED = "PodGroupInitiallyScheduled"


def is_gang(config: str) -> bool:
    return config.endswith(GANG)


def is_floor(config: str) -> bool:
    return config in (FLOOR, GANG_FLOOR)


@dataclass
class Result:
    config: str
    run: int
    pods_ready: float
    replicas: int = 0
    size: int = 0
    # The LeaderWorkerSet's groupIdentity; None for the floor (no LeaderWorkerSet).
    mode: str | None = None
    lws_ready: float | None = None
    cpu: float | None = None
    peak_mib: float | None = None
    kib_per_pod: float | None = None
    writes: int | None = None
    webhook_p50_ms: float | None = None
    webhook_p99_ms: float | None = None
    idle_writes: int | None = None
    # The writes by method (POST, PUT, PATCH, DELETE).
    writes_by_method: dict[str, int] = field(default_factory=dict)
    # Gang configurations: PodGroups at the end, and those the scheduler placed.
    pod_groups: int | None = None
    pod_groups_placed: int | None = None
    timeline: str = ""
    # CPU seconds of the machine's other processes over the run, by name.
    process_cpu: dict[str, float] = field(default_factory=dict)
    # (seconds since the create, pods Ready by then).
    ready: list[tuple[float, int]] = field(default_factory=list)

    @property
    def cpu_ms_per_pod(self) -> float | None:
        return None if self.cpu is None else self.cpu * 1000 / (self.replicas * self.size)

    @property
    def writes_per_group(self) -> float | None:
        return None if self.writes is None else self.writes / self.replicas

    def per_group(self, method: str) -> float | None:
        """Writes of one method per group; None for a configuration without writes."""
        if self.writes is None:
            return None
        return self.writes_by_method.get(method, 0) / self.replicas

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Result:
        """The result a JSON line of `record` holds (its thinned Ready series)."""
        names = {f.name for f in fields(cls)} - {"timeline", "ready"}
        result = cls(**{k: v for k, v in record.items() if k in names})
        result.ready = [(float(t), int(n)) for t, n in record.get("ready") or ()]
        result.timeline = str(record.get("summary", ""))
        return result

    def record(
        self, x_floor: float | None, invocation: str, x_gang_floor: float | None = None
    ) -> dict[str, Any]:
        """The JSON line of --json: every column, the other processes' CPU, and the
        Ready-over-time series thinned to SERIES_POINTS."""
        columns = {k: v for k, v in vars(self).items() if k not in ("timeline", "ready")}
        return {
            **columns,
            "process_cpu": {name: round(s, 2) for name, s in self.process_cpu.items()},
            "invocation": invocation,
            "pods": self.replicas * self.size,
            "x_floor": x_floor,
            "x_gang_floor": x_gang_floor,
            "cpu_ms_per_pod": self.cpu_ms_per_pod,
            "writes_per_group": self.writes_per_group,
            "summary": self.timeline,
            "ready": thin(self.ready, SERIES_POINTS),
        }


# -- watching -------------------------------------------------------------------------------


def _readiness_only(pod: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    ready = any(
        x.get("type") == "Ready" and x.get("status") == "True"
        for x in (pod.get("status") or {}).get("conditions") or ()
    )
    timeline.observe(pod, time.monotonic(), ready)
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
    return {"metadata": kept, "ready": ready}


def lws_ready(lws: dict[str, Any], replicas: int) -> bool:
    status = lws.get("status") or {}
    return status.get("readyReplicas") == replicas and any(
        x["type"] == c.CONDITION_AVAILABLE and x["status"] == "True"
        for x in status.get("conditions") or ()
    )


# -- set-up of a manager ----------------------------------------------------------------------


async def _metrics_token(api: ApiClient) -> str:
    """A token allowed to GET /metrics, for upstream's authenticated metrics server."""
    name = "lws-bench-metrics"
    await api.create(SERVICE_ACCOUNTS, {"metadata": {"name": name}}, "default")
    await api.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": name},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
    )
    await api.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
        },
    )
    answer = await api.request(
        "POST",
        SERVICE_ACCOUNTS.path("default", name, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(answer["status"]["token"])


async def start_manager(api: ApiClient, manager: ManagerProcess) -> str | None:
    """Start ``manager`` with its webhooks routed; the token its /metrics asks for."""
    assert manager.tls is not None
    await route_webhooks(api, manager.webhook_port, manager.tls.ca_pem, REPO)
    token = None
    if isinstance(manager, UpstreamManager):
        await install_upstream_needs(api)
        token = await _metrics_token(api)
    try:
        await api.create(NAMESPACES, {"metadata": {"name": c.DEFAULT_OPERATOR_NAMESPACE}})
    except ApiError as exc:
        if not exc.already_exists:
            raise
    manager.start()
    await manager.wait_ready(within=180.0)
    # Caches are synced when /readyz answers; let start-up work (CA checks, the first
    # relists) finish before the clock starts.
    await asyncio.sleep(3)
    return token


# -- one configuration ------------------------------------------------------------------------


async def _create_floor(api: ApiClient, replicas: int, size: int) -> None:
    await api.create(SERVICES, workload.headless_service(), workload.NAMESPACE)
    slots = asyncio.Semaphore(20)

    async def create(obj: dict[str, Any]) -> None:
        async with slots:
            await api.create(STATEFULSETS, obj, workload.NAMESPACE)

    await asyncio.gather(*(create(s) for s in workload.floor_statefulsets(replicas, size)))


async def _create_gang_floor(api: ApiClient, replicas: int, size: int) -> None:
    """The Workload, then group by group (20 at a time) its PodGroup and its StatefulSet,
    in Kubernetes' order: no pod exists before its PodGroup."""
    await api.create(SERVICES, workload.headless_service(), workload.NAMESPACE)
    await api.create(WORKLOADS, workload.gang_workload(size), workload.NAMESPACE)
    slots = asyncio.Semaphore(20)

    async def create(pod_group: dict[str, Any], sts: dict[str, Any]) -> None:
        async with slots:
            await api.create(POD_GROUPS, pod_group, workload.NAMESPACE)
            await api.create(STATEFULSETS, sts, workload.NAMESPACE)

    pod_groups, sets = workload.gang_floor(replicas, size)
    await asyncio.gather(*(create(g, s) for g, s in zip(pod_groups, sets, strict=True)))


async def _pod_groups(api: ApiClient) -> tuple[int, int]:
    """(PodGroups in the benchmark's namespace, those whose gang the scheduler placed)."""
    answer = await api.list(POD_GROUPS, workload.NAMESPACE)
    placed = sum(
        1
        for g in answer["items"]
        if any(
            x.get("type") == GANG_PLACED and x.get("status") == "True"
            for x in (g.get("status") or {}).get("conditions") or ()
        )
    )
    return len(answer["items"]), placed


def writes_line(result: Result) -> str:
    """Our writes by method, in all and per group."""
    if result.writes is None:
        return ""
    parts = [
        f"{method} {result.writes_by_method.get(method, 0)} ({result.per_group(method):.2f}/group)"
        for method in WRITE_ORDER
    ]
    return "our writes: " + ", ".join(parts)


def _cluster_requests(cp: ControlPlane) -> str:
    """What the scheduler and kube-controller-manager asked of the API server, the
    scheduler's attempts, where kube-controller-manager's time went (its busiest work
    queues), and the admission webhooks as the API server timed them (connection set-up
    and queueing included): a configuration that costs the cluster more is slower for it."""
    lines = []
    for component in (SCHEDULER, CONTROLLER_MANAGER):
        text = cp.component_metrics(component) or ""
        calls = sum_by(text, "rest_client_requests_total", "method")
        line = f"{component} " + " ".join(f"{m} {n:.0f}" for (m,), n in sorted(calls.items()))
        if component == SCHEDULER:
            attempts = sum_by(text, "scheduler_schedule_attempts_total", "result")
            line += " (attempts " + " ".join(f"{r} {n:.0f}" for (r,), n in attempts.items()) + ")"
        else:
            work = sum_by(text, "workqueue_work_duration_seconds_sum", "name")
            busiest = sorted(work.items(), key=lambda item: -item[1])[:4]
            line += "; work s " + " ".join(f"{q} {s:.1f}" for (q,), s in busiest)
        lines.append(line)
    try:
        text = cp.api_get("/metrics", timeout=30).decode()
    except OSError:
        text = ""
    family = "apiserver_admission_webhook_admission_duration_seconds"
    counts = sum_by(text, family + "_count", "name")
    sums = sum_by(text, family + "_sum", "name")
    buckets = sum_by(text, family + "_bucket", "name", "le")
    hooks = []
    for (name,), count in sorted(counts.items()):
        if count:
            mine = {float(le): n for (hook, le), n in buckets.items() if hook == name}
            p50, p99 = quantile(0.5, {}, mine), quantile(0.99, {}, mine)
            middle = "-" if p50 is None else f"{p50 * 1000:.0f}"
            tail = "-" if p99 is None else f"{p99 * 1000:.0f}"
            # The share of calls over 25 ms: a wait in a burst, or a connection set up.
            slow = 1 - mine.get(0.025, 0.0) / count
            hooks.append(
                f"{name} mean {sums[(name,)] / count * 1000:.1f} ms p50 {middle} ms"
                f" p99 {tail} ms, {slow:.0%} over 25 ms"
            )
    lines.append("API server's webhook calls: " + ("; ".join(hooks) or "none"))
    return "\n".join(lines)


async def measure(
    config: str,
    run: int,
    cp: ControlPlane,
    workdir: Path,
    args: argparse.Namespace,
    manager: ManagerProcess | None,
    others: dict[str, int],
    identity: str | None,
) -> Result:
    """One configuration's run; `others` are the machine's other processes by name,
    whose CPU over the run is printed beside it (two cores are shared by all)."""
    pods = args.replicas * args.size
    kubeconfig = cp.kubeconfig
    api = ApiClient.from_kubeconfig(kubeconfig, qps=0, burst=0, user_agent="lws-bench")
    timeline = Timeline()
    watch = Informer(
        api,
        PODS,
        namespace=workload.NAMESPACE,
        label_selector=workload.POD_LABEL,
        transform=lambda pod: _readiness_only(pod, timeline),
    )
    sets = Informer(
        api,
        STATEFULSETS,
        namespace=workload.NAMESPACE,
        transform=lambda sts: timeline.observe_set(sts, time.monotonic()),
    )
    try:
        token = None
        if manager is not None:
            token = await start_manager(api, manager)

        def scrape() -> Metrics:
            assert manager is not None
            return Metrics.parse(manager.metrics_text(token))

        for informer in (watch, sets):
            informer.start()
            await informer.wait_synced()
        before = scrape() if manager else Metrics()
        pids = process_tree(manager.pid) if manager else []
        cpu_before = tree_cpu_seconds(pids)
        others_before = {name: tree_cpu_seconds([pid]) for name, pid in others.items()}
        memory = PeakMemory(pids) if manager else None
        memory_before = memory.last_kib if memory else 0
        profiler = _profiler(args, manager, f"{config}-{run}")
        started = timeline.start = time.monotonic()
        if config == GANG_FLOOR:
            await _create_gang_floor(api, args.replicas, args.size)
        elif manager is None:
            await _create_floor(api, args.replicas, args.size)
        else:
            assert identity is not None
            lws = workload.leaderworkerset(
                args.replicas, args.size, identity, scheduling=is_gang(config)
            )
            await api.create(LEADERWORKERSETS, lws, workload.NAMESPACE)
        pods_ready: float | None = None
        lws_ready_at: float | None = None
        deadline = started + args.timeout
        while pods_ready is None or (manager is not None and lws_ready_at is None):
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"{config}: not ready after {args.timeout}s")
            if manager is not None and not manager.running():
                raise RuntimeError(f"{config} exited:\n{manager.log_tail()}")
            if pods_ready is None and sum(1 for p in watch.list() if p["ready"]) >= pods:
                pods_ready = now - started
            if manager is not None and lws_ready_at is None:
                current = await api.get(LEADERWORKERSETS, workload.NAME, workload.NAMESPACE)
                if lws_ready(current, args.replicas):
                    lws_ready_at = now - started
            await asyncio.sleep(0.5)
        spent = {n: tree_cpu_seconds([pid]) - others_before[n] for n, pid in others.items()}
        busiest = sorted(spent.items(), key=lambda item: -item[1])
        cpu_line = "CPU s: " + ", ".join(f"{name} {seconds:.0f}" for name, seconds in busiest)
        summary = (
            f"{timeline.summary()}\n{await asyncio.to_thread(_cluster_requests, cp)}\n{cpu_line}"
        )
        result = Result(
            config,
            run,
            pods_ready,
            replicas=args.replicas,
            size=args.size,
            mode=identity,
            lws_ready=lws_ready_at,
            timeline=summary,
            process_cpu=spent,
            ready=timeline.ready_series(),
        )
        if is_gang(config):
            result.pod_groups, result.pod_groups_placed = await _pod_groups(api)
            result.timeline += (
                f"\nPodGroups: {result.pod_groups}, placed (PodGroupInitiallyScheduled)"
                f" {result.pod_groups_placed}"
            )
        if manager is None:
            return result
        # Writes that trail the last observation (a final status update) still count.
        await asyncio.sleep(2)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            await asyncio.to_thread(profiler.wait, 120)
        after_text = manager.metrics_text(token)
        after = Metrics.parse(after_text)
        if args.keep_logs:
            # Reconcile counts and times per controller, queue depths: what the table
            # leaves out, for reading where a run's time went.
            kept = Path(args.keep_logs) / f"{config}-{run}.metrics"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(after_text)
        result.cpu = tree_cpu_seconds(pids) - cpu_before
        assert memory is not None
        peak, now_kib = memory.stop()
        result.peak_mib = peak / 1024
        result.kib_per_pod = (now_kib - memory_before) / pods
        result.writes = after.writes - before.writes
        result.writes_by_method = {
            method: after.writes_by_method.get(method, 0) - before.writes_by_method.get(method, 0)
            for method in WRITE_ORDER
        }
        result.timeline += "\n" + writes_line(result)
        if after.connections is not None and before.connections is not None:
            reviews = after.reviews - before.reviews
            opened = after.connections - before.connections
            result.timeline += (
                f"\nwebhook server: {reviews:.0f} reviews over {opened:.0f} new connections"
                f" ({reviews / max(opened, 1):.1f} reviews a connection)"
            )
        for q, attr in ((0.5, "webhook_p50_ms"), (0.99, "webhook_p99_ms")):
            value = quantile(q, before.webhook_buckets, after.webhook_buckets)
            setattr(result, attr, None if value is None else value * 1000)
        if args.idle > 0:
            await asyncio.sleep(args.idle)
            result.idle_writes = scrape().writes - after.writes
        return result
    finally:
        await watch.stop()
        await sets.stop()
        await api.close()


def _profiler(
    args: argparse.Namespace, manager: ManagerProcess | None, name: str
) -> subprocess.Popen[bytes] | None:
    """py-spy sampling our manager from the create to all Ready (collapsed stacks, which
    flamegraph tools and `sort | uniq` read alike)."""
    if not args.profile or manager is None or isinstance(manager, UpstreamManager):
        return None
    out = Path(args.profile) / f"{name}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).with_name("py-spy")
    command = [str(py_spy), "record", "--pid", str(manager.pid), "--format", "raw"]
    command += ["--rate", "50", "--nonblocking", "-o", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_config(
    config: str, identity: str | None, run: int, args: argparse.Namespace, go_binary: Path | None
) -> Result:
    pods = args.replicas * args.size
    with tempfile.TemporaryDirectory(prefix=f"lws-scale-{config}-") as tmp:
        workdir = Path(tmp)
        with ControlPlane(workdir / "cp", name=f"scale-{config}", binaries=ensure_binaries()) as cp:
            manager: ManagerProcess | None = None
            # No leader election (the default): with one manager per cluster it would
            # only add Lease writes.
            if not is_floor(config):
                tls = WebhookTLS.create(workdir / "certs", "lws-bench-ca")
                if config == "upstream":
                    assert go_binary is not None
                    manager = UpstreamManager(
                        config, workdir, cp.kubeconfig, executable=[str(go_binary)], tls=tls
                    )
                else:
                    # The manager runs in `workdir`: a relative --baseline would not reach it.
                    env = {}
                    if config.startswith("base"):
                        env["PYTHONPATH"] = str(args.baseline.resolve())
                    manager = ManagerProcess(
                        config,
                        workdir,
                        cp.kubeconfig,
                        tls=tls,
                        env=env,
                        workload_scheduling=is_gang(config),
                    )
            nodes = max(1, math.ceil(pods / PODS_PER_NODE))
            try:
                with Simulator(cp.kubeconfig, nodes, workdir / "nodesim.log") as simulator:
                    others = {**cp.pids, "node simulator": simulator.pid}
                    measured = measure(config, run, cp, workdir, args, manager, others, identity)
                    return asyncio.run(measured)
            finally:
                if manager is not None:
                    manager.kill()
                if args.keep_logs:
                    kept = Path(args.keep_logs)
                    kept.mkdir(parents=True, exist_ok=True)
                    logs = {f"{config}-{run}.nodesim.log": workdir / "nodesim.log"}
                    if manager is not None:
                        logs[f"{config}-{run}.log"] = manager.log_path
                    for name, path in logs.items():
                        if path.exists():
                            (kept / name).write_bytes(path.read_bytes())


# -- the table ----------------------------------------------------------------------------------


def cell(value: float | int | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def x_floor(result: Result, results: list[Result], floor: str = FLOOR) -> float | None:
    """All pods Ready as a multiple of the same run's floor (or of another floor)."""
    took = next((r.pods_ready for r in results if r.config == floor and r.run == result.run), 0)
    return result.pods_ready / took if took else None


def x_gang_floor(result: Result, results: list[Result]) -> float | None:
    """A gang configuration's time as a multiple of the same run's gang floor; None for
    the others, which have no gangs to be compared with."""
    return x_floor(result, results, GANG_FLOOR) if is_gang(result.config) else None


def table(results: list[Result], floors: list[Result] | None = None) -> str:
    """One row per result; `floors` (default `results`) hold the floor each run's ratio
    is taken against. Gang configurations add the ratio to the gang floor."""
    against = results if floors is None else floors
    gangs = any(is_gang(r.config) for r in [*results, *against])
    width = max(9, *(len(r.config) for r in [*results, *against]))
    header = (
        f"{'config':<{width}} {'run':>3} {'pods Ready s':>12} {'LWS Ready s':>11} {'x floor':>7} "
        + (f"{'x gang floor':>12} " if gangs else "")
        + f"{'CPU s':>7} {'ms/pod':>6} {'peak MiB':>8} {'KiB/pod':>7} {'writes':>7} "
        f"{'w/group':>7} {'hook p50 ms':>11} {'hook p99 ms':>11} {'idle writes':>11}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        gang_ratio = f"{cell(x_gang_floor(r, against), '.2f'):>12} " if gangs else ""
        lines.append(
            f"{r.config:<{width}} {r.run:>3} {r.pods_ready:>12.1f} {cell(r.lws_ready, '.1f'):>11} "
            f"{cell(x_floor(r, against), '.2f'):>7} {gang_ratio}{cell(r.cpu, '.1f'):>7} "
            f"{cell(r.cpu_ms_per_pod, '.2f'):>6} {cell(r.peak_mib, '.0f'):>8} "
            f"{cell(r.kib_per_pod, '.1f'):>7} {cell(r.writes, 'd'):>7} "
            f"{cell(r.writes_per_group, '.2f'):>7} "
            f"{cell(r.webhook_p50_ms, '.1f'):>11} {cell(r.webhook_p99_ms, '.1f'):>11} "
            f"{cell(r.idle_writes, 'd'):>11}"
        )
    return "\n".join(lines)


def cost_table(results: list[Result]) -> str:
    """Where each configuration's CPU went and what our controller wrote per group, by
    method: beside the main table when gangs (or several floors) are compared."""
    width = max(9, *(len(r.config) for r in results))
    # Ours is the CPU column; the others are the cluster's processes over the same run.
    names: list[tuple[str, str | None]] = [
        ("ours", None),
        ("scheduler", SCHEDULER),
        ("apiserver", APISERVER),
        ("kcm", CONTROLLER_MANAGER),
    ]
    header = (
        f"{'config':<{width}} {'run':>3} {'pods Ready s':>12} {'x floor':>7} "
        f"{'x gang floor':>12} "
        + " ".join(f"{name + ' CPU s':>13}" for name, _ in names)
        + " "
        + " ".join(f"{m + '/group':>12}" for m in WRITE_ORDER)
        + f" {'PodGroups placed':>16}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        cpus = [r.cpu if process is None else r.process_cpu.get(process) for _, process in names]
        placed = "-" if r.pod_groups is None else f"{r.pod_groups_placed}/{r.pod_groups}"
        lines.append(
            f"{r.config:<{width}} {r.run:>3} {r.pods_ready:>12.1f} "
            f"{cell(x_floor(r, results), '.2f'):>7} {cell(x_gang_floor(r, results), '.2f'):>12} "
            + " ".join(f"{cell(v, '.1f'):>13}" for v in cpus)
            + " "
            + " ".join(f"{cell(r.per_group(m), '.2f'):>12}" for m in WRITE_ORDER)
            + f" {placed:>16}"
        )
    return "\n".join(lines)


def configurations(args: argparse.Namespace, upstream: bool) -> list[tuple[str, str | None]]:
    """(name, groupIdentity) of each configuration a run goes through, in order. With
    --scheduling, each one of ours is followed by its gang variant (`-gang`) and the
    floor by the gang floor; `--scheduling only` keeps the plain floor, the reference of
    every earlier figure, and runs ours with gangs only. Upstream has no gangs."""
    scheduling = args.scheduling
    variants = {None: ("",), "both": ("", GANG), "only": (GANG,)}[scheduling]
    modes = [MODES[m] for m in args.modes] if args.modes else []
    if not modes:
        modes = [c.GROUP_IDENTITY_HASH if args.hash else c.GROUP_IDENTITY_ORDINAL]
    configs: list[tuple[str, str | None]] = []
    if not args.no_floor:
        configs.append((FLOOR, None))
        if scheduling:
            configs.append((GANG_FLOOR, None))
    for mode in modes:
        # One mode keeps today's names; with both, the Hash configurations say so.
        suffix = "-hash" if len(modes) > 1 and mode == c.GROUP_IDENTITY_HASH else ""
        for gang in variants:
            if args.baseline:
                configs.append(("base" + suffix + gang, mode))
            configs.append(("ours" + suffix + gang, mode))
    if upstream:
        configs.append(("upstream", c.GROUP_IDENTITY_ORDINAL))
    return configs


def _modes(text: str) -> list[str]:
    names = [m.strip().lower() for m in text.split(",") if m.strip()]
    wrong = [m for m in names if m not in MODES]
    if wrong or not names:
        raise argparse.ArgumentTypeError(
            f"--modes: {', '.join(wrong) or 'empty'}; give ordinal, hash or ordinal,hash"
        )
    return list(dict.fromkeys(names))


def plot_ready(results: list[Result], directory: Path) -> Path:
    """Pods Ready over time, a line per configuration and run (of one size): a color
    per configuration, dashes per run."""
    replicas, size = results[0].replicas, results[0].size
    # In the order the configurations ran: ordinal-hash for --modes ordinal,hash.
    mine = [r.mode.lower() for r in results if r.mode and r.config != "upstream"]
    modes = "-".join(dict.fromkeys(mine))
    gangs = "-gang" if any(is_gang(r.config) for r in results) else ""
    path = directory / f"ready-{replicas}x{size}-{modes or 'floor'}{gangs}.png"
    several = len({r.run for r in results}) > 1
    colors = {config: f"C{i}" for i, config in enumerate(dict.fromkeys(r.config for r in results))}
    dashes = ("-", "--", ":", "-.")
    lines, styles = {}, {}
    for r in results:
        name = _line_name(r, several=several)
        lines[name] = r.ready
        styles[name] = {"color": colors[r.config], "linestyle": dashes[(r.run - 1) % len(dashes)]}
    title = f"Pods Ready, {replicas} groups x {size} ({replicas * size} pods)"
    return plots.line_chart(
        path, title, "seconds since the create", "pods Ready", lines, styles=styles
    )


def _line_name(result: Result, *, several: bool) -> str:
    name = result.config
    if result.mode is not None and "-hash" not in name:
        name += f" ({result.mode})"
    return f"{name} run {result.run}" if several else name


def upstream_manager_binary() -> Path:
    """Upstream's Go manager, built from its Go module (cached by the script)."""
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "build-upstream-lws.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return Path(built.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=1000, help="groups")
    parser.add_argument("--size", type=int, default=8, help="pods per group")
    parser.add_argument("--hash", action="store_true", help="groupIdentity: Hash (default Ordinal)")
    parser.add_argument(
        "--modes", type=_modes, help="ordinal, hash or ordinal,hash: ours once per identity"
    )
    parser.add_argument("--runs", type=int, default=1, help="configurations alternate within a run")
    parser.add_argument("--idle", type=float, default=60.0, help="idle seconds afterwards; 0 skips")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per configuration")
    parser.add_argument("--with-upstream", action="store_true", help="also upstream's Go manager")
    parser.add_argument("--baseline", type=Path, help="also `lws controller` from this src/ tree")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (no ratio column)")
    parser.add_argument(
        "--scheduling",
        nargs="?",
        const="both",
        choices=("both", "only"),
        help="gang scheduling (spec.scheduling: {}): each of ours and the floor also with "
        "gangs (both, the default), or ours with gangs only (only)",
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy our manager into DIR")
    parser.add_argument(
        "--keep-logs",
        metavar="DIR",
        help="copy each manager's log and final metrics, and the node simulator's log, here",
    )
    parser.add_argument("--json", metavar="FILE", help="append each result as a JSON line")
    parser.add_argument("--plot", metavar="DIR", help="draw pods Ready over time as a PNG here")
    args = parser.parse_args()
    if args.hash and args.modes:
        parser.error("--hash and --modes: give one (--hash is --modes hash)")
    go_binary = upstream_manager_binary() if args.with_upstream else None
    configs = configurations(args, upstream=go_binary is not None)
    print(
        f"{args.replicas} groups x {args.size} ({args.replicas * args.size} pods), "
        f"{os.cpu_count()} CPUs, configurations "
        + ", ".join(name + (f" ({mode})" if mode else "") for name, mode in configs),
        flush=True,
    )
    invocation = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: list[Result] = []
    for run in range(1, args.runs + 1):
        for config, identity in configs:
            result = run_config(config, identity, run, args, go_binary)
            results.append(result)
            print(table([result], results).splitlines()[-1], flush=True)
            print("  " + result.timeline.replace("\n", "\n  "), flush=True)
            if args.json:
                with open(args.json, "a") as out:
                    record = result.record(
                        x_floor(result, results), invocation, x_gang_floor(result, results)
                    )
                    out.write(json.dumps(record) + "\n")
    print()
    print(table(results))
    if args.scheduling:
        print()
        print(cost_table(results))
    if args.plot:
        print(f"wrote {plot_ready(results, Path(args.plot))}")


if __name__ == "__main__":
    main()
