"""The pod webhook under load, served by a process of its own: server CPU per admission
and the latency a client sees, for leaders and workers as a StatefulSet or ReplicaSet
controller sends them.

    .venv/bin/python -m bench.webhook_load [--hash] [--requests 8000] [--concurrency 8]
        [--groups 1000] [--size 8] [--baseline /path/to/other/src] [--busy]
        [--switch-interval MS] [--rate PER_SECOND] [--loop asyncio|uvloop] [--hogs N]

The server process runs `register_webhooks` over caches holding one LeaderWorkerSet of
`groups` x `size` live pods (so a Hash leader's hostname check sees a full cache),
behind TLS, as the manager serves it. The client posts AdmissionReviews over
`concurrency` kept-alive connections, one leader for every `size - 1` workers, half of
them with subgroups and exclusive placement. The same reviews posted to the pod
validating path (which allows without a look) give the cost of the server itself:
TLS, HTTP, decoding the review, answering. With --baseline the server runs from that
src/ tree too, one run after the other. Prints figures; it is not a test.

With --busy the server's main loop (the manager's) is kept busy as the controller
keeps it at scale: one task runs synchronous chunks of 5 to 20 ms of Python (a status
pass, a watch chunk of many events) and a few others run small callbacks (an event
handler, a queue hand-off), back to back or, with --duty, that share of the time. The
server CPU per request then leaves out what those took (each measures its own thread
CPU), and the manager's work rate during the load, against idle seconds before it,
shows what serving cost the loop. With --duty below 1 the loop has time to spare, and
the process CPU above those idle seconds is what a review cost both threads together.
--switch-interval sets the server's `sys.setswitchinterval`: how long a thread that
holds the GIL keeps it while another waits. --loop picks the event loop of both the
server's loops (the manager's and the webhook thread's): asyncio's own, or uvloop's.
The server's peak resident size is printed after each path's run.

With --hogs N, N other processes spin on the CPU while the reviews are posted, as the
API server, etcd, the scheduler and kube-controller-manager do during a scale-up: the
server's threads then wait for a CPU as well as for each other. With --busy too, a
review can wait for the GIL held by the manager thread while the OS has that thread
off the CPU; without --busy it waits only for a CPU (what a webhook in a process of
its own would see).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.processes import cpu_seconds, memory_kib
from leaderworkerset.api.leaderworkerset import constants as c

JSON = dict[str, Any]
NAMESPACE = "default"
LWS = "bench"
MUTATE = "/mutate--v1-pod"
VALIDATE = "/validate--v1-pod"


# -- what is admitted -------------------------------------------------------------------


def pod(index: int, worker: int, *, hash_mode: bool, size: int, placed: bool) -> JSON:
    """A pod as the API server hands it to the webhook: defaulted, with the service
    account volume, tolerations and managed fields its creator's request produced."""
    leader = worker == 0
    labels = {c.LABEL_SET_NAME: LWS, c.LABEL_TEMPLATE_REVISION_HASH: "5d8f9c7b4", "app": "x"}
    annotations = {c.ANNOTATION_SIZE: str(size)}
    if placed:
        annotations[c.ANNOTATION_SUBGROUP_SIZE] = "4"
        annotations[c.ANNOTATION_EXCLUSIVE_TOPOLOGY] = "zone"
        annotations[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] = "rack"
    name = f"{LWS}-{index}" if leader else f"{LWS}-{index}-{worker}"
    meta: JSON = {"namespace": NAMESPACE, "labels": labels, "annotations": annotations}
    if leader:
        labels[c.LABEL_WORKER_INDEX] = "0"
    else:
        key = uuid.uuid4().hex + "01234567"
        labels[c.LABEL_GROUP_INDEX] = key if hash_mode else str(index)
        labels[c.LABEL_GROUP_KEY] = key
        annotations[c.ANNOTATION_LEADER_NAME] = f"{LWS}-{index}"
    if leader and hash_mode:
        meta["generateName"] = f"{LWS}-5d8f9c7b4-"
    else:
        meta["name"] = name
        labels["statefulset.kubernetes.io/pod-name"] = name
        labels["apps.kubernetes.io/pod-index"] = str(worker or index)
    owner = "ReplicaSet" if leader and hash_mode else "StatefulSet"
    meta["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": owner, "name": LWS, "uid": str(uuid.uuid4())}
    ]
    meta["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}},
                "f:spec": {"f:containers": {'k:{"name":"main"}': {"f:image": {}, "f:name": {}}}},
            },
        }
    ]
    mount = "/var/run/secrets/kubernetes.io/serviceaccount"
    spec: JSON = {
        "volumes": [
            {
                "name": "kube-api-access-x",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt"}]}},
                    ],
                    "defaultMode": 420,
                },
            }
        ],
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m"}},
                "volumeMounts": [
                    {"name": "kube-api-access-x", "readOnly": True, "mountPath": mount}
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute"}
            for t in ("not-ready", "unreachable")
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if not (leader and hash_mode):
        spec["hostname"], spec["subdomain"] = name, LWS
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {}}


