"""Driven by test_admission_process in a fresh interpreter (a fork needs a process with
one thread, which pytest's is not): an `AdmissionProcess` whose child is a toy that
reports, serves metrics and stops as the real one does. Prints what it saw as JSON.

    python -m tests.unit.admission_child stop|killed|orphan|threads|slow|terminated
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from leaderworkerset.runtime.admission_process import (
    SCRAPE_TIMEOUT,
    AdmissionExitedError,
    AdmissionProcess,
    ChildLink,
    answer_metrics,
)

CERT = b"-----BEGIN CERTIFICATE-----\ntoy\n-----END CERTIFICATE-----\n"
METRICS = """# HELP controller_runtime_webhook_requests_total Total number of admission requests
# TYPE controller_runtime_webhook_requests_total counter
controller_runtime_webhook_requests_total{code="200",webhook="/mutate--v1-pod"} 7.0
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.5
"""


def toy_child(link: ChildLink, *, slow_first_answer: bool = False) -> int:
    answers = 0

    def render() -> bytes:
        nonlocal answers
        answers += 1
        if slow_first_answer and answers == 1:
            time.sleep(SCRAPE_TIMEOUT + 0.5)  # the manager stops waiting meanwhile
        return (METRICS + f"# answer {answers}\n").encode()

    async def serve() -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        link.on_stop_and_reload(loop, stop.set, lambda: None)

        metrics = asyncio.create_task(answer_metrics(link, render))
        link.report(serving=True, port=4321, certificate=CERT)
        await stop.wait()
        link.report(serving=False, port=4321, certificate=CERT)
        metrics.cancel()
        return 3  # told apart from a crash's code

    return asyncio.run(serve())


async def drive(mode: str) -> dict[str, Any]:
    process = AdmissionProcess(lambda link: toy_child(link, slow_first_answer=mode == "slow"))
    await process.start()
    seen: dict[str, Any] = {"pid": process.pid}
    if mode == "slow":
        try:
            await process.metrics_text()
            seen["first"] = "answered"
        except TimeoutError:
            seen["first"] = "timed out"
        seen["second"] = await process.metrics_text()
        seen["third"] = await process.metrics_text()
        await process.stop(5)
        return seen
    seen["serves"] = await process.serves_certificate(CERT, 10)
    seen["serves_other"] = await process.serves_certificate(b"other", 0.3)
    seen["serving"] = process.is_serving()
    seen["port"] = process.port
    seen["metrics"] = await process.metrics_text()
    seen["metrics_again"] = "# answer 2" in await process.metrics_text()
    if mode == "stop":
        await process.stop(5)
        seen["exitcode"] = process._process.exitcode
        seen["unasked"] = process.unasked_exit()
        seen["serving_after"] = process.is_serving()
        try:
            await process.metrics_text()
            seen["metrics_after_stop"] = "answered"
        except OSError as exc:
            seen["metrics_after_stop"] = type(exc).__name__
    elif mode == "killed":
        os.kill(process.pid, signal.SIGKILL)
        exited = process.exited()
        assert exited is not None
        seen["exitcode"] = await asyncio.wait_for(exited, 10)
        seen["unasked"] = process.unasked_exit()
        seen["reason"] = process.not_serving_reason()
        try:
            await process.serves_certificate(CERT, 1)
            seen["serves_after_exit"] = "answered"
        except AdmissionExitedError as exc:
            seen["serves_after_exit"] = str(exc)
    elif mode == "terminated":
        # As an init signalling the whole process group does: the manager leads.
        os.kill(process.pid, signal.SIGTERM)
        os.kill(process.pid, signal.SIGINT)
        await asyncio.sleep(0.5)
        seen["serving_after_sigterm"] = process.is_serving()
        await process.stop(5)
        seen["exitcode"] = process._returncode
    return seen


def main() -> None:
    mode = sys.argv[1]
    if mode == "threads":
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        try:
            AdmissionProcess(toy_child)
        except RuntimeError as exc:
            print(json.dumps({"refused": str(exc)}))
        finally:
            stop.set()
            thread.join()
        return
    seen = asyncio.run(drive(mode))
    print(json.dumps(seen), flush=True)
    if mode == "orphan":
        # Gone without stopping the child: it must notice and end by itself.
        os._exit(0)


if __name__ == "__main__":
    main()
