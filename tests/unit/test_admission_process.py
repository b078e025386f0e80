"""The admission process's plumbing: what the manager's handle sees of a forked child
(readiness, certificate, metrics, exits), and the pieces the real child is made of."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.registry import Collector

from leaderworkerset.api import constants as c
from leaderworkerset.runtime.admission_process import webhook_families
from leaderworkerset.webhook_process import hostname_fields

ROOT = Path(__file__).resolve().parents[2]


def drive(mode: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.unit.admission_child", mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=True,
    )
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_the_handle_sees_serving_certificate_and_metrics_then_stops_the_child() -> None:
    seen = drive("stop")
    assert seen["serves"] is True
    assert seen["serves_other"] is False
    assert seen["serving"] is True and seen["port"] == 4321
    assert 'webhook="/mutate--v1-pod"} 7.0' in seen["metrics"]
    # Asked to stop: the child's own exit code, and no failure reported for it.
    assert seen["exitcode"] == 3
    assert seen["unasked"] is None
    assert seen["serving_after"] is False
    assert seen["metrics_again"] is True
    assert seen["metrics_after_stop"] != "answered"


def test_a_child_that_dies_unasked_is_reported() -> None:
    seen = drive("killed")
    assert seen["exitcode"] == -9
    assert seen["unasked"] == "the admission process exited with code -9"
    assert seen["reason"] == "the admission process exited with code -9"
    assert seen["serves_after_exit"] == "the admission process exited with code -9"


def test_sigterm_to_the_child_is_left_to_the_manager() -> None:
    seen = drive("terminated")
    assert seen["serving_after_sigterm"] is True
    assert seen["exitcode"] == 3


def test_a_late_answer_is_dropped_and_the_next_scrape_gets_its_own() -> None:
    seen = drive("slow")
    assert seen["first"] == "timed out"
    # The first question's answer came after the manager stopped waiting for it.
    assert "# answer 2" in seen["second"]
    assert "# answer 3" in seen["third"]


def test_the_child_ends_when_the_manager_is_gone() -> None:
    pid = drive("orphan")["pid"]
    deadline = time.monotonic() + 15
    while not gone(pid):
        assert time.monotonic() < deadline, f"admission process {pid} outlived its manager"
        time.sleep(0.05)


def test_no_fork_once_other_threads_run() -> None:
    refused = drive("threads")["refused"]
    assert "before any other thread starts" in refused


class _Families(Collector):
    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> Any:
        return iter(self.families)


def test_only_webhook_families_pass_and_encode_as_they_were() -> None:
    child = CollectorRegistry()
    latency = Histogram(
        "controller_runtime_webhook_latency_seconds",
        "Histogram of the latency of processing admission requests",
        ["webhook"],
        registry=child,
        buckets=(0.005, 0.01, 0.025),
    )
    requests = Counter(
        "controller_runtime_webhook_requests_total",
        "Total number of admission requests by HTTP status code.",
        ["webhook", "code"],
        registry=child,
    )
    Counter("rest_client_requests_total", "client requests", ["code"], registry=child)
    for seconds in (0.001, 0.004, 0.02):
        latency.labels("/mutate--v1-pod").observe(seconds)
    requests.labels("/mutate--v1-pod", "200").inc(3)
    text = generate_latest(child).decode()

    families = webhook_families(text)
    assert sorted(f.name for f in families) == [
        "controller_runtime_webhook_latency_seconds",
        "controller_runtime_webhook_requests",
    ]
    manager = CollectorRegistry()
    manager.register(_Families(families))
    out = generate_latest(manager).decode()
    for line in text.splitlines():
        if line.startswith("controller_runtime_webhook_") and "_created" not in line:
            assert line in out, f"{line!r} lost on the way"
    assert "rest_client_requests_total" not in out


def test_the_hostname_cache_keeps_only_what_the_check_reads() -> None:
    pod = {
        "metadata": {
            "name": "lws-abc",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "42",
            "labels": {
                c.LABEL_SET_NAME: "lws",
                c.LABEL_GROUP_KEY: "k" * 40,
                c.LABEL_WORKER_INDEX: "0",
                "app": "x",
            },
            "annotations": {"a": "b"},
            "managedFields": [{"manager": "kcm"}],
        },
        "spec": {"containers": [{"name": "main", "image": "pause"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert hostname_fields(pod) == {
        "metadata": {
            "name": "lws-abc",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "42",
            "labels": {c.LABEL_SET_NAME: "lws", c.LABEL_GROUP_KEY: "k" * 40},
        },
        "status": {"phase": "Running"},
    }
