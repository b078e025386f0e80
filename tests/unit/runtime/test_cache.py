"""The watch cache against an in-memory API server, and cache events mapped to controller keys.

The fake server keeps an event history from which watches replay, can compact it
(so old versions answer 410), and can break or end its open streams. The cache's
``sleep`` is a gate the test holds shut to keep the cache's watch down while the
server changes underneath it.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from leaderworkerset.api.resources import CONFIGMAPS, Resource
from leaderworkerset.runtime.cache import (
    Backoff,
    DeletedFinalStateUnknown,
    Informer,
    strip_managed_fields,
)
from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.controller import (
    Controller,
    Predicate,
    Result,
    add_replica_handler,
    label_key,
    own_key,
    owner_key,
)
from leaderworkerset.runtime.indexes import (
    NAMESPACE_INDEX,
    OWNER_UID_INDEX,
    label_index_name,
    label_index_value,
    object_key,
)
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]
LABEL = "leaderworkerset.sigs.k8s.io/name"
_uids = itertools.count()


class FakeServer:
    """Just enough of LIST and WATCH for one resource, with resourceVersions and compaction."""

    def __init__(self) -> None:
        self.objects: dict[str, JSON] = {}
        self.rv = 100
        self.history: list[JSON] = []
        self.compacted = 0
        self.gone_as_event = False
        self.list_calls: list[JSON] = []
        self.watch_calls: list[str | None] = []
        self.watch_failures: list[Exception] = []
        self.after_page: Callable[[int], None] | None = None
        self._streams: list[asyncio.Queue[JSON | Exception | None]] = []
        self._snapshots: dict[str, list[JSON]] = {}

    # -- changing objects ---------------------------------------------------------------

    def create(
        self,
        name: str,
        namespace: str = "ns",
        labels: dict[str, str] | None = None,
        owner: tuple[str, str, str] | None = None,
    ) -> JSON:
        meta: JSON = {"name": name, "namespace": namespace, "uid": f"uid-{next(_uids)}"}
        if labels:
            meta["labels"] = dict(labels)
        if owner:
            api_version, kind, owner_name = owner
            meta["ownerReferences"] = [
                {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": owner_name,
                    "uid": f"owner-{owner_name}",
                    "controller": True,
                }
            ]
        meta["managedFields"] = [{"manager": "test", "operation": "Update"}]
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}
        return self._write("ADDED", obj)

    def update(self, key: str, **data: str) -> JSON:
        obj = copy.deepcopy(self.objects[key])
        obj["data"].update(data)
        return self._write("MODIFIED", obj)

    def relabel(self, key: str, labels: dict[str, str]) -> JSON:
        obj = copy.deepcopy(self.objects[key])
        obj["metadata"]["labels"] = dict(labels)
        return self._write("MODIFIED", obj)

    def delete(self, key: str) -> None:
        obj = copy.deepcopy(self.objects[key])
        self._write("DELETED", obj)

    def _write(self, kind: str, obj: JSON) -> JSON:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = object_key(obj)
        if kind == "DELETED":
            del self.objects[key]
        else:
            self.objects[key] = obj
        event = {"type": kind, "object": copy.deepcopy(obj)}
        self.history.append(event)
        for stream in self._streams:
            stream.put_nowait(event)
        return obj

    # -- controlling streams -----------------------------------------------------------------

    def compact(self) -> None:
        self.compacted = self.rv
        self.history.clear()

    def bookmark(self) -> None:
        self.rv += 1
        event = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
        for stream in self._streams:
            stream.put_nowait(event)

    def end_streams(self) -> None:
        for stream in self._streams:
            stream.put_nowait(None)

    def break_streams(self) -> None:
        for stream in self._streams:
            stream.put_nowait(OSError("connection reset"))

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    # -- the ListerWatcher interface -----------------------------------------------------------

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> JSON:
        self.list_calls.append({"limit": limit, "continue": continue_token})
        if continue_token:
            version, _, start = continue_token.partition(":")
            if int(version) < self.compacted:
                raise ApiError(410, {"reason": "Expired", "message": "continue too old"})
            items = self._snapshots[version]
            offset = int(start)
        else:
            version = str(self.rv)
            items = [copy.deepcopy(self.objects[k]) for k in sorted(self.objects)]
            for item in items:  # list items carry no kind, as from a real server
                del item["kind"], item["apiVersion"]
            self._snapshots[version] = items
            offset = 0
        end = offset + (limit or len(items))
        meta: JSON = {"resourceVersion": version}
        if end < len(items):
            meta["continue"] = f"{version}:{end}"
        if self.after_page is not None:
            self.after_page(len(self.list_calls))
        return {"metadata": meta, "items": copy.deepcopy(items[offset:end])}

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncIterator[JSON]:
        self.watch_calls.append(resource_version)
        if self.watch_failures:
            raise self.watch_failures.pop(0)
        since = int(resource_version or 0)
        if since < self.compacted:
            status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
            if self.gone_as_event:
                yield {"type": "ERROR", "object": status}
                return
            raise ApiError(410, status)
        # Replay and subscribe in one step, so no event is missed or doubled.
        replay = [
            e for e in self.history if int(e["object"]["metadata"]["resourceVersion"]) > since
        ]
        stream: asyncio.Queue[JSON | Exception | None] = asyncio.Queue()
        self._streams.append(stream)
        try:
            for event in replay:
                yield event
            while True:
                item = await stream.get()
                if item is None:
                    return
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            self._streams.remove(stream)


class Gate:
    """The cache's sleep: instant while open, parks the cache's retry loop while shut."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.opened.set()
        self.delays: list[float] = []
        self.parked = 0

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.parked += 1
        try:
            await self.opened.wait()
        finally:
            self.parked -= 1
        await asyncio.sleep(0)


