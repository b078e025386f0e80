"""A private containerd for the image tests: its own root, state and socket under a
temporary folder, so it neither sees nor disturbs any other containerd on the machine
(a node's included). Stopped, with every container it ran, and its folder removed on
the way out, whatever happened inside.

Needs root. Containers run with runc, named explicitly (`ctr run --runc-binary`): on the
development machine, whose cgroups are hybrid v1/v2, runc is the runtime that works, not
crun.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.toolkit.waiting import eventually_blocking

NAMESPACE = "lws-image-tests"
START_WITHIN = 30.0
STOP_WITHIN = 10.0

CONFIG = """\
version = 2
root = "{root}/root"
state = "{root}/state"

[grpc]
  address = "{root}/containerd.sock"

[ttrpc]
  address = "{root}/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  # As the node's containerd: a pod never gets a lower oom_score_adj than containerd's
  # own (which a test runner may have raised). CRI only; `ctr run` does not use it.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{root}/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      BinaryName = "{runc}"
"""


class Containerd:
    def __init__(self, root: Path, runc: str) -> None:
        self.root = root
        self.runc = runc
        self.address = str(root / "containerd.sock")
        self.log = root / "containerd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.root / "config.toml"
        config.write_text(CONFIG.format(root=self.root, runc=self.runc))
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                ["containerd", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        eventually_blocking(self._serving, "containerd to serve", within=START_WITHIN)

    def _serving(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"containerd exited: {self.log.read_text()[-2000:]}")
        return self.ctr("version", check=False).returncode == 0

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["ctr", "--address", self.address, "--namespace", NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"ctr {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def run(self, image: str, container_id: str, *options: str) -> list[str]:
        """`ctr run` arguments for IMAGE as CONTAINER_ID, with runc."""
        return ["run", "--runc-binary", self.runc, *options, image, container_id]

    def task_status(self, container_id: str) -> str | None:
        for line in self.ctr("tasks", "ls").stdout.splitlines()[1:]:
            words = line.split()
            if words and words[0] == container_id:
                return words[-1]
        return None

    def remove_all(self) -> None:
        """Kill and delete every task and container of the namespace."""
        for task in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
            self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
            eventually_blocking(
                lambda t=task: self.task_status(t) in ("STOPPED", None), f"{task} to stop"
            )
            self.ctr("tasks", "delete", task, check=False)
        for container in self.ctr("containers", "ls", "-q", check=False).stdout.split():
            self.ctr("containers", "delete", container, check=False)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_WITHIN)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _own_shims(address: str) -> list[int]:
    """Shims this containerd started (they outlive it): their command line names its
    socket."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmdline
            and cmdline[0].endswith(b"containerd-shim-runc-v2")
            and address.encode() in cmdline
        ):
            pids.append(int(entry.name))
    return pids


def _mounts_under(root: Path) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point == str(root) or point.startswith(f"{root}/"):
            points.append(point)
    return points


def _clean_up(daemon: Containerd) -> None:
    errors: list[str] = []
    try:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.remove_all()
    except Exception as err:  # keep going: the daemon must still stop
        errors.append(f"removing containers: {err}")
    daemon.stop()
    for pid in _own_shims(daemon.address):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for point in sorted(_mounts_under(daemon.root), reverse=True):  # deepest first
        subprocess.run(["umount", "-l", point], check=False)
    left = _mounts_under(daemon.root)
    if left:
        errors.append(f"still mounted, so not removed: {left}")
    else:
        shutil.rmtree(daemon.root, ignore_errors=True)
    if errors:
        raise AssertionError("; ".join(errors))


@contextlib.contextmanager
def private_containerd() -> Iterator[Containerd]:
    runc = shutil.which("runc")
    if runc is None:
        raise AssertionError("runc is not installed (bash hack/debian-packages.sh runc)")
    # Short and outside pytest's kept temp folders: the socket path has a length limit,
    # and the folder must go away even when pytest keeps others.
    root = Path(tempfile.mkdtemp(prefix="lws-containerd-"))
    daemon = Containerd(root, runc)
    try:
        daemon.start()
        yield daemon
    finally:
        _clean_up(daemon)
