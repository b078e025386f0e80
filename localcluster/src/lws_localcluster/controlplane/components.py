"""What a local control plane is made of: its components' names, the ports they listen
on, where its files live, and its errors. Shared by the flag, process and readiness
modules beside this one, so none of them needs another."""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
COMPONENTS = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER)
STATE_FILE = "state.json"


class ControlPlaneError(RuntimeError):
    pass


class PortInUseError(ControlPlaneError):
    """A component found its port taken: start() retries on fresh ports."""


def cache_root() -> Path:
    return Path(os.environ.get("LWS_CACHE_DIR") or Path.home() / ".cache" / "leaderworkerset")


def default_workdir(name: str) -> Path:
    return cache_root() / "clusters" / name


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def pick(cls) -> Ports:
        # All sockets stay bound until every port is chosen, so the five differ.
        with contextlib.ExitStack() as stack:
            socks = [stack.enter_context(socket.socket()) for _ in range(5)]
            for s in socks:
                s.bind(("127.0.0.1", 0))
            return cls(*(s.getsockname()[1] for s in socks))

    @property
    def etcd_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client}"

    def secure_port(self, component: str) -> int:
        """kube-controller-manager's or kube-scheduler's own HTTPS port."""
        return self.controller_manager if component == CONTROLLER_MANAGER else self.scheduler