class Recorder:
    def __init__(self, informer: Informer) -> None:
        self.events: list[tuple[str, str, JSON]] = []
        informer.add_handler(
            lambda o: self.events.append(("add", object_key(o), o)),
            lambda old, new: self.events.append(("update", object_key(new), new)),
            lambda o: self.events.append(("delete", object_key(o), o)),
        )

    def names(self) -> list[tuple[str, str]]:
        return [(kind, key) for kind, key, _ in self.events]


def versions(informer: Informer) -> dict[str, str]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}


def server_versions(server: FakeServer) -> dict[str, str]:
    return {k: o["metadata"]["resourceVersion"] for k, o in server.objects.items()}


def make(server: FakeServer, gate: Gate | None = None, **kwargs: Any) -> Informer:
    kwargs.setdefault("backoff", Backoff(rand=lambda: 0.0))
    return Informer(
        server, CONFIGMAPS, sleep=(gate or Gate()).sleep, label_indexes=[LABEL], **kwargs
    )


# -- listing and watching --------------------------------------------------------------------------


async def test_paginated_list_then_watch_from_its_version() -> None:
    server = FakeServer()
    for i in range(1234):
        server.create(f"cm-{i:04}")
    informer = make(server, page_size=500)
    recorder = Recorder(informer)
    informer.start()
    assert await informer.wait_synced(5)
    assert [c["limit"] for c in server.list_calls] == [500, 500, 500]
    assert server.list_calls[0]["continue"] is None
    assert server.list_calls[2]["continue"] == f"{server.rv}:1000"
    assert len(informer) == 1234 and len(recorder.events) == 1234
    obj = informer.get("ns", "cm-0007")
    assert obj is not None and obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"
    await eventually(lambda: server.open_streams == 1, "the watch")
    assert server.watch_calls == [str(server.rv)]
    await informer.stop()


