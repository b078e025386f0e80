"""Templates the workload APIs refuse are refused when the LeaderWorkerSet is created or
updated, with the LWS field named, and nothing is left behind: the validating webhook
dry-runs what the controller would build, through the real API server. So is an
exclusive-placement topology the pods' affinity could not carry."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.playground import find_kubectl

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import DEPLOYMENTS, LEADERWORKERSETS, STATEFULSETS
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.toolkit.lws import PAUSE, lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
LWT = "spec.leaderWorkerTemplate"
WORKER = f"{LWT}.workerTemplate"
LEADER = f"{LWT}.leaderTemplate"


def containers(body: JSON, template: str = "workerTemplate") -> list[JSON]:
    result: list[JSON] = body["spec"]["leaderWorkerTemplate"][template]["spec"]["containers"]
    return result


def no_containers(body: JSON) -> None:
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"] = []


def bad_container_name(body: JSON) -> None:
    containers(body)[0]["name"] = "Bad_Name"


def empty_image(body: JSON) -> None:
    containers(body)[0]["image"] = ""


def bad_claim_name(body: JSON) -> None:
    body["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = [
        {
            "metadata": {"name": "Bad_Claim"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ]


def bad_claim_beside_a_volume(body: JSON) -> None:
    bad_claim_name(body)
    spec = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]


def unknown_retention(body: JSON) -> None:
    body["spec"]["leaderWorkerTemplate"]["persistentVolumeClaimRetentionPolicy"] = {
        "whenDeleted": "Sometimes"
    }


def bad_leader_template(body: JSON) -> None:
    template = copy.deepcopy(body["spec"]["leaderWorkerTemplate"]["workerTemplate"])
    template["spec"]["containers"][0]["name"] = "Bad_Name"
    body["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = template


def hash_restart_never(body: JSON) -> None:
    body["spec"]["groupIdentity"] = c.GROUP_IDENTITY_HASH
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["restartPolicy"] = "Never"


def topology_not_a_key(body: JSON) -> None:
    body["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "Not A Key"}


CASES: list[tuple[str, Callable[[JSON], None], str]] = [
    (
        "exclusive-topology-not-a-key",
        topology_not_a_key,
        f"metadata.annotations.{c.ANNOTATION_EXCLUSIVE_TOPOLOGY}",
    ),
    ("no-containers", no_containers, f"{WORKER}.spec.containers"),
    ("bad-name", bad_container_name, f"{WORKER}.spec.containers[0].name"),
    ("empty-image", empty_image, f"{WORKER}.spec.containers[0].image"),
    ("bad-claim", bad_claim_name, f"{LWT}.volumeClaimTemplates[0].metadata.name"),
    (
        "bad-claim-beside-a-volume",
        bad_claim_beside_a_volume,
        f"{LWT}.volumeClaimTemplates[0].metadata.name",
    ),
    (
        "retention",
        unknown_retention,
        f"{LWT}.persistentVolumeClaimRetentionPolicy.whenDeleted",
    ),
    ("leader-template", bad_leader_template, f"{LEADER}.spec.containers[0].name"),
    ("hash-restart-policy", hash_restart_never, f"{WORKER}.spec.restartPolicy"),
]


def causes(exc: ApiError) -> list[str]:
    return [str(x.get("field")) for x in (exc.body.get("details") or {}).get("causes") or []]


async def nothing_created(api: ApiClient, namespace: str) -> None:
    """Neither the LWS nor any workload (the dry-run's throwaways included)."""
    assert (await api.list(LEADERWORKERSETS, namespace))["items"] == []
    for resource in (STATEFULSETS, DEPLOYMENTS):
        assert (await api.list(resource, namespace))["items"] == [], resource.plural


@pytest.mark.parametrize(("case", "breaks", "field"), CASES, ids=[c[0] for c in CASES])
async def test_refused_at_create_with_the_field_named(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    case: str,
    breaks: Callable[[JSON], None],
    field: str,
) -> None:
    body = lws_manifest("bad", namespace, replicas=1, size=2)
    breaks(body)
    with pytest.raises(ApiError) as info:
        await nodesim_api.create(LEADERWORKERSETS, body)
    error = info.value
    assert error.status == 422, error
    assert field in causes(error), (causes(error), error.message)
    assert field in error.message and '"bad" is invalid' in error.message
    await nothing_created(nodesim_api, namespace)


async def test_kubectl_create_shows_the_field(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, kubeconfig: Path
) -> None:
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("no kubectl (bash hack/build-tools.sh)")
    body = lws_manifest("bad", namespace, replicas=1, size=2)
    bad_container_name(body)
    done = await asyncio.to_thread(
        subprocess.run,
        [str(kubectl), f"--kubeconfig={kubeconfig}", "create", "-f", "-"],
        input=json.dumps(body),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert f"{WORKER}.spec.containers[0].name" in done.stderr, done.stderr
    assert "Bad_Name" in done.stderr
    await nothing_created(nodesim_api, namespace)


async def test_a_valid_lws_is_admitted_and_built(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    body = lws_manifest("good", namespace, replicas=1, size=2)
    body["spec"]["leaderWorkerTemplate"]["persistentVolumeClaimRetentionPolicy"] = {
        "whenDeleted": "Delete",
        "whenScaled": "Retain",
    }
    await api.create(LEADERWORKERSETS, body)

    async def leader() -> JSON | None:
        return await api.get_or_none(STATEFULSETS, "good", namespace)

    await eventually(leader, within=30, what="the leader StatefulSet")
    # A Hash one too: its leader workload is a Deployment.
    hashed = lws_manifest("hashed", namespace, replicas=1, size=2)
    hashed["spec"]["groupIdentity"] = c.GROUP_IDENTITY_HASH
    await api.create(LEADERWORKERSETS, hashed)


async def test_an_update_that_breaks_the_template_is_refused(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    created = await api.create(
        LEADERWORKERSETS, lws_manifest("kept", namespace, replicas=0, size=2)
    )
    broken = {
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [{"name": "Bad_Name", "image": PAUSE}]}}
            }
        }
    }
    with pytest.raises(ApiError) as info:
        await api.patch(LEADERWORKERSETS, "kept", broken, namespace=namespace)
    assert info.value.status == 422, info.value
    assert f"{WORKER}.spec.containers[0].name" in causes(info.value)
    stored = await api.get(LEADERWORKERSETS, "kept", namespace)
    assert stored["metadata"]["generation"] == created["metadata"]["generation"]
    assert stored["spec"] == created["spec"]
    # An update that builds nothing different is not asked about, and goes through.
    change = {"spec": {"startupPolicy": c.STARTUP_POLICY_LEADER_READY}}
    await api.patch(LEADERWORKERSETS, "kept", change, namespace=namespace)
