"""The node simulator: kubelets without containers, for a real control plane.

A local cluster has an API server, a scheduler and controllers but no nodes. The
simulator registers Node objects, renews their Leases, and moves every pod the
scheduler binds to them through the statuses a kubelet would report (running, ready,
terminating, failed, restarted), with faults that tests inject. The demo, the
benchmarks and the integration tests run it in the same process and event loop as the
controller.

It has its own pod watch (``watch``), pod cache (``cache``) and work queue
(``workqueue``) rather than the controller runtime's informer and queue, because it
plays a different part: it is the cluster the controller is measured against, not a
controller. The runtime's queue publishes its depth, latency and retries to the
controller's metrics registry, which the in-process controller serves and the benchmarks
read, so a simulator queue there would pass for controller work; and the simulator's
cache keys kubelet state by pod UID and drops the echoes of its own status writes, which
the informer has no place for. The queue is the small deduplicating part of client-go's
that it needs, keyed by (namespace, name), with the wait for idleness behind
:meth:`NodeSimulator.settle`.

Modules: ``simulator`` (:class:`NodeSimulator`, the entry point), ``nodes`` (node
specs, node and lease objects, the default fleet), ``fleet`` (the running nodes),
``pods`` (pod status as a kubelet writes it), ``faults`` (injected failures),
``control`` (faults from another process, through a unix socket) and ``api`` (the API
client and JSON helpers).
"""

from lws_localcluster.nodesim.nodes import NodeSpec, default_nodes
from lws_localcluster.nodesim.simulator import NodeSimulator

__all__ = ["NodeSimulator", "NodeSpec", "default_nodes"]