async def test_watch_events_keep_store_indexes_and_handlers_current() -> None:
    server = FakeServer()
    server.create("old")
    informer = make(server)
    recorder = Recorder(informer)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")

    server.create("a", labels={LABEL: "lws1"}, owner=("apps/v1", "StatefulSet", "sts"))
    server.create("b", namespace="other", labels={LABEL: "lws1"})
    server.update("ns/a", x="1")
    server.relabel("ns/a", {LABEL: "lws2"})
    server.delete("ns/old")
    await eventually(lambda: len(recorder.events) == 6, "all events")
    assert recorder.names() == [
        ("add", "ns/old"),
        ("add", "ns/a"),
        ("add", "other/b"),
        ("update", "ns/a"),
        ("update", "ns/a"),
        ("delete", "ns/old"),
    ]
    assert versions(informer) == server_versions(server)
    assert informer.resource_version == str(server.rv)
    assert informer.index_keys(OWNER_UID_INDEX, "owner-sts") == ["ns/a"]
    label = label_index_name(LABEL)
    assert informer.index_keys(label, label_index_value("ns", "lws1")) == []
    assert informer.index_keys(label, label_index_value("ns", "lws2")) == ["ns/a"]
    assert informer.index_keys(label, label_index_value("other", "lws1")) == ["other/b"]
    assert [o["metadata"]["name"] for o in informer.list("other")] == ["b"]
    assert informer.index_keys(NAMESPACE_INDEX, "ns") == ["ns/a"]
    assert informer.index_values(label) == ["ns/lws2", "other/lws1"]
    with pytest.raises(KeyError):
        informer.by_index("nope", "x")
    await informer.stop()


async def test_resumes_from_last_version_after_stream_end_and_bookmark() -> None:
    server = FakeServer()
    informer = make(server)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("a")
    await eventually(lambda: "ns/a" in informer, "the add")
    server.bookmark()
    await eventually(lambda: informer.resource_version == str(server.rv), "the bookmark")
    server.end_streams()
    await eventually(lambda: len(server.watch_calls) == 2, "a new watch")
    assert server.watch_calls[1] == str(server.rv)
    assert server.list_calls and informer.lists == 1
    await informer.stop()


@pytest.mark.parametrize("as_event", [False, True], ids=["http-410", "error-event-410"])
async def test_gone_relists_and_delivers_the_difference(as_event: bool) -> None:
    server = FakeServer()
    server.gone_as_event = as_event
    for name in ("keep", "change", "remove", "recreate"):
        server.create(name)
    gate = Gate()
    informer = make(server, gate)
    recorder = Recorder(informer)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    old_uid = informer.get("ns", "recreate")["metadata"]["uid"]  # type: ignore[index]
    recorder.events.clear()

    gate.opened.clear()
    server.break_streams()
    await eventually(lambda: gate.parked == 1, "the cache to wait for a retry")
    server.create("new")
    server.update("ns/change", x="1")
    server.delete("ns/remove")
    server.delete("ns/recreate")
    server.create("recreate")
    server.compact()
    gate.opened.set()

    await eventually(lambda: informer.lists == 2, "a relist")
    await eventually(lambda: server.open_streams == 1, "the watch again")
    assert sorted(recorder.names()) == [
        ("add", "ns/new"),
        ("add", "ns/recreate"),
        ("delete", "ns/recreate"),
        ("delete", "ns/remove"),
        ("update", "ns/change"),
    ]
    deletes = {key: obj for kind, key, obj in recorder.events if kind == "delete"}
    assert all(isinstance(obj, DeletedFinalStateUnknown) for obj in deletes.values())
    assert deletes["ns/recreate"]["metadata"]["uid"] == old_uid
    assert versions(informer) == server_versions(server)
    assert server.watch_calls[-1] == str(server.rv)
    await informer.stop()


async def test_expired_continue_token_restarts_the_list() -> None:
    server = FakeServer()
    for i in range(25):
        server.create(f"cm-{i:02}")

    def compact_after_first_page(calls: int) -> None:
        if calls == 1:
            server.create("late")
            server.compact()

    server.after_page = compact_after_first_page
    informer = make(server, page_size=10)
    informer.start()
    assert await informer.wait_synced(5)
    assert [c["continue"] is None for c in server.list_calls] == [True, False, True, False, False]
    assert versions(informer) == server_versions(server)
    await informer.stop()


