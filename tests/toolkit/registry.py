"""A container registry on this machine for the release tests: Debian's
`docker-registry` (the CNCF distribution registry, 2.8) run as a child process, plain
HTTP on 127.0.0.1, with its own configuration and storage under a temporary folder.
Images are pushed to it with skopeo and charts with `helm push`, as a user publishes a
release (docs/operations.md, "Publishing a release").
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.toolkit.paths import REPO
from tests.toolkit.waiting import eventually_blocking

PACKAGES = ("docker-registry", "skopeo")
# The registry's access log, Apache's combined format.
ACCESS_LINE = re.compile(
    r'^\S+ \S+ \S+ \[[^\]]*\] "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" \d+ \S+ "[^"]*" '
    r'"(?P<agent>[^"]*)"$'
)
# Tried first, so that the release (which names the registry) is the cached one on the
# next run; any free port otherwise.
PREFERRED_PORT = 5055
START_WITHIN = 30.0

CONFIG = """\
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


def free_port(preferred: int = PREFERRED_PORT) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def install_packages() -> None:
    done = subprocess.run(["bash", str(REPO / "hack" / "debian-packages.sh"), *PACKAGES])
    assert done.returncode == 0, f"{' '.join(PACKAGES)} are needed (see the output above)"


@dataclass
class Registry:
    folder: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "registry.log"

    def start(self) -> None:
        config = self.folder / "config.yml"
        config.write_text(CONFIG.format(storage=self.folder / "storage", port=self.port))
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                ["docker-registry", "serve", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        eventually_blocking(self._serving, f"the registry on {self.host}", within=START_WITHIN)

    def _serving(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"docker-registry exited: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def push_image(self, archive: Path, name: str) -> str:
        """`skopeo copy --all` of an OCI archive (every platform of an index) to
        NAME (repository:tag) here; skopeo's output."""
        done = subprocess.run(
            ["skopeo", "copy", "--all", "--dest-tls-verify=false",
             f"oci-archive:{archive}", f"docker://{self.host}/{name}"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"skopeo copy failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def raw_manifest(self, name: str) -> str:
        done = subprocess.run(
            ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{self.host}/{name}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def requests(self, user_agent: str) -> list[str]:
        """The paths requested, in order, by clients whose User-Agent holds `user_agent`
        (containerd's pulls say `containerd/<version>`), from the access log."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            request = ACCESS_LINE.match(line)
            if request and user_agent in request.group("agent"):
                found.append(request.group("path"))
        return found


@contextlib.contextmanager
def local_registry(folder: Path) -> Iterator[Registry]:
    install_packages()
    folder.mkdir(parents=True, exist_ok=True)
    registry = Registry(folder, free_port())
    try:
        registry.start()
        yield registry
    finally:
        registry.stop()
