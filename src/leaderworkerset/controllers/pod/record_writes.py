"""The group records of one LeaderWorkerSet, written for many groups in one patch.

Every recreation the budget or the back-off counts changes the same two annotations of
the LeaderWorkerSet (`group/recreations.py`), under a resourceVersion precondition so
that no group's record is lost. When many groups fail at once (a node or a rack lost, a
bad image rolled out), one patch per group makes them conflict with one another: each
round only one wins, and the losers' reconciles go back to the work queue with a delay
that doubles at every failure. A run with 100 of 1,000 groups killed at once saw
recoveries minutes late that way (docs/latency.md). Here a change that arrives while a
write of the same LeaderWorkerSet is in flight waits for it and goes out with the other
waiting changes in the next patch: a few writes for any number of groups, every change
applied, in order, to the records as stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.group.recreations import GroupRecords
from leaderworkerset.runtime.client import ApiClient, ApiError

Change = Callable[[GroupRecords], GroupRecords]
Reader = Callable[[JSON, LwsView], GroupRecords]

# A batch whose patch keeps meeting newer versions of the LeaderWorkerSet (its status
# writes bump the version too) gives up; its callers' reconciles are retried.
WRITE_ATTEMPTS = 5


@dataclass
class _Waiting:
    change: Change
    done: asyncio.Future[None]


class RecordWriter:
    """Coalesces record changes per LeaderWorkerSet; see the module docstring."""

    def __init__(self, client: ApiClient, read: Reader) -> None:
        self.client = client
        self.read = read
        self._waiting: dict[tuple[str, str], list[_Waiting]] = {}
        self._flushing: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def write(self, view: LwsView, change: Change) -> None:
        """Apply `change` to the LeaderWorkerSet's records; returns once it is stored
        (or raises what the write met)."""
        key = (view.namespace, view.name)
        waiting = _Waiting(change, asyncio.get_running_loop().create_future())
        self._waiting.setdefault(key, []).append(waiting)
        if key not in self._flushing:
            self._flushing[key] = asyncio.create_task(self._flush(key, view))
        # Shielded: a caller cancelled (shutdown) does not cancel the others' write.
        await asyncio.shield(waiting.done)

    async def _flush(self, key: tuple[str, str], view: LwsView) -> None:
        base: JSON | None = view.obj
        try:
            # No await between the last empty pop and the finally: a change arriving
            # later starts a flush of its own.
            while batch := self._waiting.pop(key, []):
                base = await self._write_batch(view, base, batch)
        finally:
            self._flushing.pop(key, None)

    async def _write_batch(
        self, view: LwsView, base: JSON | None, batch: list[_Waiting]
    ) -> JSON | None:
        """One patch for the whole batch; the stored object it left (the next batch's
        base), or None when the batch failed."""
        obj = base
        try:
            for attempt in range(WRITE_ATTEMPTS):
                if obj is None:
                    obj = await self.client.get(LEADERWORKERSETS, view.name, view.namespace)
                current = self.read(obj, view)
                wanted = current
                for waiting in batch:
                    wanted = waiting.change(wanted)
                if wanted == current:
                    _settle(batch, None)
                    return obj
                meta = meta_of(obj)
                patch = {
                    "metadata": {
                        "resourceVersion": meta.get("resourceVersion"),
                        "annotations": wanted.annotations(),
                    }
                }
                try:
                    stored: JSON = await self.client.patch(
                        LEADERWORKERSETS, view.name, patch, namespace=view.namespace
                    )
                except ApiError as exc:
                    if not exc.conflict or attempt == WRITE_ATTEMPTS - 1:
                        raise
                    obj = None
                    continue
                _settle(batch, None)
                return stored
        except Exception as exc:  # every caller of the batch hears why
            _settle(batch, exc)
            return None
        return None  # pragma: no cover - the loop returns or raises


def _settle(batch: list[_Waiting], error: BaseException | None) -> None:
    for waiting in batch:
        if waiting.done.done():
            continue
        if error is None:
            waiting.done.set_result(None)
        else:
            waiting.done.set_exception(error)
