"""`lws controller --event-loop`: the loop it names runs the manager, and the webhook
server's thread runs one of the same kind."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import uvloop
from click.testing import CliRunner

from leaderworkerset import controller_command as command_module
from leaderworkerset.cli import main
from leaderworkerset.controller_command import Settings, load_configuration, run_controller
from leaderworkerset.runtime.eventloop import loop_factory, same_kind
from leaderworkerset.runtime.manager import ManagerOptions
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.webhook import AdmissionResponse, WebhookServer, allow
from tests.toolkit.commands import run_command
from tests.toolkit.webhook_client import new_pairs, post_blocking, write_pairs

ASYNCIO_LOOP = type(asyncio.new_event_loop())


def test_the_flag_and_its_environment_variable() -> None:
    assert run_command([])[0].event_loop == "auto"
    assert run_command(["--event-loop", "asyncio"])[0].event_loop == "asyncio"
    assert run_command([], env={"LWS_EVENT_LOOP": "asyncio"})[0].event_loop == "asyncio"
    assert run_command(["--event-loop=uvloop"])[0].event_loop == "uvloop"


def test_help_names_the_choices() -> None:
    output = CliRunner().invoke(main, ["controller", "--help"]).output
    assert "--event-loop [auto|asyncio|uvloop]" in output
    assert "LWS_EVENT_LOOP" in output


def test_unknown_choice() -> None:
    with pytest.raises(ValueError, match="unknown event loop"):
        loop_factory("trio")


class _Manager:
    """Stands in for the manager: starts a webhook server and records, from a review
    on the server's thread, which loops run."""

    seen: dict[str, Any] = {}
    cert_dir = Path()
    pairs = new_pairs()

    def __init__(self, options: ManagerOptions, *, metrics: RuntimeMetrics) -> None:
        pass

    async def run(self) -> None:
        seen = self.seen
        seen["manager"] = type(asyncio.get_running_loop())
        srv = WebhookServer(cert_dir=self.cert_dir, host="127.0.0.1", port=0)

        async def record(request: dict[str, Any]) -> AdmissionResponse:
            seen["webhook"] = type(asyncio.get_running_loop())
            seen["webhook thread"] = threading.current_thread().name
            return allow()

        srv.register("/record", record)
        await srv.start()
        try:
            answer = await asyncio.to_thread(post_blocking, srv, self.pairs, "/record")
            assert answer["response"]["allowed"] is True
        finally:
            await srv.stop(5)


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("auto", uvloop.Loop), ("uvloop", uvloop.Loop), ("asyncio", ASYNCIO_LOOP)],
)
def test_the_chosen_loop_runs_the_manager_and_the_webhook_thread(
    choice: str, expected: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pairs(tmp_path, _Manager.pairs)
    monkeypatch.setattr(_Manager, "cert_dir", tmp_path)
    monkeypatch.setattr(_Manager, "seen", {})
    monkeypatch.setattr(command_module, "Manager", _Manager)
    monkeypatch.setattr(command_module, "setup_controllers", lambda *a, **k: None)
    # run_controller tunes the collector and the GIL for the whole process.
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        run_controller(Settings(load_configuration(None), namespace="x", event_loop=choice))
    finally:
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
    assert _Manager.seen == {
        "manager": expected,
        "webhook": expected,
        "webhook thread": "webhook-server",
    }
    # The stall probe it started ended with the manager.
    assert not [t for t in threading.enumerate() if t.name == "stall-probe"]


def test_asyncio_is_chosen_when_uvloop_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("leaderworkerset.runtime.eventloop.uvloop_available", lambda: False)
    assert loop_factory("auto") is asyncio.new_event_loop


def test_a_loop_of_the_same_kind() -> None:
    for factory in (uvloop.new_event_loop, asyncio.new_event_loop):
        loop = factory()
        try:
            made = same_kind(loop)()
            assert type(made) is type(loop)
            made.close()
        finally:
            loop.close()
