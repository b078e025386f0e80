"""A controller: cache events mapped to keys, a work queue, and workers reconciling keys.

Sources are informers plus a map function from an object to the keys to
reconcile (its own key, its controlling owner's, a label's) and predicates that
drop events not worth a reconcile. Handlers only enqueue, so the watch loops
never wait on a reconcile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from leaderworkerset.api.objects import JSON, controller_ref, meta_of
from leaderworkerset.api.reconcile_errors import ReconcileError
from leaderworkerset.runtime.cache import AddHandler, DeleteHandler, Informer, UpdateHandler
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiError
from leaderworkerset.runtime.indexes import object_key
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.queue import Clock, RateLimiter, WorkQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    """``requeue_after`` wins over ``requeue``; both unset means done until the next event."""

    requeue: bool = False
    requeue_after: float | None = None


Reconciler = Callable[[str], Awaitable[Result | None]]
MapFunc = Callable[[JSON], Iterable[str]]


# -- mapping objects to keys ---------------------------------------------------------


def own_key(obj: JSON) -> Iterable[str]:
    return (object_key(obj),)


def owner_key(kind: str, api_version: str) -> MapFunc:
    """The key of the object's controlling owner, if that is a ``kind`` of the API group.

    Only the group is compared, as controller-runtime does, so an owner reference
    written under another version of the same API still maps.
    """
    group = _group(api_version)

    def map_owner(obj: JSON) -> Iterable[str]:
        ref = controller_ref(obj)
        if ref is None or ref.get("kind") != kind or _group(ref.get("apiVersion", "")) != group:
            return ()
        namespace = meta_of(obj).get("namespace")
        return (f"{namespace}/{ref['name']}" if namespace else str(ref["name"]),)

    return map_owner


def label_key(label: str) -> MapFunc:
    """``namespace/<value of label>``: e.g. pods to the LeaderWorkerSet named in their label."""

    def map_label(obj: JSON) -> Iterable[str]:
        meta = meta_of(obj)
        value = (meta.get("labels") or {}).get(label)
        if not value:
            return ()
        namespace = meta.get("namespace")
        return (f"{namespace}/{value}" if namespace else str(value),)

    return map_label


def _group(api_version: str) -> str:
    group, _, _version = api_version.rpartition("/")
    return group


# -- predicates ----------------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    """Which events of a source deserve a reconcile; None lets that kind of event through."""

    create: Callable[[JSON], bool] | None = None
    update: Callable[[JSON, JSON], bool] | None = None
    delete: Callable[[JSON], bool] | None = None

    @classmethod
    def for_objects(cls, accept: Callable[[JSON], bool]) -> Predicate:
        """The same test for every event; an update passes if either side passes."""
        return cls(accept, lambda old, new: accept(old) or accept(new), accept)


# What a status write changes in metadata besides the status itself.
_STATUS_WRITE_TOUCHES = frozenset({"resourceVersion", "managedFields"})


def _beyond_status(obj: JSON) -> tuple[object, dict[str, object]]:
    meta = {k: v for k, v in meta_of(obj).items() if k not in _STATUS_WRITE_TOUCHES}
    return obj.get("spec"), meta


# Lets through every change but a status write: spec, labels, annotations, owners,
# finalizers, deletion. A controller's own status writes then do not wake it again.
NOT_STATUS_ONLY = Predicate(update=lambda old, new: _beyond_status(old) != _beyond_status(new))


# -- handlers outside any controller ---------------------------------------------------


def add_replica_handler(
    informer: Informer,
    *,
    on_add: AddHandler | None = None,
    on_update: UpdateHandler | None = None,
    on_delete: DeleteHandler | None = None,
) -> None:
    """Hang handlers on `informer` at once, on every replica, leader or standby.

    Only for what serves on every replica: the admission webhooks answer wherever
    the API server sends a review, so what they read from a cache's events must be
    current on a standby too. Anything that serves a controller goes through
    :meth:`Controller.add_side_handler`, so that a standby keeps none of it; this
    function and the controller are the only places that call ``add_handler``."""
    informer.add_handler(on_add, on_update, on_delete)


# -- the controller --------------------------------------------------------------------


# A source's add, update and delete handlers; a side handler has only some of them.
_Handlers = tuple[AddHandler | None, UpdateHandler | None, DeleteHandler | None]


class Controller:
    """Reconciles keys from its sources with ``workers`` concurrent workers.

    Register sources with :meth:`watch`; their events reach the queue from
    :meth:`start` on. The informers are shared and owned by the caller, who starts
    and stops them; the controller only waits for them to sync.
    """

    def __init__(
        self,
        name: str,
        reconcile: Reconciler,
        *,
        workers: int = 1,
        rate_limiter: RateLimiter | None = None,
        clock: Clock | None = None,
        sync_timeout: float = 120.0,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        """`metrics`: the process's (the Manager's); without, ones of its own."""
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.workers = workers
        self.sync_timeout = sync_timeout
        self.metrics = metrics or RuntimeMetrics()
        self.queue = WorkQueue(
            name, controller=name, rate_limiter=rate_limiter, clock=clock, metrics=self.metrics
        )
        self._reconcile = reconcile
        self._informers: list[Informer] = []
        self._sources: list[tuple[Informer, _Handlers]] = []
        self._connected = False
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._active = self.metrics.active_workers.labels(controller=name)
        self._time = self.metrics.reconcile_time.labels(controller=name)
        self._errors = self.metrics.reconcile_errors.labels(controller=name)
        self._panics = self.metrics.reconcile_panics.labels(controller=name)
        self.metrics.terminal_reconcile_errors.labels(controller=name)
        self.metrics.reconcile_timeouts.labels(controller=name)
        self._totals = {
            result: self.metrics.reconcile_total.labels(controller=name, result=result)
            for result in ("success", "error", "requeue", "requeue_after")
        }

    # -- sources -------------------------------------------------------------------------

    def watch(
        self,
        informer: Informer,
        map_func: MapFunc = own_key,
        *predicates: Predicate,
        pace: float | None = None,
    ) -> None:
        """Enqueue ``map_func(obj)`` for each event of ``informer`` all predicates pass.

        An update enqueues the keys of both the old and the new object, so an
        object that moved to another owner or label value wakes up both. With
        ``pace``, a key is reconciled at most once per ``pace`` seconds for this
        source's events (see :meth:`WorkQueue.add_paced`).
        """
        enqueue: Callable[[str], None] = self.queue.add
        if pace:
            interval = pace

            def enqueue(key: str) -> None:
                self.queue.add_paced(key, interval)

        def on_add(obj: JSON) -> None:
            if all(p.create is None or p.create(obj) for p in predicates):
                for key in map_func(obj):
                    enqueue(key)

        def on_update(old: JSON, new: JSON) -> None:
            if all(p.update is None or p.update(old, new) for p in predicates):
                for key in {*map_func(old), *map_func(new)}:
                    enqueue(key)

        def on_delete(obj: JSON) -> None:
            if all(p.delete is None or p.delete(obj) for p in predicates):
                for key in map_func(obj):
                    enqueue(key)

        self._add_source(informer, (on_add, on_update, on_delete))

    def add_side_handler(
        self,
        informer: Informer,
        *,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Also run these handlers for `informer`'s events, from when this controller
        connects, ahead of the sources watched after it. This is how anything that
        serves a controller (a reconciler's memory of deletions, the gate removals it
        expects, the metrics it keeps) hangs on a cache: it is then kept only by the
        replica that reconciles, never piled up on a standby that queues nothing.
        What must run on every replica uses :func:`add_replica_handler` instead."""
        self._add_source(informer, (on_add, on_update, on_delete))

    def on_delete(self, informer: Informer, handler: DeleteHandler) -> None:
        """:meth:`add_side_handler` for deletions only."""
        self.add_side_handler(informer, on_delete=handler)

    def _add_source(self, informer: Informer, handlers: _Handlers) -> None:
        self._sources.append((informer, handlers))
        if informer not in self._informers:
            self._informers.append(informer)
        if self._connected:
            informer.add_handler(*handlers)

    def connect(self) -> None:
        """Start taking events from every source: each cache first replays what it holds
        as adds. Called by :meth:`start`, so a standby replica (whose controllers do not
        start) keeps no queue of every change it saw while another led."""
        if self._connected:
            return
        self._connected = True
        for informer, handlers in self._sources:
            informer.add_handler(*handlers)

    def watch_owned(
        self,
        informer: Informer,
        owner_kind: str,
        owner_api_version: str,
        *predicates: Predicate,
        pace: float | None = None,
    ) -> None:
        self.watch(informer, owner_key(owner_kind, owner_api_version), *predicates, pace=pace)

    def watch_labelled(
        self, informer: Informer, label: str, *predicates: Predicate, pace: float | None = None
    ) -> None:
        self.watch(informer, label_key(label), *predicates, pace=pace)

    def enqueue(self, key: str, after: float | None = None) -> None:
        if after:
            self.queue.add_after(key, after)
        else:
            self.queue.add(key)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Wait for every source's cache to sync, then start the workers."""
        if self._started:
            raise RuntimeError(f"controller {self.name} already started")
        self._started = True
        for informer in self._informers:
            if not await informer.wait_synced(self.sync_timeout):
                raise TimeoutError(
                    f"controller {self.name}: cache {informer.name} not synced after "
                    f"{self.sync_timeout}s (was it started?)"
                )
        self.connect()
        self.metrics.max_concurrent_reconciles.labels(controller=self.name).set(self.workers)
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name} worker {i}")
            for i in range(self.workers)
        ]
        log.info("controller %s: started %d workers", self.name, self.workers)

    async def stop(self, deadline: float = 30.0) -> None:
        """Stop taking keys, give in-flight reconciles ``deadline`` seconds, then cancel them."""
        self.queue.shutdown()
        tasks, self._tasks = self._tasks, []
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=deadline)
        for task in pending:
            task.cancel()
        if pending:
            log.warning(
                "controller %s: cancelled %d reconciles still running after %.1fs",
                self.name,
                len(pending),
                deadline,
            )
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def running(self) -> bool:
        return any(not task.done() for task in self._tasks)

    # -- workers --------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                await self._reconcile_one(key)
            finally:
                self.queue.done(key)

    async def _reconcile_one(self, key: str) -> None:
        self._active.inc()
        started = time.perf_counter()
        try:
            result = await self._reconcile(key) or Result()
        except Exception as exc:
            self._errors.inc()
            self._totals["error"].inc()
            surprise = not isinstance(exc, (ApiError, ReconcileError))
            if surprise and not isinstance(exc, TRANSPORT_ERRORS):
                self._panics.inc()
            # API errors (conflicts above all) are routine; only surprises get a traceback.
            log.error(
                "controller %s: reconcile %s failed: %s",
                self.name,
                key,
                exc,
                exc_info=surprise,
            )
            self.queue.add_rate_limited(key)
            return
        finally:
            self._time.observe(time.perf_counter() - started)
            self._active.dec()
        if result.requeue_after is not None and result.requeue_after > 0:
            self._totals["requeue_after"].inc()
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
        elif result.requeue:
            self._totals["requeue"].inc()
            self.queue.add_rate_limited(key)
        else:
            self._totals["success"].inc()
            self.queue.forget(key)