def review(obj: JSON) -> bytes:
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": NAMESPACE,
        "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:statefulset-controller"},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )


def cached_objects(groups: int, size: int, hash_mode: bool) -> list[JSON]:
    """The LeaderWorkerSet and its live pods, as the server's caches list them."""
    identity = c.GROUP_IDENTITY_HASH if hash_mode else c.GROUP_IDENTITY_ORDINAL
    lws = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": LWS, "namespace": NAMESPACE, "uid": "u", "resourceVersion": "1"},
        "spec": {"replicas": groups, "groupIdentity": identity},
    }
    objects = [lws]
    for index in range(groups):
        key = uuid.uuid4().hex + "01234567"
        for worker in range(size):
            member = pod(index, worker, hash_mode=False, size=size, placed=False)
            meta = member["metadata"]
            meta["labels"][c.LABEL_GROUP_KEY] = key
            meta["labels"][c.LABEL_WORKER_INDEX] = str(worker)
            meta.update(uid=f"{index}-{worker}", resourceVersion="1")
            member["status"] = {"phase": "Running"}
            objects.append(member)
    return objects


# -- the server process -------------------------------------------------------------------


class _StaticLister:
    def __init__(self, objects: list[JSON]) -> None:
        self.objects = objects

    async def list(self, resource: Any, namespace: str | None = None, **kwargs: Any) -> JSON:
        items = [o for o in self.objects if o["kind"] == resource.kind]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    async def watch(self, resource: Any, namespace: str | None = None, **kwargs: Any) -> Any:
        await asyncio.Event().wait()
        yield {}


class _Busy:
    """The manager's loop kept busy; counts its work and the thread CPU it took."""

    SMALL_TASKS = 4
    SMALL_UNITS = 20  # ~50 us of Python each
    # Of the busy time below full duty: most in chunks, the rest in callbacks.
    CHUNK_SHARE = 0.8
    SMALL_SHARE = (1 - CHUNK_SHARE) / SMALL_TASKS

    def __init__(self, stats_file: Path, duty: float = 1.0) -> None:
        self.stats_file = stats_file
        self.duty = duty
        self.units = 0  # units of work done by the chunks
        self.cpu = 0.0  # thread CPU the chunks and callbacks took
        self.unit_seconds = self._calibrate()

    @staticmethod
    def _work(units: int) -> int:
        total = 0
        for _ in range(units):
            for i in range(100):  # bytecode, as a reconcile is: the GIL can be asked back
                total += i
        return total

    def _calibrate(self) -> float:
        began = time.perf_counter()
        self._work(20_000)
        return (time.perf_counter() - began) / 20_000

    async def chunks(self) -> None:
        """Back to back; below full duty, on a fixed schedule (the same work every
        second, however the reviews slow it), catching up when late."""
        draw = random.Random(1)
        due = time.perf_counter()
        while True:
            seconds = draw.uniform(0.005, 0.020)
            units = int(seconds / self.unit_seconds)
            began = time.thread_time()
            self._work(units)
            self.cpu += time.thread_time() - began
            self.units += units
            due += seconds / (self.duty * self.CHUNK_SHARE)
            await asyncio.sleep(0 if self.duty >= 1 else due - time.perf_counter())

    async def callbacks(self) -> None:
        due = time.perf_counter()
        while True:
            began = time.thread_time()
            self._work(self.SMALL_UNITS)
            self.cpu += time.thread_time() - began
            due += self.SMALL_UNITS * self.unit_seconds / (self.duty * self.SMALL_SHARE)
            await asyncio.sleep(0 if self.duty >= 1 else due - time.perf_counter())

    def start(self) -> list[asyncio.Task[None]]:
        signal.signal(signal.SIGUSR1, lambda *_: self.write_stats())
        return [asyncio.create_task(self.chunks())] + [
            asyncio.create_task(self.callbacks()) for _ in range(self.SMALL_TASKS)
        ]

    def write_stats(self) -> None:
        stats = {
            "units": self.units,
            "cpu": self.cpu,
            "at": time.perf_counter(),
            "process": time.process_time(),
        }
        scratch = self.stats_file.with_suffix(".tmp")
        scratch.write_bytes(orjson.dumps(stats))
        scratch.replace(self.stats_file)


