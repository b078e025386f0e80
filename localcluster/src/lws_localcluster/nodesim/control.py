"""Faults from the shell: a unix socket in front of a running :class:`NodeSimulator`.

The simulator keeps a pod's fault state (a crashed container, a stalled termination)
in its own memory, so a fault must reach the process that runs it. One request is one
JSON line, one answer is one JSON line: ``{"ok": true}`` or ``{"error": "..."}``. A
socket file in the cluster's work dir needs no port, is reachable only by the user who
owns the work dir, and goes away with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lws_localcluster.nodesim.simulator import NodeSimulator

log = logging.getLogger(__name__)

FaultRequest = dict[str, Any]
_Handler = Callable[[NodeSimulator, FaultRequest], Awaitable[None]]


async def _crash(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.restart_container(
        r["namespace"],
        r["pod"],
        r.get("container"),
        exit_code=int(r.get("exit_code", 1)),
        downtime=float(r.get("downtime", 0.0)),
    )


async def _fail(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.fail_pod(r["namespace"], r["pod"], exit_code=int(r.get("exit_code", 1)))


async def _unready(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.set_container_ready(r["namespace"], r["pod"], False, r.get("container"))


async def _ready(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.set_container_ready(r["namespace"], r["pod"], True, r.get("container"))


async def _stall(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.stall_termination(r["namespace"], r["pod"])


async def _release(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.release_termination(r["namespace"], r["pod"])


async def _node_down(sim: NodeSimulator, r: FaultRequest) -> None:
    # By default the kubelet just goes silent, and the node lifecycle controller
    # says so; the flags report a NotReady status at once, as a live kubelet would
    # (not-ready) or as that controller does once the grace period ends (unreachable).
    status = "Unknown" if r.get("unreachable") else "False" if r.get("not_ready") else None
    await sim.set_node_ready(_our_node(sim, r["node"]), False, status=status)


async def _node_up(sim: NodeSimulator, r: FaultRequest) -> None:
    await sim.set_node_ready(_our_node(sim, r["node"]), True)


def _our_node(sim: NodeSimulator, name: str) -> str:
    if name not in sim.node_names:
        raise LookupError(f"node {name} is not simulated here (nodes: {sim.node_names})")
    return name


async def _ping(sim: NodeSimulator, r: FaultRequest) -> None:
    """Nothing: lets a caller know the simulator is up and answering."""


FAULTS: dict[str, _Handler] = {
    "ping": _ping,
    "crash": _crash,
    "fail": _fail,
    "unready": _unready,
    "ready": _ready,
    "stall": _stall,
    "release": _release,
    "node-down": _node_down,
    "node-up": _node_up,
}


async def serve_faults(sim: NodeSimulator, path: Path) -> asyncio.Server:
    """Answer fault requests on ``path`` until the returned server is closed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by a simulator that was killed

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            answer = await _answer(sim, await reader.readline())
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_unix_server(handle, path=str(path))
    os.chmod(path, 0o600)
    return server


async def _answer(sim: NodeSimulator, line: bytes) -> dict[str, Any]:
    try:
        request = json.loads(line)
        handler = FAULTS[request["fault"]]
    except (ValueError, KeyError, TypeError):
        return {"error": f"not a fault request: {line[:200]!r}; faults: {sorted(FAULTS)}"}
    try:
        await handler(sim, request)
    except (LookupError, ValueError) as err:
        return {"error": str(err).strip("'\"")}
    except Exception as err:
        log.exception("fault %s failed", request)
        return {"error": f"{type(err).__name__}: {err}"}
    log.info("fault applied: %s", request)
    return {"ok": True}


def send_fault(path: Path, request: FaultRequest, timeout: float = 60.0) -> None:
    """Ask the simulator behind ``path`` to apply a fault; RuntimeError if it refuses."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as err:
            raise ConnectionError(f"no node simulator answers on {path}: {err}") from None
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    answer = json.loads(data or b"{}")
    if not answer.get("ok"):
        raise RuntimeError(answer.get("error") or "the node simulator gave no answer")
