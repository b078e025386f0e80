"""The rendezvous workload (hack/images/rendezvous/rendezvous.py) as processes on
127.0.0.1: a leader and its workers find each other, the leader's /ready follows who
is connected, and a lost leader ends its workers as a lost rank ends a real job."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.paths import REPO
from tests.toolkit.waiting import eventually_blocking

PROGRAM = REPO / "hack" / "images" / "rendezvous" / "rendezvous.py"
EXIT_WITHIN = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Member:
    proc: subprocess.Popen[bytes]
    http_port: int
    log: Path

    def get(self, path: str) -> tuple[int, Any] | None:
        """(status, JSON body) of GET `path`, or None while nothing answers."""
        url = f"http://127.0.0.1:{self.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())
        except OSError:
            return None

    def status(self, path: str = "/ready") -> int | None:
        answer = self.get(path)
        return answer[0] if answer else None

    def wait_status(self, code: int, path: str = "/ready") -> Any:
        answer = eventually_blocking(
            lambda: (a := self.get(path)) is not None and a[0] == code and a,
            f"{path} {code} from {self.log.name}",
        )
        return answer[1]

    def output(self) -> str:
        return self.log.read_text()

    def wait_log(self, text: str, count: int = 1) -> None:
        eventually_blocking(
            lambda: self.output().count(text) >= count, f"{count}x {text!r} in {self.log.name}"
        )

    def exit_code(self) -> int:
        return self.proc.wait(timeout=EXIT_WITHIN)


class Group:
    """Starts members of one group on free ports; kills what is left at the end."""

    def __init__(self, folder: Path, size: int) -> None:
        self.folder = folder
        self.size = size
        self.rendezvous_port = free_port()
        self.members: list[Member] = []

    def start(self, index: int, leader: str = "127.0.0.1", **extra: str) -> Member:
        http_port = free_port()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LWS_WORKER_INDEX": str(index),
            "LWS_GROUP_SIZE": str(self.size),
            "LWS_LEADER_ADDRESS": leader,
            "RENDEZVOUS_PORT": str(self.rendezvous_port),
            "HTTP_PORT": str(http_port),
            **extra,
        }
        log = self.folder / f"member-{index}-{len(self.members)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, str(PROGRAM)], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        member = Member(proc, http_port, log)
        self.members.append(member)
        return member

    def close(self) -> None:
        for member in self.members:
            if member.proc.poll() is None:
                member.proc.kill()
            member.proc.wait()


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    g = Group(tmp_path, size=3)
    try:
        yield g
    finally:
        g.close()


def test_leader_is_ready_only_once_both_workers_are_connected(group: Group) -> None:
    leader = group.start(0)
    body = leader.wait_status(503)
    assert body == {"groupSize": 3, "connected": {}}

    group.start(1)
    leader.wait_log("worker 1 joined")
    assert leader.status() == 503  # one of two

    worker2 = group.start(2)
    body = leader.wait_status(200)
    assert sorted(body["connected"]) == ["1", "2"]
    for info in body["connected"].values():
        assert info["address"] == "127.0.0.1"
        assert info["hostname"] == socket.gethostname()
    leader.wait_log("rendezvous complete: group of 3")
    assert worker2.wait_status(200)["connected"] is True
    assert leader.status("/healthz") == 200 and worker2.status("/healthz") == 200


def test_a_killed_worker_makes_the_leader_unready_until_it_is_back(group: Group) -> None:
    leader = group.start(0)
    group.start(1)
    worker2 = group.start(2)
    leader.wait_status(200)

    worker2.proc.kill()
    body = leader.wait_status(503)
    assert list(body["connected"]) == ["1"]
    leader.wait_log("worker 2 left")

    group.start(2)  # the restarted pod
    assert sorted(leader.wait_status(200)["connected"]) == ["1", "2"]
    leader.wait_log("rendezvous complete", count=2)


def test_killing_the_leader_ends_every_worker_with_exit_1(group: Group) -> None:
    leader = group.start(0)
    workers = [group.start(1), group.start(2)]
    leader.wait_status(200)
    for worker in workers:
        worker.wait_status(200)

    leader.proc.kill()
    for worker in workers:
        assert worker.exit_code() == 1
        assert "lost the connection to the leader" in worker.output()


def test_a_worker_started_before_its_leader_retries_then_joins(group: Group) -> None:
    worker = group.start(1)
    worker.wait_log("cannot join", count=3)  # connection refused, retried with backoff
    assert worker.status() == 503

    leader = group.start(0)
    group.start(2)
    assert worker.wait_status(200)["connected"] is True
    assert sorted(leader.wait_status(200)["connected"]) == ["1", "2"]


def test_a_worker_retries_while_the_leader_name_does_not_resolve(group: Group) -> None:
    worker = group.start(1, leader="leader.invalid")
    worker.wait_log("cannot resolve leader.invalid", count=2)
    assert worker.proc.poll() is None
    assert worker.status() == 503


def test_sigterm_ends_leader_and_workers_with_exit_0(group: Group) -> None:
    leader = group.start(0)
    workers = [group.start(1), group.start(2)]
    leader.wait_status(200)
    for worker in workers:
        worker.wait_status(200)
    # Workers first: a worker's exit must not wait for the leader to go.
    for member in [*workers, leader]:
        member.proc.send_signal(signal.SIGTERM)
        assert member.exit_code() == 0, member.output()


def test_sigterm_ends_a_worker_still_looking_for_its_leader_with_exit_0(group: Group) -> None:
    worker = group.start(1)
    worker.wait_log("cannot join")
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.exit_code() == 0


def test_a_group_of_one_is_ready_at_once(tmp_path: Path) -> None:
    g = Group(tmp_path, size=1)
    try:
        leader = g.start(0)
        assert leader.wait_status(200) == {"groupSize": 1, "connected": {}}
    finally:
        g.close()


def test_a_hello_with_a_foreign_index_is_refused(group: Group) -> None:
    leader = group.start(0)
    leader.wait_status(503)
    with socket.create_connection(("127.0.0.1", group.rendezvous_port), timeout=5) as s:
        s.sendall(b'{"index": 7, "hostname": "x", "address": "10.0.0.1"}\n')
        answer = s.makefile().readline()
    assert "not a worker of a group of 3" in json.loads(answer)["error"]
    assert leader.status() == 503


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LWS_WORKER_INDEX": ""}, "LWS_WORKER_INDEX is not set"),
        ({"LWS_GROUP_SIZE": "three"}, "LWS_GROUP_SIZE='three' is not an integer"),
        ({"LWS_WORKER_INDEX": "3"}, "LWS_WORKER_INDEX=3 is not below LWS_GROUP_SIZE=3"),
        ({"LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": ""}, "LWS_LEADER_ADDRESS is not set"),
        ({"HTTP_PORT": "0"}, "HTTP_PORT=0 is below 1"),
    ],
)
def test_bad_settings_exit_2_naming_the_variable(
    group: Group, env: dict[str, str], message: str
) -> None:
    member = group.start(0, **env)
    assert member.exit_code() == 2
    assert message in member.output()
