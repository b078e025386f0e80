"""Watch caches filled with given objects, for unit tests of the reconcilers and
webhooks that read them: real informers over a lister that serves a fixed list and a
watch that never sends anything."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol, TypeVar

from leaderworkerset.api.objects import labels_of
from leaderworkerset.api.resources import Resource
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.disaggregatedset.caches import DsCaches, build_ds_caches


class _Informers(Protocol):
    def all(self) -> Any: ...


C = TypeVar("C", bound=_Informers)

JSON = dict[str, Any]


class StaticLister:
    """Lists the seeded objects of a resource; its watches stay silent."""

    def __init__(self, objects: Iterable[JSON]) -> None:
        self.objects = list(objects)

    async def list(self, resource: Resource, namespace: str | None = None, **kwargs: Any) -> JSON:
        selector = kwargs.get("label_selector") or ""
        items = [
            o
            for o in self.objects
            if o.get("kind") == resource.kind and _selected(selector, labels_of(o))
        ]
        return {"metadata": {"resourceVersion": "1"}, "items": [dict(o) for o in items]}

    async def watch(self, resource: Resource, namespace: str | None = None, **kwargs: Any) -> Any:
        await asyncio.Event().wait()
        yield {}  # never reached: makes this an async generator


def _selected(selector: str, labels: dict[str, str]) -> bool:
    """The existence requirements the caches use: `key` and `!key`, comma-separated."""
    for requirement in filter(None, selector.split(",")):
        if requirement.startswith("!"):
            if requirement[1:] in labels:
                return False
        elif requirement not in labels:
            return False
    return True


@contextlib.asynccontextmanager
async def started(caches: C) -> AsyncIterator[C]:
    """`caches` (anything with `all()` informers) started and synced, stopped after."""
    for informer in caches.all():
        informer.start()
    try:
        for informer in caches.all():
            assert await informer.wait_synced(5), informer.name
        yield caches
    finally:
        for informer in caches.all():
            await informer.stop()


@contextlib.asynccontextmanager
async def seeded_caches(*objects: JSON) -> AsyncIterator[LwsCaches]:
    """Caches (as `build_caches` makes them) holding `objects`, each with its `kind`."""
    async with started(build_caches(StaticLister(objects))) as caches:
        yield caches


@contextlib.asynccontextmanager
async def seeded_ds_caches(*objects: JSON) -> AsyncIterator[DsCaches]:
    """The DisaggregatedSet controller's caches, filled with `objects`."""
    async with started(build_ds_caches(StaticLister(objects))) as caches:
        yield caches
