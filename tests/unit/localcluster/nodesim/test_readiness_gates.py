"""A readiness gate set True by a controller between the simulator's read of a pod and its
status write comes back merged into the write's answer, while the gate's own watch event
is older than that answer and dropped as an echo. The simulator must still recompute
Ready from it, as a kubelet does on every status sync."""

from __future__ import annotations

import copy
from typing import Any

from lws_localcluster.nodesim.fleet import SimNode
from lws_localcluster.nodesim.nodes import NodeSpec, release_networks
from lws_localcluster.nodesim.simulator import NodeSimulator

GATE = "leaderworkerset.sigs.k8s.io/group-ready"
KEY = "ns/leader"


def ready_of(status: dict[str, Any]) -> str | None:
    for cond in status.get("conditions") or []:
        if cond["type"] == "Ready":
            return str(cond["status"])
    return None


class GateSetMeanwhile:
    """Answers each status patch with the pod as stored: the patch merged over a pod on
    which another writer had already set the gate True."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: object, name: str, patch: dict[str, Any], **_: Any) -> Any:
        self.patches.append(patch)
        stored = copy.deepcopy(self.pod)
        status = dict(patch["status"])
        for ips in ("hostIPs", "podIPs"):
            status[ips] = [ip for ip in status[ips] if "ip" in ip]  # the $patch marker goes
        # Conditions merge by type, as a strategic merge patch does.
        conditions = {c["type"]: c for c in stored["status"].get("conditions") or []}
        conditions.update({c["type"]: c for c in status["conditions"]})
        conditions[GATE] = {"type": GATE, "status": "True"}
        stored["status"] = {**status, "conditions": list(conditions.values())}
        version = int(stored["metadata"]["resourceVersion"]) + 2
        stored["metadata"]["resourceVersion"] = str(version)
        self.pod = stored
        return stored

    async def close(self) -> None:
        pass


async def test_a_gate_set_during_a_status_write_is_read_from_the_answer() -> None:
    pod = {
        "metadata": {"name": "leader", "namespace": "ns", "uid": "u1", "resourceVersion": "10"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "main", "image": "x"}],
            "readinessGates": [{"conditionType": GATE}],
        },
        "status": {},
    }
    api = GateSetMeanwhile(pod)
    sim = NodeSimulator(api=api)  # type: ignore[arg-type]
    try:
        sim.fleet.nodes["n1"] = SimNode(NodeSpec("n1"), "172.20.0.1")
        sim.cache.remember(copy.deepcopy(pod))
        assert await sim._queue.get() == KEY
        await sim._sync(KEY)
        sim._queue.done(KEY)
        # Our write computed Ready=False (no gate yet); the answer shows the gate True.
        assert ready_of(api.patches[0]["status"]) == "False"
        assert sim._queue.processing == set() and len(sim._queue) == 1
        assert await sim._queue.get() == KEY
        await sim._sync(KEY)
        sim._queue.done(KEY)
        assert ready_of(api.patches[-1]["status"]) == "True"
        # Nothing left to recompute: no third write and nothing queued.
        assert len(api.patches) == 2 and len(sim._queue) == 0
    finally:
        sim._queue.shutdown()
        release_networks(sim._network_slot)
