"""What every chaos scenario shares: a TCP relay in front of the webhook servers (so the
webhook follows whichever `lws controller` process is alive, and can be cut off), a
pair of controller processes, a tally of the groups a scenario made, and its figures."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.deploy import free_port, install
from lws_localcluster.nodesim.simulator import TERMINATION_DELAY_ANNOTATION

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import JSON_PATCH, ApiClient
from tests.toolkit.lws import lws_manifest
from tests.toolkit.manager_process import FAST_ELECTION, ManagerProcess, Managers

from .invariants import Verdict, is_leader, transient_tracebacks

JSON = dict[str, Any]


# --- the figures every scenario prints ---------------------------------------------------


@dataclass
class Figures:
    scenario: str
    groups_created: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    converge_seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def fault(self, kind: str, count: int = 1) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + count

    def settled(self, verdict: Verdict) -> None:
        self.converge_seconds = verdict.seconds
        self.violations = [str(v) for v in verdict.violations]

    def line(self) -> str:
        faults = ", ".join(f"{k}={v}" for k, v in self.faults.items()) or "none"
        text = (
            f"{self.scenario}: groups created {self.groups_created}; faults {faults}; "
            f"converged in {self.converge_seconds:.1f}s; "
            f"invariant violations {len(self.violations)}; wall {self.wall_seconds:.0f}s"
        )
        for note in self.notes:
            text += f"\n    {note}"
        for violation in self.violations:
            text += f"\n    VIOLATION {violation}"
        return text


# Filled by the scenarios, printed in the terminal summary (see conftest).
ALL_FIGURES: list[Figures] = []


@contextlib.contextmanager
def figures(scenario: str) -> Any:
    fig = Figures(scenario)
    started = time.monotonic()
    try:
        yield fig
    finally:
        fig.wall_seconds = time.monotonic() - started
        ALL_FIGURES.append(fig)
        print(fig.line())


def settle(fig: Figures, verdict: Verdict, known: dict[str, str] | None = None) -> None:
    """Record the verdict; fail on violations, or xfail when every violated rule is a
    known one (``known``: rule -> reason naming the issue item)."""
    fig.settled(verdict)
    logs = verdict.snapshot.logs if verdict.snapshot is not None else {}
    if transient := transient_tracebacks(logs):
        fig.notes.append(f"tracebacks of lost API server connections (retried): {transient}")
    if not verdict.violations:
        return
    rules = {v.rule for v in verdict.violations}
    if known and rules <= set(known):
        pytest.xfail("; ".join(known[r] for r in sorted(rules)) + "\n" + verdict.report())
    raise AssertionError(f"{len(verdict.violations)} invariant violations:\n{verdict.report()}")


# --- a relay in front of the webhook servers ---------------------------------------------


class WebhookRelay:
    """A TCP relay the webhook configurations point at. TLS passes through untouched
    (every manager of an operator namespace serves the same certificate), so the API
    server sees one webhook whichever process answers; :meth:`block` cuts it off."""

    def __init__(self) -> None:
        self.port = free_port()
        self.targets: list[int] = []
        self.blocked = False
        self.refused = 0
        self.relayed = 0
        self._open: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        # Its own generator: hypothesis (drawing in another thread) flags any use of
        # the global one while it runs.
        self._random = random.Random()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    def block(self) -> None:
        """Refuse new connections and cut the open ones (the API server keeps its
        connections to a webhook alive between calls)."""
        self.blocked = True
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    def unblock(self) -> None:
        self.blocked = False

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None if self.blocked else await self._connect()
        if upstream is None:
            self.refused += 1
            writer.close()
            return
        self.relayed += 1
        up_reader, up_writer = upstream
        self._open |= {writer, up_writer}
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer),
                self._pipe(up_reader, writer),
                return_exceptions=True,
            )
        finally:
            self._open -= {writer, up_writer}

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for port in self._random.sample(self.targets, len(self.targets)):
            with contextlib.suppress(OSError):
                return await asyncio.open_connection("127.0.0.1", port)
        return None

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
        finally:
            dst.close()


# --- controller processes -----------------------------------------------------------------


async def start_controllers(
    api: ApiClient,
    managers: Managers,
    relay: WebhookRelay,
    count: int = 2,
    election: dict[str, str] | None = None,
) -> list[ManagerProcess]:
    """``count`` `lws controller` processes with leader election, the webhooks sent
    through the relay to whichever of them is up."""
    # Fast takeovers unless told otherwise: the faults here are meant to hand over.
    procs = [managers.new(f"replica-{i}", election or FAST_ELECTION) for i in range(count)]
    relay.targets = [p.webhook_port for p in procs]
    await install(api, relay.port)
    for proc in procs:
        proc.start()
    await asyncio.gather(*(p.wait_ready() for p in procs))
    return procs


def log_paths(procs: list[ManagerProcess]) -> list[Path]:
    return [p.log_path for p in procs]


async def master_of(procs: list[ManagerProcess]) -> ManagerProcess | None:
    for proc in procs:
        if proc.running():
            # One started again a moment ago serves no metrics yet: it is not leading.
            with contextlib.suppress(AssertionError, RuntimeError):
                if await proc.is_master():
                    return proc
    return None


async def kill_and_restart(procs: list[ManagerProcess]) -> ManagerProcess:
    """SIGKILL the leading process (any live one while nobody leads) and start it
    again at once: the other takes over once the lease expires."""
    victim = await master_of(procs) or random.choice([p for p in procs if p.running()] or procs)
    if victim.proc is not None and victim.proc.poll() is None:
        victim.signal(signal.SIGKILL)
        await victim.wait_exit(within=10)
    victim.proc = None
    victim.start()
    return victim


class Supervisor:
    """Starts again any process that exited, as the kubelet restarts a container."""

    def __init__(self, procs: list[ManagerProcess]) -> None:
        self.procs = procs
        self.restarts = 0

    async def run(self) -> None:
        while True:
            for proc in self.procs:
                if proc.proc is not None and proc.proc.poll() is not None:
                    proc.proc = None
                    proc.start()
                    self.restarts += 1
            await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def supervising(procs: list[ManagerProcess]) -> AsyncIterator[Supervisor]:
    supervisor = Supervisor(procs)
    task = asyncio.create_task(supervisor.run())
    try:
        yield supervisor
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# --- the API server's faults ---------------------------------------------------------------


async def etcd_compact(endpoint: str) -> int:
    """Compact etcd to its current revision: every older version is gone."""
    async with httpx.AsyncClient(base_url=endpoint, timeout=10) as etcd:
        answer = await etcd.post("/v3/kv/range", json={"key": "AA=="})
        answer.raise_for_status()
        revision = int(answer.json()["header"]["revision"])
        done = await etcd.post("/v3/kv/compaction", json={"revision": str(revision)})
        done.raise_for_status()
    return revision


def restart_over_compaction(cp: ControlPlane, endpoint: str) -> int:
    """Stop the API server, write to etcd nothing but a compaction, start it again: no
    watcher can have seen the compacted revision, so each one's resume version is gone."""
    revisions: list[int] = []
    cp.restart_apiserver(while_down=lambda: revisions.append(asyncio.run(etcd_compact(endpoint))))
    return revisions[0]


