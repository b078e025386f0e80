"""runtime.client.list_pages: the one paged LIST loop (caches, kubectl lws, the simulator)."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import PODS, Resource
from leaderworkerset.runtime.client import list_pages


class _Pages:
    """Serves `pages` in order and records what each LIST asked for."""

    def __init__(self, *pages: JSON) -> None:
        self.pages = list(pages)
        self.asked: list[dict[str, Any]] = []

    async def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> JSON:
        self.asked.append({"namespace": namespace, **kw})
        return self.pages.pop(0)


async def test_each_page_is_asked_for_with_the_previous_token_until_none() -> None:
    lister = _Pages(
        {"metadata": {"continue": "t1", "resourceVersion": "7"}, "items": [{"n": 1}]},
        {"metadata": {"continue": "t2"}, "items": [{"n": 2}]},
        {"metadata": {"continue": ""}, "items": [{"n": 3}]},
        {"items": [{"n": "never asked for"}]},
    )
    pages = [p async for p in list_pages(lister, PODS, "ns", label_selector="a=b", page_size=2)]
    assert [item["n"] for page in pages for item in page["items"]] == [1, 2, 3]
    assert [a["continue_token"] for a in lister.asked] == [None, "t1", "t2"]
    assert all(a["limit"] == 2 and a["label_selector"] == "a=b" for a in lister.asked)
    assert all(a["namespace"] == "ns" and a["field_selector"] is None for a in lister.asked)
