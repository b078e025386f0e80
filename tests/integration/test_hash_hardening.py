"""Hash mode where a group's surroundings misbehave, against the real control plane:
a ResourceQuota that denies the per-group Service must not freeze the group-ready
condition, and a Service of the group's name that its leader does not own is never
used. Also: the leader Deployment's creation is reported by an Event."""

from __future__ import annotations

from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    EVENTS,
    LEADERWORKERSETS,
    PODS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import condition_is, is_ready
from tests.toolkit.cluster import (
    gated_pod,
    key_of,
    leaders,
    name_of,
    new_leader,
    wait_ready,
    workers_of,
)
from tests.toolkit.lws import hash_lws
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
UNIQUE = {"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA}


async def event_notes(api: ApiClient, namespace: str, lws: str) -> list[str]:
    """Notes of the events about LeaderWorkerSet `lws`."""
    items = (await api.list(EVENTS, namespace)).get("items", [])
    return [
        str(e.get("note"))
        for e in items
        if (e.get("regarding") or {}).get("kind") == c.KIND
        and (e.get("regarding") or {}).get("name") == lws
    ]


async def test_quota_on_services_does_not_freeze_group_ready(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """The per-group Service is gone and a quota refuses to let it be created again:
    the leader's group-ready condition still follows its worker, both ways."""
    api, name = nodesim_api, "quota"
    await api.create(
        LEADERWORKERSETS, hash_lws(name, namespace, replicas=1, size=2, networkConfig=UNIQUE)
    )
    await wait_ready(api, namespace, name, 1)
    (leader,) = await leaders(api, namespace, name)
    leader_name, service_name = name_of(leader), f"{name}-{key_of(leader)[:8]}"
    (worker,) = await workers_of(api, namespace, name, key_of(leader))

    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-services", "namespace": namespace},
        "spec": {"hard": {"services": "0"}},
    }
    await api.create(RESOURCE_QUOTAS, quota)

    async def quota_counted() -> bool:
        live = await api.get(RESOURCE_QUOTAS, "no-services", namespace)
        return "services" in ((live.get("status") or {}).get("used") or {})

    await eventually(quota_counted, within=60, what="the quota's usage computed")
    await api.delete(SERVICES, service_name, namespace)

    async def service_gone() -> bool:
        return await api.get_or_none(SERVICES, service_name, namespace) is None

    await eventually(service_gone, within=30, what="the per-group Service deleted")

    await node_simulator.set_container_ready(namespace, name_of(worker), False)

    async def group_not_ready() -> JSON | None:
        pod = await api.get(PODS, leader_name, namespace)
        held = condition_is(pod, c.CONDITION_GROUP_READY, "False") and not is_ready(pod)
        return pod if held else None

    await eventually(group_not_ready, within=60, what="group-ready False under the quota")
    # The quota really kept the Service from being created again all along.
    assert await service_gone()

    await node_simulator.set_container_ready(namespace, name_of(worker), True)

    async def group_ready() -> bool:
        pod = await api.get(PODS, leader_name, namespace)
        return condition_is(pod, c.CONDITION_GROUP_READY) and is_ready(pod)

    await eventually(group_ready, within=60, what="group-ready True again under the quota")
    assert await service_gone()


async def test_foreign_service_with_the_groups_name_is_not_adopted(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """A replacement leader waits behind its scheduling gate, so its key is known
    before anything exists for its group; a Service of the group's name, owned by
    nobody, is created in that window. Once admitted the group does not use it (an
    Event says why, no workers are built), and once it is removed the group gets a
    Service of its own and becomes ready."""
    api, name = nodesim_api, "foreign"
    await api.create(
        LEADERWORKERSETS, hash_lws(name, namespace, replicas=1, size=2, networkConfig=UNIQUE)
    )
    await wait_ready(api, namespace, name, 1)

    async def created_event() -> list[str] | None:
        notes = [n for n in await event_notes(api, namespace, name) if "leader" in n]
        return notes if f"Created leader deployment {name}" in notes else None

    notes = await eventually(created_event, within=30, what="the leader-created event")
    assert notes.count(f"Created leader deployment {name}") == 1

    (old,) = await leaders(api, namespace, name)
    # The old leader lingers Terminating, holding its replacement behind the gate.
    await node_simulator.stall_termination(namespace, name_of(old))
    await api.delete(PODS, name_of(old), namespace)
    replacement = await new_leader(api, namespace, name, {key_of(old)})
    assert gated_pod(replacement)
    replacement_name, key8 = name_of(replacement), key_of(replacement)[:8]
    service_name = f"{name}-{key8}"
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name, "namespace": namespace},
        "spec": {"clusterIP": "None", "selector": {"app": "somebody-else"}},
    }
    await api.create(SERVICES, foreign)
    await node_simulator.release_termination(namespace, name_of(old))

    async def refused() -> str | None:
        for note in await event_notes(api, namespace, name):
            if f"Service {namespace}/{service_name}" in note and "not using it" in note:
                return note
        return None

    note = await eventually(refused, within=60, what="the foreign Service reported")
    assert replacement_name in note

    async def left_alone() -> bool:
        service = await api.get(SERVICES, service_name, namespace)
        untouched = not service["metadata"].get("ownerReferences") and service["spec"][
            "selector"
        ] == {"app": "somebody-else"}
        no_workers = await api.get_or_none(STATEFULSETS, replacement_name, namespace) is None
        return untouched and no_workers

    assert await left_alone()
    await stays(left_alone, seconds=3, what="the foreign Service unused")
    admitted = await api.get(PODS, replacement_name, namespace)
    assert not gated_pod(admitted)

    await api.delete(SERVICES, service_name, namespace)

    async def own_service() -> JSON | None:
        service = await api.get_or_none(SERVICES, service_name, namespace)
        owners = (service or {}).get("metadata", {}).get("ownerReferences") or []
        mine = [o for o in owners if o.get("uid") == admitted["metadata"]["uid"]]
        return service if mine else None

    service = await eventually(own_service, within=90, what="the group's own Service")
    assert service["spec"]["selector"][c.LABEL_GROUP_INDEX] == key_of(admitted)
    await wait_ready(api, namespace, name, 1, within=120)
    assert [name_of(p) for p in await leaders(api, namespace, name)] == [replacement_name]