# --- the scenarios' LeaderWorkerSets -----------------------------------------------------


def chaos_lws(
    name: str,
    namespace: str,
    *,
    replicas: int,
    size: int = 2,
    hash_mode: bool = True,
    termination_delay: float = 1.0,
    **spec: Any,
) -> JSON:
    """A light LWS (pause containers asking 5m cpu) whose pods take
    ``termination_delay`` seconds to terminate on the simulated nodes."""
    if hash_mode:
        spec.setdefault("groupIdentity", c.GROUP_IDENTITY_HASH)
    body = lws_manifest(name, namespace, replicas=replicas, size=size, cpu="5m", **spec)
    template = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["metadata"] = {"annotations": {TERMINATION_DELAY_ANNOTATION: str(termination_delay)}}
    template["spec"]["terminationGracePeriodSeconds"] = 30
    return copy.deepcopy(body)


async def roll(api: ApiClient, namespace: str, name: str, value: str) -> None:
    """A template change (so a rolling update): an env var on the worker container. A
    JSON patch, since a merge patch would replace the whole container list."""
    path = "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/env"
    patch = [{"op": "add", "path": path, "value": [{"name": "CHAOS", "value": value}]}]
    await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace, content_type=JSON_PATCH)


class GroupTally:
    """Leader pods seen, sampled once a second while a scenario runs: a lower bound on
    the groups it created (a leader born and gone between samples is missed)."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.leaders: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    async def sample(self) -> None:
        answer = await self.api.list(PODS, self.namespace, label_selector=c.LABEL_SET_NAME)
        self.leaders |= {p["metadata"]["uid"] for p in answer.get("items") or [] if is_leader(p)}

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.sample()
            await asyncio.sleep(1.0)

    async def __aenter__(self) -> GroupTally:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self.sample()

    @property
    def count(self) -> int:
        return len(self.leaders)
