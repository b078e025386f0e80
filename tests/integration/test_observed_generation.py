"""status.observedGeneration on the real control plane (upstream issue #698): it reaches
metadata.generation once a LeaderWorkerSet or DisaggregatedSet is reconciled, and again
after each spec change (a rollout, a scale, and an edit that changes nothing the
controller makes, whose only status change is the generation); a metadata-only edit
brings no status write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.resources import DISAGGREGATEDSETS, LEADERWORKERSETS, Resource
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.runtime.controller import Controller
from tests.toolkit.cluster import wait_ready
from tests.toolkit.disaggregatedset import manifest, rolling_role, settled
from tests.toolkit.lws import lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]


async def observed_current(api: ApiClient, resource: Resource, namespace: str, name: str) -> JSON:
    """The object once its status describes its current generation."""

    async def probe() -> JSON | None:
        obj = await api.get(resource, name, namespace)
        observed = (obj.get("status") or {}).get("observedGeneration")
        return obj if observed == obj["metadata"]["generation"] else None

    return await eventually(probe, within=90, what=f"{name}'s observedGeneration")


async def edit(
    api: ApiClient, resource: Resource, namespace: str, name: str, patch: JSON, generation: int
) -> JSON:
    """Apply `patch`; the stored generation must be `generation` after it."""
    answer = await api.patch(resource, name, patch, namespace=namespace)
    assert answer["metadata"]["generation"] == generation
    return answer


@dataclass
class Spy:
    """What the running controller does to one object: the status writes its API client
    sends (by the client it shares with every controller), and the reconciles of the
    object that finished. Counted at the source, since a status write that changes
    nothing does not change the stored object (the API server keeps its
    resourceVersion) and so cannot be seen from outside."""

    resource: Resource
    name: str
    status_writes: list[JSON] = field(default_factory=list)
    reconciled: int = 0

    def install(
        self, running: RunningController, controller: Controller, monkeypatch: pytest.MonkeyPatch
    ) -> Spy:
        assert running.manager is not None
        client = running.manager.client
        send_patch, send_replace = client.patch, client.replace

        async def patch(resource: Resource, name: str, body: Any, **kwargs: Any) -> JSON:
            if self._ours(resource, name, kwargs.get("subresource")):
                self.status_writes.append(body)
            return await send_patch(resource, name, body, **kwargs)

        async def replace(resource: Resource, obj: JSON, **kwargs: Any) -> JSON:
            if self._ours(resource, obj["metadata"]["name"], kwargs.get("subresource")):
                self.status_writes.append(obj)
            return await send_replace(resource, obj, **kwargs)

        reconcile = controller._reconcile

        async def counted(key: str) -> Any:
            result = await reconcile(key)
            if key.rpartition("/")[2] == self.name:
                self.reconciled += 1
            return result

        monkeypatch.setattr(client, "patch", patch)
        monkeypatch.setattr(client, "replace", replace)
        monkeypatch.setattr(controller, "_reconcile", counted)
        return self

    def _ours(self, resource: Resource, name: str, subresource: object) -> bool:
        return (
            resource.plural == self.resource.plural
            and name == self.name
            and (subresource == "status")
        )

    async def touch_writes_nothing(self, api: ApiClient, namespace: str) -> None:
        """An annotation (no new generation) wakes the controller; the pass it makes
        must send no status write."""
        self.status_writes.clear()
        passes = self.reconciled
        patch = {"metadata": {"annotations": {"test/touched": "1"}}}
        await api.patch(self.resource, self.name, patch, namespace=namespace)
        await eventually(lambda: self.reconciled > passes, within=30, what="a pass after the touch")
        assert self.status_writes == []


async def ds_steady(api: ApiClient, namespace: str, name: str, replicas: dict[str, int]) -> JSON:
    """The set settled and its status saying so: every role ready, nothing progressing."""
    await settled(api, namespace, name, replicas)

    async def probe() -> JSON | None:
        ds = await api.get(DISAGGREGATEDSETS, name, namespace)
        status = ds.get("status") or {}
        ready = {x["name"]: x.get("readyReplicas") for x in status.get("roleStatuses") or ()}
        progressing = [x for x in status.get("conditions") or () if x["type"] == "Progressing"]
        done = [x["status"] for x in progressing] == ["False"]
        return ds if ready == replicas and done else None

    return await eventually(probe, within=60, what=f"{name}'s status settled")


async def test_leaderworkerset_observed_generation_follows_each_spec_change(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, name = nodesim_api, "observed"
    assert lws_controller.controllers is not None
    spy = Spy(LEADERWORKERSETS, name).install(
        lws_controller, lws_controller.controllers.leaderworkersets, monkeypatch
    )
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=1, size=2))
    lws = await observed_current(api, LEADERWORKERSETS, namespace, name)
    assert lws["status"]["observedGeneration"] == 1
    await wait_ready(api, namespace, name, 1)

    # A template label: a new revision, a rollout.
    template = {"metadata": {"labels": {"test/edit": "rollout"}}}
    await edit(
        api,
        LEADERWORKERSETS,
        namespace,
        name,
        {"spec": {"leaderWorkerTemplate": {"workerTemplate": template}}},
        2,
    )
    await observed_current(api, LEADERWORKERSETS, namespace, name)
    await wait_ready(api, namespace, name, 1)

    # Replicas: a scale.
    await edit(api, LEADERWORKERSETS, namespace, name, {"spec": {"replicas": 2}}, 3)
    await observed_current(api, LEADERWORKERSETS, namespace, name)
    settled_lws = await wait_ready(api, namespace, name, 2)

    # The rollout budget: no new revision, no group touched; the generation is the
    # only thing in the status to change.
    spy.status_writes.clear()
    budget = {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 1}}}
    await edit(api, LEADERWORKERSETS, namespace, name, {"spec": budget}, 4)
    lws = await observed_current(api, LEADERWORKERSETS, namespace, name)
    kept = ("replicas", "readyReplicas", "updatedReplicas", "hpaPodSelector")
    assert {k: lws["status"][k] for k in kept} == {k: settled_lws["status"][k] for k in kept}
    # One status write carried it, whole (no second write for the generation alone).
    assert spy.status_writes
    assert {w["status"]["observedGeneration"] for w in spy.status_writes} == {4}

    await wait_ready(api, namespace, name, 2)
    await spy.touch_writes_nothing(api, namespace)


async def test_disaggregatedset_observed_generation_follows_each_spec_change(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, name = nodesim_api, "observed"
    assert lws_controller.controllers is not None
    assert lws_controller.controllers.disaggregatedsets is not None
    spy = Spy(DISAGGREGATEDSETS, name).install(
        lws_controller, lws_controller.controllers.disaggregatedsets, monkeypatch
    )
    roles = [rolling_role("prefill", 1), rolling_role("decode", 1)]
    await api.create(DISAGGREGATEDSETS, manifest(name, namespace, *roles))
    await settled(api, namespace, name, {"prefill": 1, "decode": 1})
    ds = await observed_current(api, DISAGGREGATEDSETS, namespace, name)
    assert ds["status"]["observedGeneration"] == 1
    assert {x["observedGeneration"] for x in ds["status"]["conditions"]} == {1}

    # A template label on every role: a new revision, a rollout. (A merge patch replaces
    # the roles list whole, so the stored roles are edited and sent back.)
    stored = await api.get(DISAGGREGATEDSETS, name, namespace)
    for spec_role in stored["spec"]["roles"]:
        template = spec_role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        template.setdefault("metadata", {}).setdefault("labels", {})["test/edit"] = "rollout"
    await edit(api, DISAGGREGATEDSETS, namespace, name, {"spec": stored["spec"]}, 2)
    await observed_current(api, DISAGGREGATEDSETS, namespace, name)
    await settled(api, namespace, name, {"prefill": 1, "decode": 1})

    # Replicas of one role: a scale, no new revision.
    stored = await api.get(DISAGGREGATEDSETS, name, namespace)
    stored["spec"]["roles"][0]["spec"]["replicas"] = 2
    await edit(api, DISAGGREGATEDSETS, namespace, name, {"spec": stored["spec"]}, 3)
    await observed_current(api, DISAGGREGATEDSETS, namespace, name)
    before = await ds_steady(api, namespace, name, {"prefill": 2, "decode": 1})

    # An explicit placementPolicy of None: the same placement, so nothing the set owns
    # changes; only the generation the status describes does.
    spy.status_writes.clear()
    await edit(
        api, DISAGGREGATEDSETS, namespace, name, {"spec": {"placementPolicy": {"type": "None"}}}, 4
    )
    ds = await observed_current(api, DISAGGREGATEDSETS, namespace, name)
    assert ds["status"]["roleStatuses"] == before["status"]["roleStatuses"]
    assert {x["observedGeneration"] for x in ds["status"]["conditions"]} == {4}
    assert spy.status_writes
    assert {w["status"]["observedGeneration"] for w in spy.status_writes} == {4}

    await ds_steady(api, namespace, name, {"prefill": 2, "decode": 1})
    await spy.touch_writes_nothing(api, namespace)
