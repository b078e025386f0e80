"""Record changes of many groups of one LeaderWorkerSet, made at once, reach the API
server in a few patches, none lost, against a stand-in that enforces the
resourceVersion precondition as the API server does."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.controllers.pod.record_writes import WRITE_ATTEMPTS, RecordWriter
from leaderworkerset.group.recreations import GroupRecords, Recreation, read_records_leniently
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.lws import lws_json


class VersionedLws:
    """One stored LeaderWorkerSet: a merge patch of annotations under a resourceVersion
    precondition, answered after a turn of the loop (as a request would be)."""

    def __init__(self) -> None:
        self.obj = lws_json()
        self.obj["metadata"]["resourceVersion"] = "1"
        self.obj["metadata"]["annotations"] = {}
        self.patches = 0
        self.gets = 0
        self.outside_writes = 0  # status writes that bump the version before a patch

    def _bump(self) -> None:
        meta = self.obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def get(self, resource: Any, name: str, namespace: str) -> JSON:
        await asyncio.sleep(0)
        self.gets += 1
        return copy.deepcopy(self.obj)

    async def patch(self, resource: Any, name: str, patch: JSON, namespace: str) -> JSON:
        await asyncio.sleep(0)
        self.patches += 1
        if self.outside_writes:
            self.outside_writes -= 1
            self._bump()
        meta = patch["metadata"]
        if meta["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
        annotations = self.obj["metadata"]["annotations"]
        for key, value in meta["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        self._bump()
        return copy.deepcopy(self.obj)


def read(obj: JSON, view: LwsView) -> GroupRecords:
    records, _ = read_records_leniently(meta_of(obj).get("annotations") or {})
    return records


def recreated(group: str) -> Any:
    return lambda r: r.with_recreation(group, Recreation(1, 1_800_000_000.0), None)


def stored_groups(server: VersionedLws) -> set[str]:
    return set(read(server.obj, view_of(server.obj)).recreations)


async def test_a_hundred_groups_at_once_are_all_recorded_in_a_few_patches() -> None:
    server = VersionedLws()
    writer = RecordWriter(server, read)  # type: ignore[arg-type]
    view = view_of(copy.deepcopy(server.obj))
    groups = [str(i) for i in range(100)]
    await asyncio.gather(*(writer.write(view, recreated(g)) for g in groups))
    assert stored_groups(server) == set(groups)
    # The first change goes alone; the 99 that arrived meanwhile go in the next patch.
    assert server.patches <= 3


async def test_a_version_moved_by_another_writer_is_read_again_and_nothing_lost() -> None:
    server = VersionedLws()
    writer = RecordWriter(server, read)  # type: ignore[arg-type]
    view = view_of(copy.deepcopy(server.obj))
    server.outside_writes = 2
    await asyncio.gather(*(writer.write(view, recreated(str(g))) for g in range(10)))
    assert stored_groups(server) == {str(g) for g in range(10)}
    assert server.gets >= 2


async def test_a_batch_that_keeps_conflicting_fails_every_caller_and_the_next_starts_afresh() -> (
    None
):
    server = VersionedLws()
    writer = RecordWriter(server, read)  # type: ignore[arg-type]
    view = view_of(copy.deepcopy(server.obj))
    server.outside_writes = WRITE_ATTEMPTS
    with pytest.raises(ApiError):
        await writer.write(view, recreated("a"))
    assert stored_groups(server) == set()
    await writer.write(view, recreated("b"))
    assert stored_groups(server) == {"b"}


async def test_a_change_that_changes_nothing_writes_nothing() -> None:
    server = VersionedLws()
    writer = RecordWriter(server, read)  # type: ignore[arg-type]
    await writer.write(view_of(copy.deepcopy(server.obj)), lambda r: r)
    assert server.patches == 0
