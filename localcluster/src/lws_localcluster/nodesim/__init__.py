"""The node simulator: kubelets without containers, for a real control plane.

A local cluster has an API server, a scheduler and controllers but no nodes. The
simulator registers Node objects, renews their Leases, and moves every pod the
scheduler binds to them through the statuses a kubelet would report (running, ready,
terminating, failed, restarted), with faults that tests inject. The demo, the
benchmarks and the integration tests run it in the same process and event loop as the
controller.

It watches pods with the controller runtime's informer and queues their syncs on the
runtime's work queue, as a controller would; what a kubelet needs on top is its own. The
pod cache (``cache``) keeps, beside the informer's store, only the pods of its own nodes,
the answers to its own status writes ahead of the watch (whose echoes then queue
nothing), and kubelet state per pod UID. The pod queue (``workqueue``) adds a wait for
idleness, behind :meth:`NodeSimulator.settle`, and runs without the overall rate limit
a controller's queue has. Its queue and its watch record their metrics on a registry of
their own, which nothing serves: even in the controller's process (the demo, the
integration tests) they never reach the controller's ``/metrics``.

Modules: ``simulator`` (:class:`NodeSimulator`, the entry point), ``nodes`` (node
specs, node and lease objects, the default fleet), ``fleet`` (the running nodes),
``pods`` (pod status as a kubelet writes it), ``cache`` (the pods of its nodes),
``workqueue`` (their syncs), ``faults`` (injected failures),
``control`` (faults from another process, through a unix socket) and ``api`` (the API
client and JSON helpers).
"""

from lws_localcluster.nodesim.nodes import NodeSpec, default_nodes
from lws_localcluster.nodesim.simulator import NodeSimulator

__all__ = ["NodeSimulator", "NodeSpec", "default_nodes"]
