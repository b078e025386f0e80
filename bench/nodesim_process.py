"""The node simulator as a process of its own, so that a benchmark's driver and the
controller under test do not share its event loop:

    python -m bench.nodesim_process KUBECONFIG NODES

Prints ``ready`` on stdout once the nodes are schedulable and the pod watch has
listed, then runs until SIGTERM or SIGINT. Nodes are left in place: the control
plane is thrown away after a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from lws_localcluster.nodesim.nodes import default_nodes
from lws_localcluster.nodesim.simulator import NodeSimulator


async def serve(kubeconfig: str, nodes: int, workers: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    simulator = NodeSimulator(
        kubeconfig,
        default_nodes(nodes),
        workers=workers,
        max_concurrent_writes=workers,
        delete_nodes_on_stop=False,
        schedulable_timeout=300.0,
    )
    async with simulator:
        print("ready", flush=True)
        await stop.wait()
        print(
            f"events={simulator.stats.events} status_writes={simulator.stats.status_writes} "
            f"write_errors={simulator.stats.write_errors}",
            file=sys.stderr,
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kubeconfig")
    parser.add_argument("nodes", type=int)
    parser.add_argument("--workers", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(serve(args.kubeconfig, args.nodes, args.workers))


if __name__ == "__main__":
    main()
