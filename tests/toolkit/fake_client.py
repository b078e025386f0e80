"""The fake API client of the unit tests: an in-memory API server behind the
:class:`~leaderworkerset.runtime.client.ApiClient` interface, so a controller, webhook
or rotator takes it where it takes the real client (no ``cast``).

It keeps the objects a test seeds (:meth:`FakeApiClient.put`) or the code writes,
with resource versions, and records every call. Reads of an object it does not hold
answer 404 as a server would; writes to one (a patch, a delete) succeed without
storing anything, so a test seeds only what the code reads. A test changes the
answers with ``fail`` (the error a verb on a kind raises) or ``on_call`` (awaited
before each answer: it may wait, raise, or return the answer itself).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.resources import Resource
from leaderworkerset.runtime.client import ApiClient, ApiError

JSON = dict[str, Any]
Key = tuple[str, str | None, str]  # (plural, namespace or None, name)


@dataclass(frozen=True)
class Call:
    """One call the code made: the verb (get, list, create, replace, patch, apply,
    delete, request), the kind's plural, the object's name and namespace, the body
    sent, and the remaining options as given (e.g. ``preconditions``, ``params``)."""

    verb: str
    plural: str
    name: str
    namespace: str | None = None
    body: Any = None
    options: dict[str, Any] = field(default_factory=dict)


def not_found(plural: str, name: str) -> ApiError:
    return ApiError(404, {"reason": "NotFound", "message": f'{plural} "{name}" not found'})


class FakeApiClient(ApiClient):
    """An :class:`ApiClient` answering from memory; see the module docstring."""

    def __init__(self) -> None:
        # A server nobody can reach: a call this class does not override fails loudly.
        super().__init__("http://fake-api-server.invalid")
        self.objects: dict[Key, JSON] = {}
        self.calls: list[Call] = []
        self.fail: dict[tuple[str, str], BaseException] = {}
        self.on_call: Callable[[Call], Awaitable[Any]] | None = None
        self._version = 0

    # --- what tests use --------------------------------------------------------------
    def put(self, resource: Resource, obj: JSON) -> JSON:
        """Store ``obj`` (a copy, with the next resource version) as the server would."""
        meta = obj["metadata"]
        self._version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._version)
        self.objects[self._key(resource, meta["name"], meta.get("namespace"))] = stored
        return copy.deepcopy(stored)

    def stored(self, resource: Resource, name: str, namespace: str | None = None) -> JSON | None:
        return self.objects.get(self._key(resource, name, namespace))

    def calls_of(self, verb: str | None = None, plural: str | None = None) -> list[Call]:
        return [
            call
            for call in self.calls
            if (verb is None or call.verb == verb) and (plural is None or call.plural == plural)
        ]

    def writes(self) -> list[Call]:
        """Every call that changes something on a real server."""
        return [
            c for c in self.calls if c.verb in ("create", "replace", "patch", "apply", "delete")
        ]

    # --- the ApiClient interface -------------------------------------------------------
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = 30.0,
    ) -> JSON:
        call = Call("request", "", path, body=body, options={"method": method, "params": params})
        answer = await self._called(call)
        return {} if answer is None else answer

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        found = await self.get_or_none(resource, name, namespace)
        if found is None:
            raise not_found(resource.plural, name)
        return found

    async def get_or_none(
        self, resource: Resource, name: str, namespace: str | None = None
    ) -> JSON | None:
        answer = await self._called(Call("get", resource.plural, name, namespace))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        found = self.stored(resource, name, namespace)
        return copy.deepcopy(found) if found is not None else None

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
        options = {"label_selector": label_selector, "field_selector": field_selector}
        answer = await self._called(Call("list", resource.plural, "", namespace, options=options))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        wanted = _equalities(label_selector)
        items = [
            copy.deepcopy(obj)
            for (plural, ns, _), obj in sorted(self.objects.items(), key=lambda kv: str(kv[0]))
            if plural == resource.plural
            and (namespace is None or ns == namespace)
            and wanted.items() <= (obj["metadata"].get("labels") or {}).items()
        ]
        return {"items": items, "metadata": {"resourceVersion": str(self._version)}}

    async def create(self, resource: Resource, obj: JSON, namespace: str | None = None) -> JSON:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        name = str(obj["metadata"].get("name", ""))
        answer = await self._called(Call("create", resource.plural, name, ns, obj))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        if self.stored(resource, name, ns) is not None:
            raise ApiError(409, {"reason": "AlreadyExists", "message": f"{name} exists"})
        return self.put(resource, {**obj, "metadata": {**obj["metadata"], "namespace": ns}})

    async def replace(
        self, resource: Resource, obj: JSON, *, subresource: str | None = None
    ) -> JSON:
        meta = obj["metadata"]
        options = {"subresource": subresource}
        call = Call("replace", resource.plural, meta["name"], meta.get("namespace"), obj, options)
        answer = await self._called(call)
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        current = self.stored(resource, meta["name"], meta.get("namespace"))
        if current is None:
            raise not_found(resource.plural, meta["name"])
        version = meta.get("resourceVersion")
        if version and version != current["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
        return self.put(resource, obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        content_type: str = "application/merge-patch+json",
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> JSON:
        options = {"subresource": subresource, "content_type": content_type}
        answer = await self._called(Call("patch", resource.plural, name, namespace, patch, options))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        current = self.stored(resource, name, namespace)
        if current is None or not isinstance(patch, dict):
            return patch if isinstance(patch, dict) else {}
        return self.put(resource, _merged(current, patch))

    async def apply(
        self, resource: Resource, obj: JSON, *, field_manager: str, force: bool = True
    ) -> JSON:
        meta = obj["metadata"]
        options = {"field_manager": field_manager, "force": force}
        call = Call("apply", resource.plural, meta["name"], meta.get("namespace"), obj, options)
        answer = await self._called(call)
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        return self.put(resource, obj)

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: JSON | None = None,
    ) -> JSON:
        options = {
            "propagation_policy": propagation_policy,
            "grace_period_seconds": grace_period_seconds,
            "preconditions": preconditions,
        }
        answer = await self._called(Call("delete", resource.plural, name, namespace, None, options))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        self.objects.pop(self._key(resource, name, namespace), None)
        return {}

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
        # Unit tests feed caches their events by hand; a watch means a test set-up bug.
        raise AssertionError(f"the fake API client serves no watches ({resource.plural})")
        yield {}  # pragma: no cover  (makes this an async generator, as the real one is)

    # --- inside ------------------------------------------------------------------------
    def _key(self, resource: Resource, name: str, namespace: str | None) -> Key:
        return (resource.plural, namespace if resource.namespaced else None, name)

    async def _called(self, call: Call) -> Any:
        self.calls.append(call)
        if self.on_call is not None:
            answer = await self.on_call(call)
            if answer is not None:
                return answer
        error = self.fail.get((call.verb, call.plural))
        if error is not None:
            raise error
        return None


def _equalities(selector: str | None) -> dict[str, str]:
    if not selector:
        return {}
    pairs = (term.split("=", 1) for term in selector.split(",") if "=" in term)
    return {k.strip(): v.strip() for k, v in pairs}


def _merged(current: JSON, patch: JSON) -> JSON:
    """A JSON merge patch (RFC 7386) applied to a copy of ``current``."""
    result = copy.deepcopy(current)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