def read_busy(server: subprocess.Popen[bytes], stats_file: Path) -> dict[str, float]:
    """The busy loop's counters, written by the server on SIGUSR1."""
    stats_file.unlink(missing_ok=True)
    server.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not stats_file.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not write its busy counters")
        time.sleep(0.01)
    stats: dict[str, float] = orjson.loads(stats_file.read_bytes())
    return stats


async def serve(
    cert_dir: Path,
    port_file: Path,
    groups: int,
    size: int,
    hash_mode: bool,
    busy: bool = False,
    switch_interval: float | None = None,
    duty: float = 1.0,
) -> None:
    from leaderworkerset.caches import build_caches
    from leaderworkerset.group.options import ControllerOptions
    from leaderworkerset.runtime.webhook import WebhookServer
    from leaderworkerset.webhooks.admission import register_webhooks

    caches = build_caches(_StaticLister(cached_objects(groups, size, hash_mode)))
    for informer in caches.all():
        informer.start()
    for informer in caches.all():
        await informer.wait_synced()
    server = WebhookServer(cert_dir=cert_dir, host="127.0.0.1", port=0)
    register_webhooks(server, caches, ControllerOptions())
    await server.start()
    if switch_interval is not None:
        sys.setswitchinterval(switch_interval / 1000)
    tasks = _Busy(cert_dir / "busy.json", duty).start() if busy else []
    await asyncio.to_thread(port_file.write_text, str(server.port))
    await asyncio.Event().wait()
    del tasks


# -- the client -----------------------------------------------------------------------------