async def test_a_list_that_compaction_keeps_overtaking_ends_unpaged() -> None:
    server = FakeServer()
    for i in range(25):
        server.create(f"cm-{i:02}")

    def compact_after_every_first_page(calls: int) -> None:
        if server.list_calls[-1]["continue"] is None and server.list_calls[-1]["limit"]:
            server.create(f"late-{calls}")
            server.compact()

    server.after_page = compact_after_every_first_page
    informer = make(server, page_size=10)
    informer.start()
    assert await informer.wait_synced(5)
    # Two paged tries, each expired at its second page, then one unpaged list.
    assert [(c["limit"], c["continue"] is None) for c in server.list_calls] == [
        (10, True),
        (10, False),
        (10, True),
        (10, False),
        (None, True),
    ]
    assert versions(informer) == server_versions(server)
    await informer.stop()


async def test_failed_watches_back_off_exponentially_then_reset() -> None:
    server = FakeServer()
    server.watch_failures = [OSError("refused")] * 5
    gate = Gate()
    informer = make(server, gate)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    assert gate.delays == [0.2, 0.4, 0.8, 1.6, 3.2]
    server.create("a")  # a healthy watch resets the backoff
    await eventually(lambda: "ns/a" in informer, "the add")
    server.break_streams()
    await eventually(lambda: len(gate.delays) == 6, "one more retry")
    assert gate.delays[-1] == 0.2
    await informer.stop()


def test_backoff_is_capped_and_jittered_below_the_nominal_delay() -> None:
    backoff = Backoff(0.2, 30.0, jitter=0.5, rand=lambda: 1.0)
    delays = [backoff.next() for _ in range(12)]
    assert delays[0] == 0.1 and delays[-1] == 15.0
    nominal = Backoff(0.2, 30.0, rand=lambda: 0.0)
    assert [nominal.next() for _ in range(10)][-2:] == [30.0, 30.0]


async def test_failing_list_is_retried() -> None:
    server = FakeServer()
    server.create("a")
    calls = 0
    real_list = server.list

    async def flaky_list(*args: Any, **kwargs: Any) -> JSON:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise OSError("refused")
        return await real_list(*args, **kwargs)

    server.list = flaky_list  # type: ignore[method-assign]
    gate = Gate()
    informer = make(server, gate)
    informer.start()
    assert await informer.wait_synced(5)
    assert gate.delays == [0.2, 0.4] and "ns/a" in informer
    await informer.stop()


async def test_failing_handler_does_not_stop_the_cache() -> None:
    server = FakeServer()
    informer = make(server)

    def broken(obj: JSON) -> None:
        raise RuntimeError("bad handler")

    informer.add_handler(on_add=broken)
    recorder = Recorder(informer)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("a")
    server.create("b")
    await eventually(lambda: len(recorder.events) == 2, "both adds")
    await informer.stop()


async def test_late_handler_gets_an_add_per_cached_object() -> None:
    server = FakeServer()
    server.create("a")
    server.create("b")
    informer = make(server)
    informer.start()
    await informer.wait_synced(5)
    recorder = Recorder(informer)
    assert sorted(recorder.names()) == [("add", "ns/a"), ("add", "ns/b")]
    await informer.stop()


async def test_transform_applies_to_listed_and_watched_objects() -> None:
    server = FakeServer()
    server.create("listed")
    informer = make(server, transform=strip_managed_fields)
    recorder = Recorder(informer)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("watched")
    server.delete("ns/listed")
    await eventually(lambda: len(recorder.events) == 3, "all events")
    assert all("managedFields" not in obj["metadata"] for _, _, obj in recorder.events)
    assert "managedFields" in server.objects["ns/watched"]["metadata"]
    await informer.stop()


async def test_derived_value_is_built_once_per_version_and_goes_with_the_object() -> None:
    server = FakeServer()
    server.create("listed")
    built: list[tuple[str, str]] = []

    def derive(obj: JSON) -> tuple[str, JSON]:
        meta = obj["metadata"]
        built.append((meta["name"], meta["resourceVersion"]))
        return meta["resourceVersion"], obj

    informer = make(server, derive=derive)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    listed = informer.derived("ns", "listed")
    assert listed == (
        server.objects["ns/listed"]["metadata"]["resourceVersion"],
        informer.get("ns", "listed"),
    )
    # Built from the very object stored, so a reader of the value reads that object.
    assert listed[1] is informer.get("ns", "listed")
    assert informer.derived("ns", "listed") is listed  # read again: not rebuilt
    server.update("ns/listed", x="1")
    await eventually(lambda: informer.derived("ns", "listed") is not listed, "the update")
    updated = informer.derived_by_key("ns/listed")
    assert updated[0] == server.objects["ns/listed"]["metadata"]["resourceVersion"]
    assert updated[1] is informer.get("ns", "listed") and updated[1]["data"] == {"x": "1"}
    server.delete("ns/listed")
    await eventually(lambda: "ns/listed" not in informer, "the delete")
    assert informer.derived("ns", "listed") is None
    assert [name for name, _ in built] == ["listed", "listed"]
    await informer.stop()


