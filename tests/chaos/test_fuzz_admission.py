"""Generated LeaderWorkerSets through the real API server and webhooks: server-side dry
runs for volume (no 5xx; every rejection names a field path), then a sample of the
accepted ones created for real, each reconciled with no controller error."""

from __future__ import annotations

import asyncio
import copy
import os
import re
import secrets
from collections import Counter
from typing import Any

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from leaderworkerset.runtime.client import LEADERWORKERSETS, ApiClient, ApiError
from tests.integration.manager_process import Managers

from .harness import WebhookRelay, figures, log_paths, settle, start_controllers
from .invariants import Verdict, Violation, converged, replicas_of, size_of
from .strategies import leaderworkersets

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]

JSON = dict[str, Any]
EXAMPLES = int(os.environ.get("CHAOS_FUZZ_EXAMPLES", "10000"))
SAMPLE = int(os.environ.get("CHAOS_FUZZ_SAMPLE", "20"))
CONCURRENCY = 16
SAMPLE_PODS = 6  # accepted ones small enough to create for real
FIELD_PATH = re.compile(r"\b(spec|metadata)\.[A-Za-z]")


def generate(count: int) -> list[JSON]:
    """``count`` examples, drawn by hypothesis (generation only: nothing to shrink)."""
    drawn: list[JSON] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(leaderworkersets())
    def collect(lws: JSON) -> None:
        drawn.append(lws)

    collect()
    return drawn


def names_a_field(answer: JSON) -> bool:
    causes = (answer.get("details") or {}).get("causes") or []
    if any(cause.get("field") for cause in causes):
        return True
    return bool(FIELD_PATH.search(str(answer.get("message", ""))))


class Tally:
    def __init__(self) -> None:
        self.codes: Counter[int] = Counter()
        self.accepted: list[JSON] = []
        self.server_errors: list[tuple[JSON, str]] = []
        self.unnamed: list[tuple[JSON, str]] = []


async def dry_run(api: ApiClient, namespace: str, lws: JSON, tally: Tally) -> None:
    body = copy.deepcopy(lws)
    body["metadata"]["namespace"] = namespace
    path = LEADERWORKERSETS.path(namespace)
    for attempt in range(3):
        try:
            await api.request("POST", path, params={"dryRun": "All"}, body=body)
        except ApiError as exc:
            tally.codes[exc.status] += 1
            if exc.status >= 500:
                tally.server_errors.append((lws, str(exc.body)[:600]))
            elif not names_a_field(exc.body):
                tally.unnamed.append((lws, str(exc.body)[:600]))
            return
        except httpx.TransportError:
            if attempt == 2:
                raise
            continue
        tally.codes[201] += 1
        tally.accepted.append(lws)
        return


async def send_all(api: ApiClient, namespace: str, objects: list[JSON]) -> Tally:
    tally = Tally()
    queue: asyncio.Queue[JSON] = asyncio.Queue()
    for lws in objects:
        queue.put_nowait(lws)

    async def worker() -> None:
        while not queue.empty():
            await dry_run(api, namespace, queue.get_nowait(), tally)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return tally


def controller_errors(logs: dict[str, str], namespace: str) -> list[str]:
    return [
        line
        for text in logs.values()
        for line in text.splitlines()
        if '"level":"error"' in line and namespace in line
    ]


async def test_fuzzed_admission(
    namespace: str, managers: Managers, relay: WebhookRelay, nodesim_api: ApiClient
) -> None:
    api = nodesim_api
    procs = await start_controllers(api, managers, relay, count=1)
    with figures(f"fuzzed admission: {EXAMPLES} generated LeaderWorkerSets") as fig:
        objects = await asyncio.to_thread(generate, EXAMPLES)
        loop = asyncio.get_running_loop()
        started = loop.time()
        tally = await send_all(api, namespace, objects)
        seconds = loop.time() - started
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(tally.codes.items()))
        fig.notes.append(f"{len(objects)} dry runs in {seconds:.0f}s; answers {codes}")
        fig.fault("dry-run creates", len(objects))
        problems = [
            *(f"5xx for {lws}: {body}" for lws, body in tally.server_errors[:5]),
            *(f"no field path for {lws}: {body}" for lws, body in tally.unnamed[:5]),
        ]
        fig.notes.append(
            f"5xx answers {len(tally.server_errors)}, rejections naming no field "
            f"{len(tally.unnamed)}"
        )

        # A sample of the accepted ones, created for real and left to reconcile.
        small = [
            lws
            for lws in tally.accepted
            if max(replicas_of(lws), 0) * max(size_of(lws), 1) <= SAMPLE_PODS
        ]
        sample = small[:: max(1, len(small) // SAMPLE)][:SAMPLE]
        names = []
        for lws in sample:
            body = copy.deepcopy(lws)
            body["metadata"]["name"] = f"fz-{secrets.token_hex(3)}"
            body["metadata"]["namespace"] = namespace
            await api.create(LEADERWORKERSETS, body)
            names.append(body["metadata"]["name"])
        fig.groups_created = sum(max(replicas_of(lws), 0) for lws in sample)
        verdicts: list[Verdict] = [
            await converged(api, namespace, name, log_paths=log_paths(procs), within=120)
            for name in names
        ]
        violations = [
            Violation(v.rule, f"{name}: {v.detail}")
            for name, verdict in zip(names, verdicts, strict=True)
            for v in verdict.violations
        ]
        errors = controller_errors(verdicts[-1].snapshot.logs if verdicts else {}, namespace)
        violations += [Violation("controller-error", line[:400]) for line in errors[:10]]
        fig.notes.append(f"sample of accepted ones created: {len(names)}")
        last = verdicts[-1] if verdicts else None
        merged = Verdict(
            violations,
            max((v.seconds for v in verdicts), default=0.0),
            last.snapshot if last else None,  # type: ignore[arg-type]
        )
        settle(fig, merged)
        assert not problems, "\n".join(problems)
        assert len(tally.accepted) > 0 and sum(tally.codes.values()) == len(objects)
