"""What the node simulator needs on top of the project's raw JSON :class:`ApiClient`:
paginated lists, deletes that tolerate a vanished object, and Kubernetes time formats."""

from __future__ import annotations

import contextlib
from pathlib import Path

from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import Resource
from leaderworkerset.runtime.client import ApiClient, ApiError, list_pages

JsonObj = JSON


def simulator_client(kubeconfig: Path | str) -> ApiClient:
    # No client-side QPS limit: the simulator bounds its concurrent writes itself, and a
    # token bucket would cap how fast thousands of pods can start.
    return ApiClient.from_kubeconfig(kubeconfig, qps=0, user_agent="lws-nodesim")


async def list_all(
    api: ApiClient,
    resource: Resource,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    page_size: int = 500,
) -> tuple[list[JsonObj], str]:
    """Every item of a collection, page by page, and the list's resourceVersion."""
    items: list[JsonObj] = []
    version = ""
    pages = list_pages(
        api,
        resource,
        namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        page_size=page_size,
    )
    async for page in pages:
        items.extend(page.get("items") or [])
        version = str(meta_of(page).get("resourceVersion", ""))
    return items, version


async def delete_if_present(
    api: ApiClient,
    resource: Resource,
    name: str,
    namespace: str | None = None,
    *,
    uid: str | None = None,
    grace_period_seconds: int | None = None,
) -> bool:
    """Delete; False if the object is gone or (with ``uid``) the name holds a newer one."""
    try:
        await api.delete(
            resource,
            name,
            namespace,
            grace_period_seconds=grace_period_seconds,
            preconditions={"uid": uid} if uid else None,
        )
    except ApiError as err:
        # A failed UID precondition is a 409 Conflict.
        if err.not_found or (uid is not None and err.status == 409):
            return False
        raise
    return True


def resource_version_newer(candidate: str | None, current: str | None) -> bool:
    """Whether ``candidate`` is newer; resourceVersions are etcd revisions on a real server."""
    if not current:
        return True
    if not candidate:
        return False
    with contextlib.suppress(ValueError):
        return int(candidate) > int(current)
    return candidate != current
