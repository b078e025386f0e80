"""How the watch cache scales: time to sync, memory per object, events handled per second.

    .venv/bin/python -m bench.cache_bench [--kubeconfig PATH] [--pods 10000]

Without ``--kubeconfig`` a local control plane is started for the run. The pods
carry a scheduling gate, so without nodes they stay Pending and the scheduler
leaves them alone: every watch event the cache sees is one this benchmark caused.
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import secrets
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from leaderworkerset.api.resources import NAMESPACES, PODS
from leaderworkerset.runtime.cache import Informer, strip_managed_fields
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.indexes import label_index_name

JSON = dict[str, Any]
GROUP_LABEL = "bench.leaderworkerset.sigs.k8s.io/group"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def pod(name: str, group: int) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "cache-bench", GROUP_LABEL: str(group)}},
        "spec": {
            "schedulingGates": [{"name": "bench.leaderworkerset.sigs.k8s.io/hold"}],
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


async def bounded(concurrency: int, jobs: list[Callable[[], Awaitable[Any]]]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def run(job: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            for attempt in range(5):
                try:
                    await job()
                    return
                except ApiError as exc:
                    # The API server sheds load with 429s; anything else is a real failure.
                    if exc.status != 429 or attempt == 4:
                        raise
                await asyncio.sleep(0.5 * (attempt + 1))

    await asyncio.gather(*(run(job) for job in jobs))


async def wait_for(probe: Callable[[], Awaitable[bool]], what: str, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while not await probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {within}s")
        await asyncio.sleep(0.2)


async def create_namespace(api: ApiClient) -> str:
    name = f"cache-bench-{secrets.token_hex(3)}"
    await api.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )

    async def has_service_account() -> bool:
        path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
        try:
            await api.request("GET", path)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    # Pods are refused until the service-account controller has made "default".
    await wait_for(has_service_account, "the default service account")
    return name


def report(label: str, value: str) -> None:
    print(f"  {label:<46} {value}", flush=True)


async def bench(kubeconfig: Path, pods: int, concurrency: int, keep: bool) -> None:
    api = ApiClient.from_kubeconfig(kubeconfig, qps=5000, burst=5000)
    namespace = await create_namespace(api)
    print(f"namespace {namespace}, {pods} pods, {concurrency} requests in flight", flush=True)
    try:
        started = time.perf_counter()
        await bounded(
            concurrency,
            [partial(api.create, PODS, pod(f"p-{i:05}", i % 100), namespace) for i in range(pods)],
        )
        elapsed = time.perf_counter() - started
        report("pods created", f"{pods} in {elapsed:.1f} s ({pods / elapsed:.0f}/s)")

        # 1. A fresh cache: time to synced and resident memory per object.
        gc.collect()
        rss_before = rss_bytes()
        informer = Informer(api, PODS, namespace=namespace, label_indexes=[GROUP_LABEL])
        started = time.perf_counter()
        informer.start()
        if not await informer.wait_synced(600):
            raise TimeoutError("cache never synced")
        synced_in = time.perf_counter() - started
        gc.collect()
        rss_delta = rss_bytes() - rss_before
        report(
            "time to synced (paginated LIST, 500/page)", f"{synced_in:.2f} s ({len(informer)} pods)"
        )
        report("RSS delta per cached pod", f"{rss_delta / len(informer) / 1024:.2f} KiB")
        size = sum(len(orjson.dumps(obj)) for obj in informer.list()) / len(informer)
        report("JSON size per pod (for scale)", f"{size / 1024:.2f} KiB")

        # 2. The same on the Python heap alone, which RSS blurs with allocator slack;
        #    then with managedFields stripped on the way in.
        for label, transform in (
            ("heap per cached pod (tracemalloc)", None),
            ("  with managedFields stripped", strip_managed_fields),
        ):
            tracemalloc.start()
            traced_before, _ = tracemalloc.get_traced_memory()
            second = Informer(api, PODS, namespace=namespace, transform=transform)
            second.start()
            await second.wait_synced(600)
            await second.stop()
            gc.collect()
            traced_after, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            report(label, f"{(traced_after - traced_before) / len(second) / 1024:.2f} KiB")
            del second

        # 3. A relist that finds nothing changed: the cost of recovering from a 410.
        started = time.perf_counter()
        await informer._list_and_replace()
        report("relist with no changes (diff only)", f"{time.perf_counter() - started:.2f} s")

        # 4. Watch events end to end: relabel every pod and count the updates seen.
        updates = 0

        def on_update(old: JSON, new: JSON) -> None:
            nonlocal updates
            updates += 1

        informer.add_handler(on_update=on_update)
        started = time.perf_counter()
        await bounded(
            concurrency,
            [
                partial(
                    api.patch,
                    PODS,
                    f"p-{i:05}",
                    {"metadata": {"labels": {GROUP_LABEL: f"relabelled-{i % 7}"}}},
                    namespace=namespace,
                )
                for i in range(pods)
            ],
        )
        patched_in = time.perf_counter() - started

        async def all_seen() -> bool:
            return updates >= pods

        await wait_for(all_seen, "all updates", within=600)
        seen_in = time.perf_counter() - started
        report("patches sent", f"{pods} in {patched_in:.1f} s ({pods / patched_in:.0f}/s)")
        report(
            "watch events seen end to end",
            f"{updates} in {seen_in:.1f} s ({updates / seen_in:.0f}/s)",
        )
        values = informer.index_values(label_index_name(GROUP_LABEL))
        report("label index after relabel", f"{len(values)} values")

        # 5. The cache's own capacity: decode + store + re-index + handler per event,
        #    replayed from the events just seen, with no API server in the way.
        lines = [orjson.dumps({"type": "MODIFIED", "object": obj}) for obj in informer.list()]
        replay = seeded_replay(api, namespace, informer.list())
        started = time.perf_counter()
        for line in lines:
            replay._handle_event(orjson.loads(line))
        rate = len(lines) / (time.perf_counter() - started)
        report("cache processing capacity (no network)", f"{rate:,.0f} events/s")
        await informer.stop()
    finally:
        if not keep:
            with contextlib.suppress(ApiError):
                await api.delete(NAMESPACES, namespace)
        await api.close()


def seeded_replay(api: ApiClient, namespace: str, objects: list[JSON]) -> Informer:
    """A cache holding an older version of each object, under another label value,
    so that replaying the current versions updates and re-indexes every one."""
    replay = Informer(api, PODS, namespace=namespace, label_indexes=[GROUP_LABEL])
    replay.add_handler(on_update=lambda old, new: None)
    for obj in objects:
        # A copy of its own, so replacing it frees it, as in a real cache.
        older: JSON = orjson.loads(orjson.dumps(obj))
        older["metadata"].update(resourceVersion="0", labels={GROUP_LABEL: "before"})
        replay._apply(f"{namespace}/{older['metadata']['name']}", older)
    return replay


@contextlib.contextmanager
def cluster(kubeconfig: str | None) -> Iterator[Path]:
    if kubeconfig:
        yield Path(kubeconfig)
        return
    from lws_localcluster.controlplane import ControlPlane

    with tempfile.TemporaryDirectory(prefix="cache-bench-") as workdir:
        started = time.perf_counter()
        with ControlPlane(Path(workdir), name="cache-bench") as cp:
            print(f"control plane up in {time.perf_counter() - started:.1f} s", flush=True)
            yield cp.kubeconfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting one")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="keep the namespace afterwards")
    args = parser.parse_args()
    with cluster(args.kubeconfig) as kubeconfig:
        asyncio.run(bench(kubeconfig, args.pods, args.concurrency, args.keep))


if __name__ == "__main__":
    main()
