"""Generated DisaggregatedSets through the real API server (CRD schema, CEL rules and
the DisaggregatedSet validating webhook of an `lws controller` process), as
test_fuzz_admission.py does for LeaderWorkerSets: server-side dry runs for volume.
None may crash the webhook (no 5xx, no error in the manager's log), every rejection
names a field, and what the API server would store for an accepted one (the dry run's
answer, defaulted and pruned) is a set the webhook's own validation admits. A sample
of the accepted ones is then created for real, read back and checked the same way."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from leaderworkerset.api.resources import DISAGGREGATEDSETS
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.webhooks.disaggregatedset import verdict
from tests.toolkit.manager_process import Managers

from .harness import WebhookRelay, figures, log_paths, start_controllers
from .invariants import Verdict, Violation, read_logs
from .strategies import disaggregatedsets
from .test_fuzz_admission import NOT_YAML, Tally, dry_run, pump

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.timeout(900),
]

JSON = dict[str, Any]
EXAMPLES = int(os.environ.get("CHAOS_FUZZ_EXAMPLES", "10000"))
SAMPLE = int(os.environ.get("CHAOS_FUZZ_SAMPLE", "20"))
# An error line in either of the manager's log formats (console, the default, or JSON).
ERROR_LINE = re.compile(r'"level":"error"|\tERROR\t')
# The webhook server's logger in either format.
WEBHOOK_LOGGER = re.compile(r'"logger":"webhook"|\tERROR\twebhook\t')


def generate(count: int, emit: Callable[[JSON], object]) -> None:
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(disaggregatedsets())
    def collect(ds: JSON) -> None:
        emit(ds)

    collect()


def refused_by_validation(stored: JSON) -> str | None:
    """Why the webhook's validation would refuse `stored`, or None."""
    answer = verdict("CREATE", copy.deepcopy(stored), None)
    return None if answer.allowed else str(answer.to_json("check"))[:600]


class DsTally(Tally):
    def __init__(self) -> None:
        super().__init__()
        self.stored_invalid: list[tuple[JSON, str]] = []


async def dry_run_checked(api: ApiClient, namespace: str, ds: JSON, tally: DsTally) -> None:
    """The LWS fuzzer's dry run, and what would be stored held to the webhook's validation."""
    stored = await dry_run(api, namespace, ds, tally, DISAGGREGATEDSETS)
    if stored is not None and (why := refused_by_validation(stored)):
        tally.stored_invalid.append((ds, why))


async def fuzz(api: ApiClient, namespace: str, count: int) -> DsTally:
    tally = DsTally()

    async def send(ds: JSON) -> None:
        tally.sent += 1
        await dry_run_checked(api, namespace, ds, tally)

    await pump(generate, count, send)
    return tally


def webhook_errors(logs: dict[str, str]) -> list[str]:
    """Error lines of the manager's webhook server (a handler that raised), read by the
    logger's name: the text of other lines may name the test's namespace, which says
    "admission"."""
    return [
        line
        for text in logs.values()
        for line in text.splitlines()
        if ERROR_LINE.search(line) and WEBHOOK_LOGGER.search(line)
    ]


async def test_fuzzed_disaggregatedset_admission(
    namespace: str, managers: Managers, relay: WebhookRelay, nodesim_api: ApiClient
) -> None:
    api = nodesim_api
    procs = await start_controllers(api, managers, relay, count=1)
    with figures(f"fuzzed admission: {EXAMPLES} generated DisaggregatedSets") as fig:
        loop = asyncio.get_running_loop()
        started = loop.time()
        tally = await fuzz(api, namespace, EXAMPLES)
        seconds = loop.time() - started
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(tally.codes.items()))
        fig.notes.append(f"{tally.sent} drawn and dry-run in {seconds:.0f}s; answers {codes}")
        fig.fault("dry-run creates", tally.sent)

        # A sample of the accepted ones stored for real, read back, checked, deleted.
        stored_invalid = list(tally.stored_invalid)
        sample = [ds for ds in tally.accepted if not NOT_YAML.search(json.dumps(ds))][:SAMPLE]
        for ds in sample:
            body = copy.deepcopy(ds)
            body["metadata"]["name"] = f"fz-{secrets.token_hex(3)}"
            body["metadata"]["namespace"] = namespace
            await api.create(DISAGGREGATEDSETS, body)
            read = await api.get(DISAGGREGATEDSETS, body["metadata"]["name"], namespace)
            if why := refused_by_validation(read):
                stored_invalid.append((ds, why))
            await api.delete(DISAGGREGATEDSETS, body["metadata"]["name"], namespace)
        fig.notes.append(
            f"accepted {len(tally.accepted)}, of which stored as validation would refuse "
            f"{len(stored_invalid)}; sample created for real {len(sample)}"
        )
        errors = webhook_errors(read_logs(log_paths(procs)))
        problems = [
            *(f"5xx for {ds}: {body}" for ds, body in tally.server_errors[:5]),
            *(f"no field path for {ds}: {body}" for ds, body in tally.unnamed[:5]),
            *(f"stored but invalid {ds}: {why}" for ds, why in stored_invalid[:5]),
            *(f"webhook error: {line[:400]}" for line in errors[:5]),
        ]
        fig.settled(Verdict([Violation("admission", p) for p in problems], seconds, None))
        assert not problems, "\n".join(problems)
        assert len(tally.accepted) > 0 and sum(tally.codes.values()) == tally.sent == EXAMPLES