async def post_all(
    port: int, ca: Path, path: str, bodies: list[bytes], concurrency: int, rate: float = 0.0
) -> list[float]:
    """Post every body over `concurrency` connections: each as soon as a connection is
    free, or with `rate`, the i-th not before i/rate seconds (as pods are created at
    scale, whatever the webhook's own pace)."""
    context = ssl.create_default_context(cafile=str(ca))
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    latencies: list[float] = []
    queue = iter(enumerate(bodies))
    began = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for index, body in queue:
                if rate:
                    await asyncio.sleep(began + index / rate - time.perf_counter())
                started = time.perf_counter()
                async with session.post(
                    f"https://127.0.0.1:{port}{path}",
                    data=body,
                    headers={"Content-Type": "application/json"},
                ) as response:
                    answer = orjson.loads(await response.read())
                latencies.append(time.perf_counter() - started)
                assert answer["response"]["allowed"], answer

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def run(args: argparse.Namespace, src: Path | None) -> None:
    from leaderworkerset.runtime.pki import TLS_CERT, TLS_KEY, generate_key_pairs

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        pairs = generate_key_pairs(
            ca_name="bench",
            ca_organization="bench",
            dns_names=["localhost"],
            ip_addresses=["127.0.0.1"],
        )
        Path(tmp, TLS_CERT).write_bytes(pairs.cert)
        Path(tmp, TLS_KEY).write_bytes(pairs.key)
        ca = Path(tmp, "ca.crt")
        ca.write_bytes(pairs.ca_cert)
        port_file = Path(tmp, "port")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(src or root / "src"), str(root), env.get("PYTHONPATH", "")]
        )
        command = [sys.executable, "-m", "bench.webhook_load", "--serve", tmp]
        command += ["--groups", str(args.groups), "--size", str(args.size)]
        command += ["--hash"] if args.hash else []
        command += ["--busy", "--duty", str(args.duty)] if args.busy else []
        command += ["--loop", args.loop]
        if args.switch_interval is not None:
            command += ["--switch-interval", str(args.switch_interval)]
        stats_file = Path(tmp, "busy.json")
        server = subprocess.Popen(command, env=env, cwd=root)
        hogs: list[subprocess.Popen[bytes]] = []
        try:
            deadline = time.monotonic() + 120
            while not port_file.exists() or not port_file.read_text():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the webhook server did not start")
                time.sleep(0.1)
            port = int(port_file.read_text())
            bodies = [
                review(pod(i, w, hash_mode=args.hash, size=args.size, placed=i % 2 == 1))
                for i in range(args.requests // args.size + 1)
                for w in range(args.size)
            ][: args.requests]
            label = f"{src or 'this tree'} ({'Hash' if args.hash else 'Ordinal'}, {args.loop})"
            if args.busy:
                label += ", busy manager loop"
            if args.busy and args.duty < 1:
                label += f" {args.duty:.0%} of the time"
            if args.hogs:
                label += f", {args.hogs} spinning processes beside it"
            if args.switch_interval is not None:
                label += f", switch interval {args.switch_interval} ms"
            print(f"{label}: {len(bodies)} reviews of {statistics.mean(map(len, bodies)):.0f} B")
            asyncio.run(post_all(port, ca, VALIDATE, bodies[:200], args.concurrency))  # warm
            profiler = None
            if args.profile:
                profiler = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "--pid",
                        str(server.pid),
                        "--format",
                        "raw",
                        "--rate",
                        "200",
                        "--nonblocking",
                        "-o",
                        str(args.profile),
                    ],
                    stdout=subprocess.DEVNULL,
                )
                time.sleep(1)
            idle_rate = idle_cpu = 0.0
            if args.busy:
                first = read_busy(server, stats_file)
                time.sleep(3)
                second = read_busy(server, stats_file)
                idle_rate = (second["units"] - first["units"]) / (second["at"] - first["at"])
                idle_cpu = (second["process"] - first["process"]) / (second["at"] - first["at"])
            hogs += [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.hogs)
            ]
            for path in (VALIDATE, MUTATE):
                busy_before = read_busy(server, stats_file) if args.busy else {}
                before = cpu_seconds(server.pid)
                started = time.perf_counter()
                latencies = asyncio.run(
                    post_all(port, ca, path, bodies, args.concurrency, args.rate)
                )
                wall = time.perf_counter() - started
                cpu = cpu_seconds(server.pid) - before
                manager = ""
                if args.busy:
                    busy_after = read_busy(server, stats_file)
                    cpu -= busy_after["cpu"] - busy_before["cpu"]
                    span = busy_after["at"] - busy_before["at"]
                    rate = (busy_after["units"] - busy_before["units"]) / span
                    # All the process took beyond what it takes without reviews: what
                    # serving cost both threads, switching the GIL included.
                    extra = busy_after["process"] - busy_before["process"] - idle_cpu * span
                    manager = (
                        f"  manager work {rate / idle_rate:4.0%} of idle, process CPU"
                        f" {extra / len(bodies) * 1e6:6.1f} us/request above idle"
                    )
                quantiles = statistics.quantiles(latencies, n=100)
                peak = memory_kib(server.pid)[1] / 1024
                print(
                    f"  {path:18s} server CPU {cpu / len(bodies) * 1e6:7.1f} us/request  "
                    f"{len(bodies) / wall:6.0f} requests/s  client-side latency "
                    f"p50 {quantiles[49] * 1e3:6.2f} ms  p99 {quantiles[98] * 1e3:6.2f} ms"
                    f"  peak RSS {peak:5.1f} MiB" + manager
                )
            if profiler is not None:
                profiler.send_signal(2)
                profiler.wait(30)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait(10)
            server.terminate()
            server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hash", action="store_true", help="a Hash-mode LeaderWorkerSet")
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--groups", type=int, default=1000, help="groups in the server's cache")
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--baseline", type=Path, help="also serve from this src/ tree")
    parser.add_argument("--profile", type=Path, help="py-spy collapsed stacks of the server")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="reviews per second (default: back to back)"
    )
    parser.add_argument(
        "--busy", action="store_true", help="keep the server's main loop busy, as at scale"
    )
    parser.add_argument(
        "--duty", type=float, default=1.0, help="with --busy, the share of time it is busy"
    )
    parser.add_argument(
        "--switch-interval", type=float, help="the server's GIL switch interval, in ms"
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the event loop of the server's manager and webhook threads",
    )
    parser.add_argument(
        "--hogs", type=int, default=0, help="processes spinning on the CPU during the load"
    )
    parser.add_argument("--serve", metavar="CERT_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        cert_dir = Path(args.serve)
        if args.loop == "uvloop":
            import uvloop

            # The policy makes both: asyncio.run's loop here and the webhook
            # thread's asyncio.new_event_loop().
            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        asyncio.run(
            serve(
                cert_dir,
                cert_dir / "port",
                args.groups,
                args.size,
                args.hash,
                busy=args.busy,
                switch_interval=args.switch_interval,
                duty=args.duty,
            )
        )
        return
    if args.baseline:
        run(args, args.baseline.resolve())
    run(args, None)


if __name__ == "__main__":
    main()
