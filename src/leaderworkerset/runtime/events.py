"""An events.k8s.io/v1 recorder with client-go's series de-duplication.

Recording never blocks and never fails the caller: events go through a bounded queue
to one writer task, and write errors are logged. The same (regarding, related, reason,
action, note) seen again within the finish window is not a new Event but a `series`
update (count, lastObservedTime) of the first one; updates to one series are coalesced
so a hot loop costs at most one request in flight per series.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api.objects import JSON, format_micro_time, meta_of
from leaderworkerset.api.resources import EVENTS
from leaderworkerset.runtime.client import ApiClient, ApiError

log = logging.getLogger("events")

NORMAL = "Normal"
WARNING = "Warning"

MAX_NOTE_BYTES = 1024
MAX_NAME_LENGTH = 128  # reason, action, reportingController, reportingInstance
QUEUE_SIZE = 1000  # client-go's broadcaster buffer; beyond it events are dropped
FINISH_WINDOW = 6 * 60.0  # client-go's finishTime: a series ends after 6 quiet minutes

_REF_FIELDS = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath")


def object_reference(obj: JSON, field_path: str = "") -> JSON:
    """A corev1.ObjectReference to an object as read from the API."""
    meta = meta_of(obj)
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
        "fieldPath": field_path,
    }
    return {k: v for k, v in ref.items() if v}


def _ref_key(ref: JSON | None) -> tuple[str, ...]:
    # resourceVersion changes on every write of the object, which would defeat the
    # de-duplication, so the identity of an event leaves it out.
    if not ref:
        return ()
    return tuple(str(ref.get(k, "")) for k in _REF_FIELDS if k != "resourceVersion")


def _truncate_utf8(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


@dataclass
class _Series:
    event: JSON  # as created on the server (name, namespace)
    last_observed: float  # monotonic
    count: int = 1
    written_count: int = 1
    flushing: bool = False


class EventRecorder:
    """Records events for one reporting controller; start() it before recording."""

    needs_leader_election = False

    def __init__(
        self,
        client: ApiClient,
        reporting_controller: str,
        reporting_instance: str | None = None,
        *,
        finish_window: float = FINISH_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self._clock = clock
        self.reporting_controller = reporting_controller[:MAX_NAME_LENGTH]
        instance = reporting_instance or f"{reporting_controller}-{socket.gethostname()}"
        self.reporting_instance = instance[:MAX_NAME_LENGTH]
        self.finish_window = finish_window
        self._queue: asyncio.Queue[tuple[tuple[Any, ...], JSON] | None] = asyncio.Queue(QUEUE_SIZE)
        # Oldest observation first (a repeat moves its series to the end), so that
        # forgetting finished series looks only at the front, not at every series on
        # every event: thousands of groups record thousands of distinct events.
        self._series: dict[tuple[Any, ...], _Series] = {}
        self._worker: asyncio.Task[None] | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self.dropped = 0

    # -- runnable

    async def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(
                self._run(), name=f"events-{self.reporting_instance}"
            )

    async def stop(self, deadline: float) -> None:
        """Write what is queued (for at most `deadline` seconds), then stop."""
        if self._worker is None:
            return
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)
        remaining = max(0.0, deadline)
        done, _ = await asyncio.wait({self._worker, *self._flushes}, timeout=remaining)
        for task in (self._worker, *self._flushes):
            if task not in done:
                task.cancel()
        self._worker = None

    # -- recording

    def event(
        self,
        regarding: JSON,
        type_: str,
        reason: str,
        action: str,
        note: str,
        related: JSON | None = None,
    ) -> None:
        """Record an event about `regarding` (an object or an ObjectReference)."""
        if type_ not in (NORMAL, WARNING):
            log.error("dropping event of unknown type", extra={"type": type_, "reason": reason})
            return
        regarding_ref = regarding if "metadata" not in regarding else object_reference(regarding)
        related_ref = None
        if related is not None:
            related_ref = related if "metadata" not in related else object_reference(related)
        note = _truncate_utf8(note, MAX_NOTE_BYTES)
        key = (
            _ref_key(regarding_ref),
            _ref_key(related_ref),
            reason,
            action,
            note,
        )
        now = datetime.datetime.now(datetime.UTC)
        namespace = regarding_ref.get("namespace") or "default"
        body: JSON = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": f"{regarding_ref.get('name', 'unknown')}.{time.time_ns():x}",
                "namespace": namespace,
            },
            "eventTime": format_micro_time(now),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": action[:MAX_NAME_LENGTH],
            "reason": reason[:MAX_NAME_LENGTH],
            "regarding": regarding_ref,
            "note": note,
            "type": type_,
        }
        if related_ref:
            body["related"] = related_ref
        log.debug(
            "event",
            extra={
                "type": type_,
                "reason": reason,
                "object": regarding_ref.get("name"),
                "note": note,
            },
        )
        try:
            self._queue.put_nowait((key, body))
        except asyncio.QueueFull:
            self.dropped += 1
            log.error("event queue full, dropping event", extra={"reason": reason})

    async def flush(self) -> None:
        """Wait until everything recorded so far has reached the API server."""
        await self._queue.join()
        while self._flushes:
            await asyncio.wait(set(self._flushes))

    # -- writing

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    return
                await self._record(*item)
            except Exception:
                log.exception("recording an event failed")
            finally:
                self._queue.task_done()

    async def _record(self, key: tuple[Any, ...], body: JSON) -> None:
        now = self._clock()
        self._forget_finished(now)
        series = self._series.get(key)
        if series is not None:
            series.count += 1
            series.last_observed = now
            self._series[key] = self._series.pop(key)
            if not series.flushing:
                series.flushing = True
                task = asyncio.create_task(self._flush_series(series))
                self._flushes.add(task)
                task.add_done_callback(self._flushes.discard)
            return
        try:
            created = await self.client.create(EVENTS, body)
        except ApiError as exc:
            # A namespace being deleted refuses new content: routine, not worth an error
            # line (client-go's recorder drops these at verbosity 5 too).
            level = logging.DEBUG if exc.namespace_terminating else logging.ERROR
            log.log(
                level,
                "could not write event: %s",
                exc,
                extra={"reason": body["reason"], "note": body["note"]},
            )
            return
        self._series[key] = _Series(event=created, last_observed=now)

    async def _flush_series(self, series: _Series) -> None:
        try:
            while series.written_count != series.count:
                count = series.count
                meta = series.event["metadata"]
                patch = {
                    "series": {
                        "count": count,
                        "lastObservedTime": format_micro_time(),
                    }
                }
                try:
                    await self.client.patch(
                        EVENTS, meta["name"], patch, namespace=meta["namespace"]
                    )
                except ApiError as exc:
                    if exc.not_found:
                        # Expired or deleted on the server; the next occurrence starts afresh.
                        for key, value in list(self._series.items()):
                            if value is series:
                                del self._series[key]
                        return
                    log.error("could not update event series: %s", exc)
                    return
                series.written_count = count
        finally:
            series.flushing = False

    def _forget_finished(self, now: float) -> None:
        stale = []
        for key, series in self._series.items():
            if now - series.last_observed <= self.finish_window:
                break
            if not series.flushing:
                stale.append(key)
        for key in stale:
            del self._series[key]