async def test_a_relist_keeps_the_value_of_an_unchanged_object_and_drops_a_gone_one() -> None:
    server = FakeServer()
    for name in ("keep", "remove"):
        server.create(name)
    gate = Gate()
    informer = make(server, gate, derive=lambda obj: object())
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    kept = informer.derived("ns", "keep")
    gate.opened.clear()
    server.break_streams()
    await eventually(lambda: gate.parked == 1, "the cache to wait for a retry")
    server.delete("ns/remove")
    server.compact()
    gate.opened.set()
    await eventually(lambda: informer.lists == 2, "a relist")
    assert informer.derived("ns", "keep") is kept
    assert informer.derived("ns", "remove") is None
    await informer.stop()


async def test_a_relist_applies_each_page_before_the_next_and_transforms_only_changes() -> None:
    server = FakeServer()
    for i in range(25):
        server.create(f"cm-{i:02}")
    transformed: list[str] = []

    def transform(obj: JSON) -> JSON:
        transformed.append(obj["metadata"]["name"])
        return strip_managed_fields(obj)

    gate = Gate()
    informer = make(server, gate, transform=transform, page_size=10)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    assert len(transformed) == 25
    transformed.clear()
    gate.opened.clear()
    server.break_streams()
    await eventually(lambda: gate.parked == 1, "the cache to wait for a retry")
    server.update("ns/cm-03", x="1")
    server.update("ns/cm-17", x="1")
    server.compact()
    first_relist_page = len(server.list_calls) + 1
    # What the cache holds of cm-03 (on the first page) when each later page is asked for.
    seen_on_later_pages: list[JSON] = []

    def after_page(calls: int) -> None:
        if calls > first_relist_page:
            seen_on_later_pages.append(informer.get("ns", "cm-03") or {})

    server.after_page = after_page
    gate.opened.set()
    await eventually(lambda: informer.lists == 2, "a relist")
    assert transformed == ["cm-03", "cm-17"]
    assert len(seen_on_later_pages) == 2
    assert all(obj.get("data") == {"x": "1"} for obj in seen_on_later_pages)
    assert versions(informer) == server_versions(server)
    await informer.stop()


async def test_wait_synced_times_out() -> None:
    informer = make(FakeServer())
    assert await informer.wait_synced(0.01) is False


# -- cache events to controller keys ---------------------------------------------------------------


def test_map_functions() -> None:
    server = FakeServer()
    pod = server.create("p", labels={LABEL: "lws"}, owner=("apps/v1", "StatefulSet", "sts"))
    assert list(own_key(pod)) == ["ns/p"]
    assert list(owner_key("StatefulSet", "apps/v1")(pod)) == ["ns/sts"]
    assert list(owner_key("StatefulSet", "apps/v2")(pod)) == ["ns/sts"]  # group, not version
    assert list(owner_key("StatefulSet", "batch/v1")(pod)) == []
    assert list(owner_key("ReplicaSet", "apps/v1")(pod)) == []
    assert list(label_key(LABEL)(pod)) == ["ns/lws"]
    assert list(label_key("other")(pod)) == []


