"""The images as a node runs them: built by hack/build-images.sh (cached after the
first time), imported into a private containerd with `ctr images import` and run.

  controller  `lws --help` and `lws controller --help` as uid 65532 on a read-only root
              filesystem; its Python imports from build-time bytecode; no pip in it.
  pause       stays up until it is signalled, then stops.
  rendezvous  a leader and a worker, on the host network, find each other.

Root only: the build needs mmdebstrap, chroot and mounts, and containerd needs root.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from lws_localcluster.realnode.images import BuiltImage, ensure_images

from tests.images.containerd import Containerd, private_containerd
from tests.toolkit.paths import REPO
from tests.toolkit.waiting import eventually_blocking

pytestmark = [
    pytest.mark.images,
    pytest.mark.timeout(1200),  # a cold build: mmdebstrap, wheels (about 2 minutes)
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="needs root: the image build uses mmdebstrap, chroot and mounts, "
        "and containerd runs containers as root",
    ),
]

NAMES = ("controller", "pause", "rendezvous")
RUN_WITHIN = 60.0
TMPFS = "type=tmpfs,src=tmpfs,dst=/tmp,options=nosuid:nodev:mode=1777"

# Run inside the controller image: who it runs as, whether pip is there, and every
# module of the package's import graph that would be compiled at start (no .pyc).
PROBE = """\
import importlib.util, json, os, sys
from pathlib import Path
import leaderworkerset.cli, leaderworkerset.controller_command
uncompiled = sorted(
    m.__file__ for m in list(sys.modules.values())
    if (getattr(m, "__file__", None) or "").endswith(".py")
    and not Path(importlib.util.cache_from_source(m.__file__)).is_file()
)
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(),
    "pip": importlib.util.find_spec("pip") is not None,
    "modules": len(sys.modules), "uncompiled": uncompiled,
}))
"""


@pytest.fixture(scope="module")
def images() -> dict[str, BuiltImage]:
    packages = subprocess.run(
        ["bash", str(REPO / "hack" / "debian-packages.sh"), "containerd", "runc"], check=False
    )
    assert packages.returncode == 0, "containerd and runc are needed (see the output above)"
    return ensure_images(*NAMES, python=sys.executable, timeout=1100)


@pytest.fixture(scope="module")
def containerd(images: dict[str, BuiltImage]) -> Iterator[Containerd]:
    with private_containerd() as daemon:
        for image in images.values():
            daemon.ctr("images", "import", str(image.archive), timeout=300)
        yield daemon


def run_once(daemon: Containerd, ref: str, name: str, *command: str) -> str:
    """Run `command` (or the image's own) to its end on a read-only root filesystem
    with a tmpfs /tmp, as the chart runs the controller; its output."""
    args = daemon.run(ref, name, "--rm", "--read-only", "--mount", TMPFS)
    return daemon.ctr(*args, *command, timeout=RUN_WITHIN).stdout


def test_import_names_each_image_by_its_ref(
    containerd: Containerd, images: dict[str, BuiltImage]
) -> None:
    listed = containerd.ctr("images", "ls", "-q").stdout.split()
    assert sorted(listed) == sorted(image.ref for image in images.values())
    assert images["controller"].ref == "docker.io/library/leaderworkerset:0.1.0"
    assert images["pause"].ref == "localhost/lws-dev/pause:3.10.2"


def test_controller_help_runs_as_nonroot_on_a_read_only_root(
    containerd: Containerd, images: dict[str, BuiltImage]
) -> None:
    ref = images["controller"].ref
    assert "controller" in run_once(containerd, ref, "lws-help", "lws", "--help")
    out = run_once(containerd, ref, "lws-controller-help", "lws", "controller", "--help")
    assert "--leader-elect" in out

    probe = json.loads(run_once(containerd, ref, "lws-probe", "python3", "-c", PROBE))
    assert (probe["uid"], probe["gid"]) == (65532, 65532)
    assert probe["pip"] is False
    assert probe["modules"] > 100  # the probe imported the package for real
    assert probe["uncompiled"] == []


def test_controller_image_default_command_is_the_controller(
    containerd: Containerd, images: dict[str, BuiltImage]
) -> None:
    # With no API server to reach, `lws controller` (the image's entry point and
    # command) gets as far as looking for a kubeconfig and fails on that; help text or
    # a missing executable would mean the config's Entrypoint/Cmd are wrong.
    args = containerd.run(images["controller"].ref, "lws-default", "--rm", "--read-only")
    done = containerd.ctr(*args, check=False, timeout=RUN_WITHIN)
    output = (done.stdout + done.stderr).lower()
    assert done.returncode != 0
    assert "kube/config" in output or "kubeconfig" in output, output[-2000:]
    assert "usage:" not in output and "executable file not found" not in output


def test_pause_stays_up_until_it_is_signalled(
    containerd: Containerd, images: dict[str, BuiltImage]
) -> None:
    ref = images["pause"].ref
    assert (
        "pause.c v3.10.2"
        in containerd.ctr(*containerd.run(ref, "pause-v", "--rm"), "/pause", "-v").stdout
    )
    containerd.ctr(*containerd.run(ref, "pause", "--detach", "--read-only"))
    try:
        eventually_blocking(lambda: containerd.task_status("pause") == "RUNNING", "pause up")
        containerd.ctr("tasks", "kill", "-s", "SIGTERM", "pause")
        eventually_blocking(lambda: containerd.task_status("pause") == "STOPPED", "pause gone")
        deleted = containerd.ctr("tasks", "delete", "pause")
        assert "exit code" not in deleted.stderr  # ctr warns about a non-zero exit only
    finally:
        containerd.remove_all()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ready(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return None


def test_rendezvous_leader_and_worker_find_each_other(
    containerd: Containerd, images: dict[str, BuiltImage], tmp_path: Path
) -> None:
    rendezvous_port = free_port()

    def start(index: int, http_port: int, *options: str) -> None:
        env = {
            "LWS_WORKER_INDEX": index,
            "LWS_GROUP_SIZE": 2,
            "LWS_LEADER_ADDRESS": "127.0.0.1",
            "RENDEZVOUS_PORT": rendezvous_port,
            "HTTP_PORT": http_port,
        }
        flags = [f for name, value in env.items() for f in ("--env", f"{name}={value}")]
        ref = images["rendezvous"].ref
        name = f"rendezvous-{index}"
        containerd.ctr(*containerd.run(ref, name, "--detach", "--net-host", "--read-only",
                                       *flags, *options))  # fmt: skip

    leader_http, worker_http = free_port(), free_port()
    leader_log = tmp_path / "leader.log"
    try:
        start(0, leader_http, "--log-uri", f"file://{leader_log}")
        eventually_blocking(lambda: ready(leader_http) == 503, "leader alone", within=RUN_WITHIN)
        start(1, worker_http)
        eventually_blocking(lambda: ready(leader_http) == 200, "leader ready", within=RUN_WITHIN)
        assert ready(worker_http) == 200
        eventually_blocking(
            lambda: "rendezvous complete" in leader_log.read_text(), "the leader's log line"
        )
    finally:
        containerd.remove_all()
