"""One LIST + WATCH of bound pods across all namespaces, resumed after errors."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

import orjson

from leaderworkerset.api.objects import meta_of
from leaderworkerset.api.resources import PODS
from leaderworkerset.runtime.cache import Backoff, watch_was_healthy
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError
from lws_localcluster.nodesim.api import JsonObj, list_all

log = logging.getLogger(__name__)

# Unscheduled pods are of no interest to a kubelet; the API server filters them out.
BOUND_PODS = "spec.nodeName!="
MAX_BACKOFF = 30.0


class PodWatch:
    """Feeds ``on_event(type, pod)`` for every change and ``on_relist(pods)`` after each
    full LIST (initially and whenever the watch's resourceVersion has expired)."""

    def __init__(
        self,
        api: ApiClient,
        on_event: Callable[[str, JsonObj], None],
        on_relist: Callable[[list[JsonObj]], None],
        field_selector: str = BOUND_PODS,
    ) -> None:
        self._api = api
        self._on_event = on_event
        self._on_relist = on_relist
        self._field_selector = field_selector
        self.synced = asyncio.Event()
        self.relists = 0

    async def run(self) -> None:
        resource_version: str | None = None
        backoff = Backoff(initial=0.5, cap=MAX_BACKOFF)
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            events = 0
            try:
                if resource_version is None:
                    items, resource_version = await list_all(
                        self._api, PODS, field_selector=self._field_selector
                    )
                    self.relists += 1
                    self._on_relist(items)
                    self.synced.set()
                # Jittered so several simulators do not reconnect in lockstep.
                timeout = random.randint(240, 360)
                async for event in self._api.watch(
                    PODS,
                    resource_version=resource_version,
                    field_selector=self._field_selector,
                    timeout_seconds=timeout,
                ):
                    kind = str(event.get("type"))
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj, "WATCH", "pods")
                    resource_version = meta_of(obj).get("resourceVersion", resource_version)
                    events += 1
                    if kind != "BOOKMARK":
                        self._on_event(kind, obj)
            except ApiError as err:
                if err.gone:
                    log.info("pod watch expired at %s, relisting", resource_version)
                    resource_version = None
                    continue
                failure: Exception | None = err
            except (*TRANSPORT_ERRORS, orjson.JSONDecodeError) as err:
                failure = err
            else:
                failure = None
            # As the manager's caches do; backing off after a burst left pods unready
            # for up to MAX_BACKOFF.
            if watch_was_healthy(events, loop.time() - started):
                backoff.reset()
                if failure is None:
                    continue
            delay = backoff.next()
            log.warning("pod watch interrupted, retrying in %.1fs: %s", delay, failure)
            await asyncio.sleep(delay)
