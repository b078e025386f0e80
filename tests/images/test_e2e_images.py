"""The images tests/e2e_real adds (hack/images/e2e_images.py), built by
hack/build-images.sh, imported into a private containerd and run:

  upstream       upstream's manager at /manager, as 65532 on a read-only root, of the
                 version hack/upstream-lws/go.mod pins.
  nginx-standin  answers HTTP as 65532 and stops at once on SIGTERM (as PID 1).
  curl-standin   `/bin/sh -c "curl -v ..."`, as upstream's metrics spec runs it.

Root only (mmdebstrap, chroot, containerd); the first build of `upstream` compiles
upstream's manager from the Go module proxy (minutes).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lws_localcluster.realnode.images import ensure_images

from tests.images.containerd import Containerd, private_containerd
from tests.toolkit.upstream_module import pinned_version
from tests.toolkit.waiting import eventually_blocking

pytestmark = [
    pytest.mark.images,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mmdebstrap, chroot, containerd"),
]

NAMES = ("upstream", "nginx-standin", "curl-standin")
RUN_WITHIN = 60.0


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[str, Path]]:
    images = ensure_images(*NAMES, python=sys.executable, timeout=1400)
    return {name: (image.ref, image.archive) for name, image in images.items()}


@pytest.fixture(scope="module")
def containerd(built: dict[str, tuple[str, Path]]) -> Iterator[Containerd]:
    with private_containerd() as daemon:
        for _, archive in built.values():
            daemon.ctr("images", "import", str(archive), timeout=300)
        yield daemon


def image_config(archive: Path) -> dict[str, Any]:
    """The image's config, read through the archive's index and manifest."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict[str, Any]:
            member = tar.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")
            assert member is not None
            data: dict[str, Any] = json.load(member)
            return data

        index = tar.extractfile("index.json")
        assert index is not None
        manifest = blob(json.load(index)["manifests"][0]["digest"])
        return blob(manifest["config"]["digest"])


def test_each_is_named_as_upstream_names_it_and_the_stand_ins_say_what_they_are(
    built: dict[str, tuple[str, Path]],
) -> None:
    refs = {name: ref for name, (ref, _) in built.items()}
    assert refs == {
        "upstream": f"registry.k8s.io/lws/lws:{pinned_version()}",
        "nginx-standin": "docker.io/nginxinc/nginx-unprivileged:1.27",
        "curl-standin": "docker.io/curlimages/curl:7.78.0",
    }
    for name in ("nginx-standin", "curl-standin"):
        labels = image_config(built[name][1])["config"]["Labels"]
        assert labels["org.opencontainers.image.title"] == f"stand-in for {refs[name]}"
        assert "stand-in" in labels["org.opencontainers.image.description"]
    upstream = image_config(built["upstream"][1])["config"]
    assert upstream["Entrypoint"] == ["/manager"]
    assert upstream["User"] == "65532:65532"
    assert upstream["Labels"]["org.opencontainers.image.version"] == pinned_version()


def test_upstream_manager_runs_as_nonroot_and_reports_the_pinned_version(
    containerd: Containerd, built: dict[str, tuple[str, Path]]
) -> None:
    args = containerd.run(built["upstream"][0], "upstream-version", "--rm", "--read-only")
    out = containerd.ctr(*args, "/manager", "--version", timeout=RUN_WITHIN).stdout
    assert f"Version: {pinned_version()}" in out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answer(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
            return r.read().decode() if r.status == 200 else None
    except OSError:
        return None


def test_nginx_standin_serves_http_and_stops_at_once_on_sigterm(
    containerd: Containerd, built: dict[str, tuple[str, Path]]
) -> None:
    port = free_port()
    ref = built["nginx-standin"][0]
    options = ("--detach", "--net-host", "--read-only", "--env", f"HTTP_PORT={port}")
    containerd.ctr(*containerd.run(ref, "nginx-standin", *options))
    try:
        body = eventually_blocking(lambda: answer(port), "the stand-in answers", within=30)
        assert "stand-in" in body
        started = time.monotonic()
        containerd.ctr("tasks", "kill", "-s", "SIGTERM", "nginx-standin")
        eventually_blocking(
            lambda: containerd.task_status("nginx-standin") == "STOPPED", "stopped", within=10
        )
        # PID 1 without its own handler would ignore SIGTERM until killed.
        assert time.monotonic() - started < 5
        deleted = containerd.ctr("tasks", "delete", "nginx-standin")
        assert "exit code" not in deleted.stderr  # ctr warns about a non-zero exit only
    finally:
        containerd.remove_all()


def test_curl_standin_runs_curl_from_a_shell_as_the_metrics_spec_does(
    containerd: Containerd, built: dict[str, tuple[str, Path]]
) -> None:
    port = free_port()
    server = containerd.run(
        built["nginx-standin"][0], "curl-target", "--detach", "--net-host",
        "--env", f"HTTP_PORT={port}",
    )  # fmt: skip
    containerd.ctr(*server)
    try:
        eventually_blocking(lambda: answer(port), "the target answers", within=30)
        script = f"id -u; curl -v -k -H 'Authorization: Bearer x' http://127.0.0.1:{port}/"
        args = containerd.run(built["curl-standin"][0], "curl", "--rm", "--net-host")
        done = containerd.ctr(*args, "/bin/sh", "-c", script, timeout=RUN_WITHIN)
        output = done.stdout + done.stderr
        assert done.stdout.splitlines()[0] == "65532"
        assert "> Authorization: Bearer x" in output
        assert "< HTTP/1.0 200 OK" in output
        assert "stand-in" in done.stdout
    finally:
        containerd.remove_all()
