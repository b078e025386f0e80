"""The control plane's child processes: started, waited for, stopped, started again.

Each component is a child process in its own process group, with its log in
``<workdir>/logs/<component>.log``. Children are asked to die with the thread that
started them (``PR_SET_PDEATHSIG``), so even a SIGKILLed test run leaks no process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from lws_localcluster.controlplane.components import (
    APISERVER,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    ControlPlaneError,
    PortInUseError,
)

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1

# Reverse start order: clients first, etcd last, so nothing logs connection errors
# against an already stopped dependency.
STOP_ORDER = ((SCHEDULER, CONTROLLER_MANAGER), (APISERVER,), (ETCD,))


@dataclass(frozen=True)
class Revived:
    """A component found exited and started again: its exit code and last log line."""

    component: str
    exit_code: int
    last_line: str


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie has exited; only its parent's reaping is pending.
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def pid_belongs_to(pid: int, workdir: Path) -> bool:
    """Guard against signalling a recycled pid: ours all name the workdir.

    An argument must be the work dir or lie under it, so that a cluster in
    ``.../default2`` is not taken for one in ``.../default``.
    """
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    wd = str(workdir).encode()
    return any(a == wd or a.endswith(b"=" + wd) or (wd + b"/") in a for a in args)


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_termination_handlers() -> None:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so that finally blocks,
    fixture teardown and atexit stop the cluster gracefully. Handlers someone
    else installed are left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _raise_interrupt)


class Supervisor:
    """The components this process started, by name."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def log(self, component: str) -> Path:
        return self.log_dir / f"{component}.log"

    def live_pids(self) -> dict[str, int]:
        return {n: p.pid for n, p in self.procs.items() if p.poll() is None}

    def spawn(self, component: str, command: Sequence[str]) -> None:
        log = self.log(component).open("ab")
        try:
            self.procs[component] = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
        finally:
            log.close()

    def wait(self, component: str, healthy: Callable[[], bool], deadline: float) -> None:
        """Until ``healthy()``; raises if the component exits or the deadline passes."""
        proc = self.procs[component]
        log = self.log(component)
        while True:
            if proc.poll() is not None:
                tail = log_tail(log)
                error = PortInUseError if "address already in use" in tail else ControlPlaneError
                raise error(f"{component} exited with code {proc.returncode}; {log}:\n{tail}")
            if healthy():
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{component} not healthy in time; {log}:\n{log_tail(log)}")
            time.sleep(0.1)

    def stop(self, component: str, timeout: float) -> None:
        """Stop one component and reap it."""
        self.terminate({component: self.procs[component].pid}, timeout)
        self.procs.pop(component).wait()

    def exited(self, names: Iterable[str]) -> list[Revived]:
        """Those of ``names`` that were started and have exited since, with how they
        ended; the caller starts them again."""
        gone = []
        for name in names:
            proc = self.procs.get(name)
            if proc is None or proc.poll() is None:
                continue
            last = log_tail(self.log(name), lines=1).strip()
            gone.append(Revived(name, proc.returncode, last))
        return gone

    def stop_all(self, timeout: float) -> None:
        for group in STOP_ORDER:
            pids = {n: self.procs[n].pid for n in group if n in self.procs}
            self.terminate(pids, timeout)
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        self.procs.clear()

    def terminate(self, pids: Mapping[str, int], timeout: float, *, group: bool = True) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; ``group`` signals each process group."""

        def send(sig: signal.Signals) -> None:
            for pid in pids.values():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if group:
                        os.killpg(pid, sig)
                    else:
                        os.kill(pid, sig)

        def wait(until: float) -> bool:
            while True:
                # Reap those of our children that have exited, so none stays a zombie.
                for name, pid in pids.items():
                    proc = self.procs.get(name)
                    if proc is not None and proc.pid == pid:
                        proc.poll()
                if not any(pid_alive(pid) for pid in pids.values()):
                    return True
                if time.monotonic() > until:
                    return False
                time.sleep(0.05)

        if not pids:
            return
        send(signal.SIGTERM)
        if not wait(time.monotonic() + timeout):
            send(signal.SIGKILL)
            wait(time.monotonic() + 5)
