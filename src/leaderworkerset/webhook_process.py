"""The admission process's program: the webhooks with caches and a client of their own.

`runtime.admission_process` forks it (and says why); this module is what runs in it.
It serves the same handlers the manager would (`register_webhooks`), on the same port
and certificate files. What the handlers read comes from its own watches:
- every LeaderWorkerSet, for the pod webhook's group identity and replacement policy;
- leader pods, only once a Hash-mode LeaderWorkerSet exists, and cut down to what
  the hostname check reads: a Hash leader must not get a hostname a live group holds,
  and Ordinal-only clusters never need that cache.

Leaders only, where the in-process webhook reads the controllers' cache of every pod:
a group's hostname is then held while its leader pod exists, not also while its last
workers terminate after it. Watching every pod here decoded each pod event twice on
a node (the manager decodes it too) and, in a 1,000 x 8 Hash run, took 6 of the 18
CPU-seconds this process used and most of its tail latency, as the decoding held the
interpreter while reviews waited. What is given up is a check against a 32-bit
hostname drawn at random colliding with a group whose leader is gone and whose
workers have not finished yet, for the seconds they take to terminate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from prometheus_client import generate_latest

from leaderworkerset.admission_dryrun import dry_run_check
from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.runtime.admission_process import REPORT_PERIOD, ChildLink, answer_metrics
from leaderworkerset.runtime.cache import Informer, strip_managed_fields
from leaderworkerset.runtime.client import LEADERWORKERSETS, PODS, ApiClient
from leaderworkerset.runtime.eventloop import loop_factory
from leaderworkerset.runtime.manager import ManagerOptions
from leaderworkerset.runtime.metrics import REGISTRY, observe_client_response
from leaderworkerset.runtime.webhook import WebhookServer
from leaderworkerset.webhooks.admission import register_webhooks

log = logging.getLogger("admission-process")

LEADER_PODS = f"{c.LABEL_SET_NAME},{c.LABEL_WORKER_INDEX}=0"
# A Hash leader admitted while the pod cache lists for the first time waits this long
# for it; the API server's own timeout for the call is 10 s.
PODS_SYNC_WAIT = 8.0


def hostname_fields(pod: JSON) -> JSON:
    """What the hostname check reads of a pod: its name, the LeaderWorkerSet and group
    key labels, and whether it finished."""
    meta = meta_of(pod)
    labels = meta.get("labels") or {}
    kept = {k: labels[k] for k in (c.LABEL_SET_NAME, c.LABEL_GROUP_KEY) if k in labels}
    out: JSON = {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": kept,
        }
    }
    phase = (pod.get("status") or {}).get("phase")
    if phase:
        out["status"] = {"phase": phase}
    return out


class AdmissionCaches:
    """The admission process's caches: LeaderWorkerSets from the start, leader pods
    from the first Hash-mode LeaderWorkerSet on."""

    def __init__(self, client: ApiClient) -> None:
        self.leaderworkersets = Informer(client, LEADERWORKERSETS, transform=strip_managed_fields)
        self.pods = Informer(
            client,
            PODS,
            label_selector=LEADER_PODS,
            label_indexes=[c.LABEL_SET_NAME],
            transform=hostname_fields,
        )
        self._pods_started = False
        self.leaderworkersets.add_handler(self._seen, lambda _, new: self._seen(new))

    def _seen(self, lws: JSON) -> None:
        if (lws.get("spec") or {}).get("groupIdentity") == c.GROUP_IDENTITY_HASH:
            self.start_pods()

    def start_pods(self) -> None:
        if not self._pods_started:
            self._pods_started = True
            log.info("watching leader pods for Hash-mode hostnames")
            self.pods.start()

    async def pods_ready(self) -> None:
        self.start_pods()
        if not await self.pods.wait_synced(PODS_SYNC_WAIT):
            raise TimeoutError("the pod cache has not synced; retry the admission")

    async def stop(self) -> None:
        await self.leaderworkersets.stop()
        if self._pods_started:
            await self.pods.stop()


def serve_admission(
    options: ManagerOptions, *, gang_scheduling: bool, event_loop: str
) -> Callable[[ChildLink], int]:
    """The admission process's main, for `AdmissionProcess`."""

    def main(link: ChildLink) -> int:
        with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
            return runner.run(_serve(options, link, gang_scheduling=gang_scheduling))

    return main


async def _serve(options: ManagerOptions, link: ChildLink, *, gang_scheduling: bool) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    client = ApiClient.from_kubeconfig(
        options.kubeconfig,
        qps=options.qps,
        burst=options.burst,
        user_agent=options.user_agent,
        on_response=observe_client_response,
    )
    server = WebhookServer(
        cert_dir=options.cert_dir,
        host=options.webhook_host,
        port=options.webhook_port,
        tls=options.tls,
    )

    # A reload waits for the server's thread; not on this loop, which that thread's
    # calls to the API client may be waiting for.
    def reload() -> None:
        loop.run_in_executor(None, server.reload_certificates)

    link.on_stop_and_reload(loop, stop.set, reload)
    caches = AdmissionCaches(client)
    register_webhooks(
        server,
        caches,
        ControllerOptions(gang_scheduling=gang_scheduling),
        client,
        template_check=dry_run_check(client),
        pods_ready=caches.pods_ready,
    )
    metrics = asyncio.create_task(
        answer_metrics(link, lambda: generate_latest(REGISTRY)), name="admission-metrics"
    )
    code = 0
    try:
        await server.start()
        caches.leaderworkersets.start()
        reporter = asyncio.create_task(_report(server, link), name="admission-report")
        await stop.wait()
        reporter.cancel()
    except Exception:
        log.exception("the admission process failed")
        code = 1
    finally:
        link.report(serving=False, port=server.port, certificate=server.certificate())
        await server.stop(options.graceful_shutdown_timeout)
        await caches.stop()
        metrics.cancel()
        await client.close()
    return code


async def _report(server: WebhookServer, link: ChildLink) -> None:
    while True:
        link.report(serving=server.is_serving(), port=server.port, certificate=server.certificate())
        await asyncio.sleep(REPORT_PERIOD)