async def test_controller_maps_events_through_predicates_to_keys() -> None:
    server = FakeServer()
    server.create("lws1")
    informer = make(server)
    reconciled: list[str] = []
    changed = asyncio.Event()

    async def reconcile(key: str) -> Result:
        reconciled.append(key)
        changed.set()
        return Result()

    ctrl = Controller("test-mapping", reconcile)
    ctrl.watch(informer, own_key, Predicate.for_objects(lambda o: "skip" not in o["data"]))
    ctrl.watch_labelled(informer, LABEL)
    # Status-only writes bump resourceVersion but not generation: this skips them.
    generation_changed = Predicate(
        update=lambda old, new: (
            old["metadata"].get("generation") != new["metadata"].get("generation")
        )
    )
    ctrl.watch_owned(informer, "StatefulSet", "apps/v1", generation_changed)
    informer.start()
    await ctrl.start()

    async def settle(expected: list[str]) -> None:
        await eventually(lambda: sorted(reconciled) == sorted(expected), f"keys {expected}")
        await eventually(lambda: not ctrl.queue.processing, "reconciles to finish")
        reconciled.clear()

    await settle(["ns/lws1"])
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("pod", labels={LABEL: "lws1"}, owner=("apps/v1", "StatefulSet", "sts"))
    await settle(["ns/pod", "ns/lws1", "ns/sts"])
    # A relabel wakes the old and the new value; generation did not change, so no owner key.
    server.relabel("ns/pod", {LABEL: "lws2"})
    await settle(["ns/pod", "ns/lws1", "ns/lws2"])
    server.update("ns/pod", skip="1")
    await settle(["ns/pod", "ns/lws2"])  # an update passes if either side passes
    server.delete("ns/pod")
    await settle(["ns/lws2", "ns/sts"])
    await ctrl.stop()
    await informer.stop()


async def test_a_controller_not_started_queues_nothing_and_starts_with_the_whole_cache() -> None:
    """A standby replica's caches stay in sync for its webhooks, but its controllers do
    not run: their queues must not grow with every change another replica acts on."""
    server = FakeServer()
    server.create("a")
    informer = make(server)
    reconciled: list[str] = []

    async def reconcile(key: str) -> Result:
        reconciled.append(key)
        return Result()

    ctrl = Controller("test-standby", reconcile)
    ctrl.watch(informer, own_key)
    informer.start()
    assert await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("b")
    server.update("ns/a", changed="1")
    await eventually(lambda: informer.get("ns", "b") is not None, "the cache to see b")
    assert len(ctrl.queue) == 0 and not reconciled
    await ctrl.start()
    await eventually(lambda: sorted(reconciled) == ["ns/a", "ns/b"], "both, once")
    server.create("c")
    await eventually(lambda: sorted(reconciled) == ["ns/a", "ns/b", "ns/c"], "events after start")
    await ctrl.stop()
    await informer.stop()


async def test_a_side_handler_runs_only_once_its_controller_starts() -> None:
    """What a controller keeps of a cache's events (registered through the controller)
    is kept by the leader only: a standby, whose controllers never start, runs none of
    it; the leader runs it from start(), the cache's contents replayed as adds."""
    server = FakeServer()
    server.create("a")
    informer = make(server)
    seen: list[tuple[str, str]] = []

    def note(event: str) -> Callable[..., None]:
        return lambda *objs: seen.append((event, objs[-1]["metadata"]["name"]))

    async def reconcile(key: str) -> Result:
        return Result()

    ctrl = Controller("test-side", reconcile)
    ctrl.add_side_handler(
        informer, on_add=note("add"), on_update=note("update"), on_delete=note("delete")
    )
    informer.start()
    assert await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("b")
    server.update("ns/a", changed="1")
    server.delete("ns/b")
    await eventually(lambda: informer.get("ns", "b") is None and changed(informer, "ns/a"))
    assert seen == []  # a standby
    await ctrl.start()
    assert seen == [("add", "a")]
    server.update("ns/a", changed="2")
    server.create("c")
    server.delete("ns/c")
    await eventually(lambda: len(seen) == 4, "the events after start")
    assert seen[1:] == [("update", "a"), ("add", "c"), ("delete", "c")]
    await ctrl.stop()
    await informer.stop()


def changed(informer: Informer, key: str) -> bool:
    namespace, _, name = key.partition("/")
    obj = informer.get(namespace, name)
    return obj is not None and bool(obj["data"])


