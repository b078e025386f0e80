"""A watch cache (client-go's informer) of one kind of object, kept as plain dicts.

LIST in pages, then WATCH from the list's resourceVersion with bookmarks. When the
watch breaks it resumes from the last resourceVersion seen; when that version has
expired (410 Gone) it lists again and hands the handlers the difference between
what it held and what the list returned, so no change is lost to the gap.

Stored objects are shared, not copied: callers must not mutate what ``get``,
``list``, ``by_index`` or ``derived`` return, nor what handlers receive.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from leaderworkerset.api.objects import JSON, meta_of, uid_of
from leaderworkerset.api.resources import Resource
from leaderworkerset.runtime.client import ApiError, Lister, list_pages
from leaderworkerset.runtime.indexes import (
    NAMESPACE_INDEX,
    OWNER_UID_INDEX,
    IndexFunc,
    by_controller_uid,
    by_label,
    by_namespace,
    label_index_name,
    object_key,
    resource_version,
)
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.retries import FailureStreak

log = logging.getLogger(__name__)

AddHandler = Callable[[JSON], None]
UpdateHandler = Callable[[JSON, JSON], None]
DeleteHandler = Callable[[JSON], None]
Sleep = Callable[[float], Awaitable[None]]
# Lists started over when compaction expires a continue token; the last is unpaged.
LIST_ATTEMPTS = 3


class ListerWatcher(Lister, Protocol):
    """What the cache needs of :class:`~leaderworkerset.runtime.client.ApiClient`: its
    paged LIST and its WATCH."""

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncIterator[JSON]: ...


class DeletedFinalStateUnknown(dict[str, Any]):
    """The last state the cache held of an object that a relist found gone.

    The deletion itself was never seen, so the object may have changed before it
    went; it is still a dict, so handlers can map it like any other object and
    tell it apart with ``isinstance`` where that matters.
    """


def watch_was_healthy(events: int, seconds: float) -> bool:
    """A watch that brought events, or lasted a second, was healthy however it ended:
    the API server closes a slow consumer's watch in a burst without an error, and
    resuming at once from the last version loses nothing. Only a watch that fails
    or ends at once with nothing calls for backing off."""
    return events > 0 or seconds >= 1.0


class Backoff:
    """Exponential delays with jitter, so many clients do not retry in lockstep."""

    def __init__(
        self,
        initial: float = 0.2,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rand = rand
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * self.factor)
        return delay * (1.0 - self.jitter * self._rand())

    def reset(self) -> None:
        self._next = self.initial


class _Gone(Exception):
    """The resourceVersion to watch from is older than the server keeps."""


@dataclass(frozen=True)
class _Handlers:
    on_add: AddHandler | None
    on_update: UpdateHandler | None
    on_delete: DeleteHandler | None


_COPY_ATTEMPTS = 3


class Informer:
    """A cache of the objects of one resource that match the given scope.

    ``namespace`` None watches all namespaces; ``label_selector`` and
    ``field_selector`` narrow the cache to what a controller needs so it does not
    hold every pod of the cluster. ``label_indexes`` names labels to index by
    (values ``namespace/<label value>``, see :func:`indexes.label_index_value`);
    ``indexers`` adds custom index functions. Namespace and controller-owner-UID
    indexes are always kept. ``transform`` rewrites each object before it is
    stored, e.g. :func:`strip_managed_fields` to cache less of what is never read.
    ``derive`` builds a value from each stored object (a typed reading of it, say),
    once per version the cache holds: kept beside the object, replaced with it, and
    dropped when it goes (see :meth:`derived`).
    """

    def __init__(
        self,
        client: ListerWatcher,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        label_indexes: Iterable[str] = (),
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Callable[[JSON], JSON] | None = None,
        derive: Callable[[JSON], Any] | None = None,
        # A relist holds one page beyond the cache (_list_and_replace): 100 pods decode
        # to about 2 MiB, 500 (client-go's page) to five times that, which the
        # allocator keeps as fragments (bench/relist_memory.py).
        page_size: int = 100,
        min_watch_timeout: int = 300,
        backoff: Backoff | None = None,
        sleep: Sleep = asyncio.sleep,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics or RuntimeMetrics()
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self._transform = transform
        self._derive = derive
        self.min_watch_timeout = min_watch_timeout
        self.name = resource.plural + (f"[{label_selector}]" if label_selector else "")
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        # Routine list and watch failures log at debug, a persistent one warns once; the
        # streak ends with a watch's first event (a list alone may precede a watch that
        # keeps failing, as while a new resource's watch cache initializes).
        self.failures = FailureStreak(log, self.name)
        self._indexers: dict[str, IndexFunc] = {
            NAMESPACE_INDEX: by_namespace,
            OWNER_UID_INDEX: by_controller_uid,
        }
        for label in label_indexes:
            self._indexers[label_index_name(label)] = by_label(label)
        self._indexers.update(indexers or {})
        self._items: dict[str, JSON] = {}
        self._derived: dict[str, Any] = {}
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._handlers: list[_Handlers] = []
        self._task: asyncio.Task[None] | None = None
        self._stream_events = 0  # of the current watch, bookmarks included
        self.synced = asyncio.Event()
        self.resource_version = ""
        # Counters for tests, benchmarks and debugging.
        self.lists = 0
        self.watches = 0
        self.events = 0

    # -- reading ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # `get`, `get_by_key`, `derived` and `by_index` may be called from another thread
    # (the webhook server's) while the watch loop changes the store: a dict lookup, and
    # the copy of an index's key set, are each one step under the GIL; `by_index` skips
    # a key whose object was removed between the two.

    def get(self, namespace: str | None, name: str) -> JSON | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def get_by_key(self, key: str) -> JSON | None:
        return self._items.get(key)

    def derived(self, namespace: str | None, name: str) -> Any:
        """What ``derive`` built from the object held under this name; None when no
        object is, or when ``derive`` failed on it."""
        return self._derived.get(f"{namespace}/{name}" if namespace else name)

    def derived_by_key(self, key: str) -> Any:
        return self._derived.get(key)

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def list(self, namespace: str | None = None) -> builtins.list[JSON]:
        if namespace is None:
            return list(self._items.values())
        return self.by_index(NAMESPACE_INDEX, namespace)

    def by_index(self, index: str, value: str) -> builtins.list[JSON]:
        get = self._items.get
        return [obj for key in self.index_keys(index, value) if (obj := get(key)) is not None]

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        try:
            keys = self._indices[index].get(value, ())
        except KeyError:
            raise KeyError(f"{self.name} has no index {index!r}") from None
        # Copying the set is one step under the GIL unless a garbage collection inside
        # it runs Python code and lets the watch loop's thread change the set; then the
        # copy raises, and is taken again.
        for _ in range(_COPY_ATTEMPTS - 1):
            try:
                return sorted(keys)
            except RuntimeError:
                continue
        return sorted(keys)

    def index_values(self, index: str) -> builtins.list[str]:
        return sorted(self._indices[index])

    @property
    def has_synced(self) -> bool:
        return self.synced.is_set()

    # The timeout parameter is the documented interface callers (and start-up code) use.
    async def wait_synced(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                await self.synced.wait()
        except TimeoutError:
            return False
        return True

    # -- handlers and lifecycle --------------------------------------------------

    def add_handler(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Handlers run inside the watch loop: they must be quick and must not block.

        A handler added after the cache has objects first gets an add for each.
        """
        handlers = _Handlers(on_add, on_update, on_delete)
        self._handlers.append(handlers)
        if on_add is not None:
            for obj in list(self._items.values()):
                self._call(on_add, obj)

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer {self.name}")
        return self._task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> None:
        """List, then watch, forever; returns only by cancellation."""
        need_list = True
        just_listed = False
        while True:
            if need_list:
                try:
                    await self._list_and_replace()
                except Exception as exc:
                    delay = self._backoff.next()
                    self.failures.failed(exc, "list failed, retrying in %.2fs", delay)
                    await self._sleep(delay)
                    continue
                need_list, just_listed = False, True
            loop = asyncio.get_running_loop()
            started = loop.time()
            failure: Exception | None = None
            try:
                await self._watch_once()
            except _Gone:
                # At info, not debug: a relist is the whole resource read again from the
                # API server (lws_cache_lists_total counts them), and tests/chaos looks
                # for this line.
                log.info("%s: version %s expired, relisting", self.name, self.resource_version)
                need_list = True
                # A fresh list whose version is already gone would spin; else relist at once.
                if not just_listed:
                    continue
                failure = ApiError(410, {"reason": "Expired"})
            except Exception as exc:
                failure = exc
            just_listed = False
            if watch_was_healthy(self._stream_events, loop.time() - started):
                self._backoff.reset()
                if failure is None:
                    continue
            delay = self._backoff.next()
            self.failures.failed(
                failure, "watch from %s ended, retrying in %.2fs", self.resource_version, delay
            )
            await self._sleep(delay)

    # -- list and watch ----------------------------------------------------------

    # A relist is applied page by page, not collected and then compared: what it holds
    # beyond the cache is one page, so its memory high-water mark (which the allocator
    # keeps) is a page's, not a second copy of the cache. An item at the version held is
    # dropped before it is transformed. The handlers get an update per changed object,
    # in the list's order, the latest version only; what the list no longer has is
    # deleted last (as client-go's Replace). Meanwhile, and after a list that fails
    # part-way, the cache holds the pages applied at the list's version and the rest at
    # the versions it held: each object as new as before or newer, the deleted ones
    # still there until a list completes, as they were while the watch was away.
    async def _list_and_replace(self) -> None:
        for attempt in itertools.count(1):
            seen: set[str] = set()
            version, paged = "", False
            pages = list_pages(
                self.client,
                self.resource,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                # The last try is unpaged (client-go's pager does the same): a
                # compaction cannot expire a continue token that is never asked for.
                page_size=None if attempt == LIST_ATTEMPTS else self.page_size,
            )
            try:
                async for page in pages:
                    paged = True
                    # Every page is cut from the first page's snapshot.
                    version = version or str(meta_of(page).get("resourceVersion", ""))
                    self._apply_page(page.pop("items", None) or [], seen)
                break
            except ApiError as exc:
                # Compaction overtook a slow paged list (a continue token expired);
                # start over, but not forever. What was applied is newer than what it
                # replaced, so it stays.
                if not (exc.gone and paged) or attempt >= LIST_ATTEMPTS:
                    raise
                log.debug("%s: list continue token expired, listing from the start", self.name)
        self.lists += 1
        self.metrics.cache_lists.labels(self.resource.plural).inc()
        for key in [key for key in self._items if key not in seen]:
            self._dispatch_delete(DeletedFinalStateUnknown(self._remove(key)))
        self.resource_version = version
        self.synced.set()

    def _apply_page(self, items: builtins.list[JSON], seen: set[str]) -> None:
        # Popped (in the list's order), so that an item dropped here is freed now, not
        # with its page.
        items.reverse()
        while items:
            item = items.pop()
            key = object_key(item)
            seen.add(key)
            held = self._items.get(key)
            if held is not None and resource_version(held) == resource_version(item):
                continue
            # List items lack kind and apiVersion; watch objects have them.
            item.setdefault("kind", self.resource.kind)
            item.setdefault("apiVersion", self.resource.api_version)
            if self._transform is not None:
                item = self._transform(item)
            self._apply(key, item)

    async def _watch_once(self) -> None:
        self.watches += 1
        self._stream_events = 0
        stream = self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version or None,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            # Spread over [min, 2*min] like client-go, so watches do not all expire together.
            timeout_seconds=random.randint(self.min_watch_timeout, 2 * self.min_watch_timeout),
            bookmarks=True,
        )
        open_watches = self.metrics.watches_open.labels(self.resource.plural)
        open_watches.inc()
        try:
            async for event in stream:
                self._handle_event(event)
                self._stream_events += 1  # only events that worked make the watch healthy
                if self._stream_events == 1:
                    self.failures.succeeded("watching")
        except ApiError as exc:
            if exc.gone:
                raise _Gone from exc
            raise
        finally:
            open_watches.dec()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _handle_event(self, event: JSON) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 500)
            if code == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _Gone(obj.get("message", ""))
            raise ApiError(code, obj, "WATCH", self.resource.path(self.namespace))
        version = resource_version(obj)
        if kind == "BOOKMARK":
            if version:
                self.resource_version = version
            return
        self.events += 1
        if self._transform is not None:
            obj = self._transform(obj)
        key = object_key(obj)
        if kind in ("ADDED", "MODIFIED"):
            self._apply(key, obj)
        elif kind == "DELETED":
            if key in self._items:
                self._remove(key)
            self._dispatch_delete(obj)
        else:
            log.warning("%s: ignoring watch event of type %r", self.name, kind)
        if version:
            self.resource_version = version

    # -- store and indexes ---------------------------------------------------------

    def _apply(self, key: str, obj: JSON) -> None:
        old: JSON | None = self._items.get(key)
        if old is not None and _uid(old) != _uid(obj):
            # Deleted and created again under the same name while we were not looking.
            self._remove(key)
            self._dispatch_delete(DeletedFinalStateUnknown(old))
            old = None
        self._store(key, obj, old)
        if old is None:
            for handlers in self._handlers:
                if handlers.on_add is not None:
                    self._call(handlers.on_add, obj)
        elif resource_version(old) != resource_version(obj):
            for handlers in self._handlers:
                if handlers.on_update is not None:
                    self._call(handlers.on_update, old, obj)

    def _dispatch_delete(self, obj: JSON) -> None:
        for handlers in self._handlers:
            if handlers.on_delete is not None:
                self._call(handlers.on_delete, obj)

    def _store(self, key: str, obj: JSON, old: JSON | None) -> None:
        if self._derive is not None:
            # Built before the object is stored, so a reader never finds the object
            # without its value; the value is built from `obj`, so never stale.
            self._derived[key] = self._derived_of(self._derive, obj)
        self._items[key] = obj
        indices = self._indices
        for name, func in self._indexers.items():
            new_values = func(obj)
            if old is None:
                # An add: nothing to compare with or take out (most events of a scale-up).
                for value in new_values:
                    indices[name].setdefault(value, set()).add(key)
                continue
            new_set, old_set = set(new_values), set(func(old))
            if new_set == old_set:
                continue
            index = indices[name]
            for value in old_set - new_set:
                _discard(index, value, key)
            for value in new_set - old_set:
                index.setdefault(value, set()).add(key)

    def _derived_of(self, derive: Callable[[JSON], Any], obj: JSON) -> Any:
        try:
            return derive(obj)
        except Exception:
            # An object `derive` cannot read must not stop the cache for every other:
            # its value is None, and a reader that needs one reads the object itself.
            log.exception("%s: deriving a value from %s failed", self.name, object_key(obj))
            return None

    def _remove(self, key: str) -> JSON:
        old = self._items.pop(key)
        self._derived.pop(key, None)
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(old):
                _discard(index, value, key)
        return old

    def _call(self, handler: Callable[..., None], *args: JSON) -> None:
        try:
            handler(*args)
        except Exception:
            # One faulty handler must not stop the cache for everyone else.
            log.exception("%s: event handler %r failed", self.name, handler)


def strip_managed_fields(obj: JSON) -> JSON:
    """Drop ``metadata.managedFields``: a third of a typical pod, read by no controller."""
    meta = obj.get("metadata")
    if meta:
        meta.pop("managedFields", None)
    return obj


def _uid(obj: JSON) -> str:
    return uid_of(obj)


def _discard(index: dict[str, set[str]], value: str, key: str) -> None:
    keys = index.get(value)
    if keys is None:
        return
    keys.discard(key)
    if not keys:
        del index[value]
