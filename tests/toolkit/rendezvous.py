"""The rendezvous workload on the real node, and what the tests read of it.

Every pod runs hack/images/rendezvous/rendezvous.py: the leader listens, each worker
resolves LWS_LEADER_ADDRESS through cluster DNS and connects, and a readiness probe on
/ready passes only once the group has met (for the leader: all its workers connected).
So an LWS that turns Available has, for real, found and reached every leader.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

from lws_localcluster.realnode.images import BuiltImage, ctr

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import PODS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.realnode import NAMESPACE
from tests.toolkit.cluster import key_of, labels, lws_pods
from tests.toolkit.lws import leaderworkerset

HTTP_PORT = 8080


def rendezvous_lws(
    name: str, image: BuiltImage, *, replicas: int = 2, size: int = 3, **spec: object
) -> JSON:
    container = {
        "name": "rendezvous",
        "image": image.ref,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "rendezvous", "containerPort": 7000}, {"containerPort": HTTP_PORT}],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": HTTP_PORT},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    }
    return leaderworkerset(name, replicas=replicas, size=size, container=container, **spec)


async def controller_pods(api: ApiClient) -> list[JSON]:
    pods = (await api.list(PODS, NAMESPACE, label_selector="control-plane=controller-manager"))[
        "items"
    ]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def pod_ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)


def meeting(pod: JSON) -> JSON:
    """A leader's account of its group, from its /ready (the host reaches pod IPs on the
    node's bridge)."""
    url = f"http://{pod['status']['podIP']}:{HTTP_PORT}/ready"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            body: JSON = json.loads(answer.read())
    except urllib.error.HTTPError as err:
        body = json.loads(err.read())
    return body


async def groups_met(api: ApiClient, namespace: str, name: str, size: int) -> dict[str, JSON]:
    """Leader pod name -> the workers its group met, once every pod of the LWS is Ready
    and every leader counts all ``size - 1`` workers, each a pod of its own group."""
    pods = await lws_pods(api, namespace, name)
    leaders = [p for p in pods if labels(p).get(c.LABEL_WORKER_INDEX) == "0"]
    met = {}
    for leader in leaders:
        group = [p for p in pods if key_of(p) == key_of(leader)]
        connected = meeting(leader).get("connected") or {}
        # A pod's hostname is its name, or in Hash mode its group's key and index.
        workers = {hostname(p) for p in group} - {hostname(leader)}
        hostnames = {w.get("hostname") for w in connected.values()}
        if len(connected) != size - 1 or hostnames != workers:
            raise AssertionError(f"{leader['metadata']['name']} met {connected}, not {workers}")
        met[leader["metadata"]["name"]] = connected
    return met


def hostname(pod: JSON) -> str:
    return str(pod["spec"].get("hostname") or pod["metadata"]["name"])


def kill_container(pod: JSON) -> None:
    """SIGKILL the pod's first container through containerd, as an OOM kill would."""
    container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    ctr("tasks", "kill", "--signal", "SIGKILL", container_id)


def container_log(kubectl: str, kubeconfig: str, namespace: str, pod: str) -> str:
    return subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "logs", "-n", namespace, pod],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
