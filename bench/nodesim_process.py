"""The node simulator as a process of its own, so that a benchmark's driver and the
controller under test do not share its event loop:

    python -m bench.nodesim_process KUBECONFIG NODES [--faults SOCKET]

Prints ``ready`` on stdout once the nodes are schedulable and the pod watch has
listed, then runs until SIGTERM or SIGINT. With --faults it also answers fault
requests (a container crash, ...) on that unix socket
(lws_localcluster.nodesim.control). Nodes are left in place: the control plane is
thrown away after a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from lws_localcluster.nodesim.control import serve_faults
from lws_localcluster.nodesim.nodes import default_nodes
from lws_localcluster.nodesim.simulator import NodeSimulator


async def serve(kubeconfig: str, nodes: int, workers: int, faults: Path | None = None) -> None:
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
        server = await serve_faults(simulator, faults) if faults else None
        print("ready", flush=True)
        await stop.wait()
        if server is not None:
            server.close()
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
    parser.add_argument("--faults", type=Path, help="answer fault requests on this unix socket")
    args = parser.parse_args()
    asyncio.run(serve(args.kubeconfig, args.nodes, args.workers, args.faults))


if __name__ == "__main__":
    main()