async def test_a_replica_handler_runs_on_a_standby_too() -> None:
    server = FakeServer()
    server.create("a")
    informer = make(server)
    added: list[str] = []
    add_replica_handler(informer, on_add=lambda obj: added.append(object_key(obj)))
    informer.start()
    assert await informer.wait_synced(5)
    server.create("b")
    await eventually(lambda: added == ["ns/a", "ns/b"], "both adds, with no controller")
    await informer.stop()


async def test_controller_start_fails_if_a_cache_never_syncs() -> None:
    async def reconcile(key: str) -> Result:
        return Result()

    ctrl = Controller("test-unsynced", reconcile, sync_timeout=0.01)
    ctrl.watch(make(FakeServer()))
    with pytest.raises(TimeoutError, match="not synced"):
        await ctrl.start()


def test_not_status_only_skips_a_status_write_and_nothing_else() -> None:
    from leaderworkerset.runtime.controller import NOT_STATUS_ONLY

    update = NOT_STATUS_ONLY.update
    assert update is not None
    old = {
        "metadata": {"name": "a", "resourceVersion": "1", "generation": 1, "labels": {"x": "1"}},
        "spec": {"replicas": 2},
        "status": {"readyReplicas": 1},
    }
    status_write = copy.deepcopy(old)
    status_write["metadata"].update(resourceVersion="2", managedFields=[{"manager": "lws"}])
    status_write["status"]["readyReplicas"] = 2
    assert not update(old, status_write)
    for change in (
        lambda o: o["spec"].update(replicas=3),
        lambda o: o["metadata"]["labels"].update(x="2"),
        lambda o: o["metadata"].update(annotations={"a": "b"}),
        lambda o: o["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
    ):
        changed = copy.deepcopy(status_write)
        change(changed)
        assert update(old, changed)


async def test_an_open_watch_is_counted_while_it_lasts() -> None:
    server = FakeServer()
    informer = make(server)
    gauge = informer.metrics.watches_open.labels(CONFIGMAPS.plural)
    before = gauge._value.get()
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    assert gauge._value.get() == before + 1
    server.end_streams()
    await eventually(lambda: len(server.watch_calls) == 2, "a new watch")
    await eventually(lambda: server.open_streams == 1, "the new watch open")
    assert gauge._value.get() == before + 1  # the ended one no longer counts
    await informer.stop()
    assert gauge._value.get() == before


async def test_an_object_the_derivation_fails_on_is_still_cached_without_a_value() -> None:
    server = FakeServer()
    server.create("good")
    server.create("bad")

    def derive(obj: JSON) -> str:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("unreadable")
        return str(obj["metadata"]["name"])

    informer = make(server, derive=derive)
    informer.start()
    await informer.wait_synced(5)
    await eventually(lambda: server.open_streams == 1, "the watch")
    assert informer.get("ns", "bad") is not None and informer.derived("ns", "bad") is None
    assert informer.derived("ns", "good") == "good"
    server.create("later")
    await eventually(lambda: informer.derived("ns", "later") == "later", "a later add")
    await informer.stop()


async def test_a_reconcile_that_raises_a_surprise_counts_as_a_panic_an_api_error_does_not() -> None:
    server = FakeServer()
    for name in ("bug", "conflict", "fine"):
        server.create(name)
    informer = make(server)
    failures = {"ns/bug": ValueError("a bug"), "ns/conflict": ApiError(409, {"reason": "Conflict"})}
    seen: set[str] = set()

    async def reconcile(key: str) -> Result:
        seen.add(key)
        if key in failures:
            raise failures.pop(key)
        return Result()

    ctrl = Controller("test-panics", reconcile)
    ctrl.watch(informer, own_key)
    informer.start()
    await ctrl.start()
    metrics = ctrl.metrics

    def value(family: Any) -> float:
        return float(family.labels(controller="test-panics")._value.get())

    await eventually(lambda: not failures and not ctrl.queue.processing, "both failures")
    await eventually(lambda: value(metrics.reconcile_errors) == 2, "two errors")
    assert seen == {"ns/bug", "ns/conflict", "ns/fine"}
    assert value(metrics.reconcile_panics) == 1
    assert value(metrics.terminal_reconcile_errors) == 0
    assert value(metrics.reconcile_timeouts) == 0
    await ctrl.stop()
    await informer.stop()
