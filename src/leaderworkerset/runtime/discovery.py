"""Which optional APIs the cluster serves, asked once at start.

A watch of a kind the API server does not serve fails for ever, and the caches
would never sync: such kinds are watched only once discovery has found them.
"""

from __future__ import annotations

from leaderworkerset.api.resources import Resource
from leaderworkerset.runtime.client import ApiClient, ApiError


async def serves(client: ApiClient, *resources: Resource) -> bool:
    """Whether the API server serves every one of `resources` (same group and version)."""
    found: dict[str, set[str]] = {}
    for resource in resources:
        if resource.api_version not in found:
            try:
                answer = await client.request("GET", f"/apis/{resource.api_version}")
            except ApiError as exc:
                if exc.not_found:
                    return False
                raise
            found[resource.api_version] = {
                str(r.get("name", "")) for r in answer.get("resources") or []
            }
        if resource.plural not in found[resource.api_version]:
            return False
    return True
