"""Placement on the simulated nodes in integration tests: isolated node pools, the
exclusive-placement affinity terms the pod webhook writes, and reading them back."""

from __future__ import annotations

from typing import Any

from lws_localcluster.nodesim.nodes import NodeSpec

from tests.fixtures.nodesim import NodePool, isolated, isolated_pod_spec, unique_node_name

JSON = dict[str, Any]

HOSTNAME = "kubernetes.io/hostname"


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


async def isolated_nodes(pool: NodePool, group: str, node_labels: list[dict[str, str]]) -> None:
    """One small node per entry of `node_labels`, all in isolation group `group`."""
    for extra in node_labels:
        spec = NodeSpec(name=unique_node_name("sim-place"), cpu="1", memory="4Gi", labels=extra)
        await pool.add_spec(isolated(spec, group))


def on_isolated_nodes(manifest: JSON, group: str) -> JSON:
    """Pods of `manifest` select (and tolerate) the nodes of isolation group `group`."""
    template = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["spec"].update(isolated_pod_spec(group))
    return manifest


def annotate(manifest: JSON, **annotations: str) -> JSON:
    manifest["metadata"].setdefault("annotations", {}).update(annotations)
    return manifest


def required_terms(pod: JSON, kind: str) -> list[JSON]:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return list((affinity.get(kind) or {}).get(REQUIRED) or [])


def exclusive_terms(label_key: str, value: str, topology_key: str) -> tuple[JSON, JSON]:
    """The (podAffinity, podAntiAffinity) pair the pod webhook writes."""
    same = {
        "labelSelector": {
            "matchExpressions": [{"key": label_key, "operator": "In", "values": [value]}]
        },
        "topologyKey": topology_key,
    }
    others = {
        "labelSelector": {
            "matchExpressions": [
                {"key": label_key, "operator": "Exists"},
                {"key": label_key, "operator": "NotIn", "values": [value]},
            ]
        },
        "topologyKey": topology_key,
    }
    return same, others
