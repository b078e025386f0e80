"""Fixtures of the chaos suite (`make chaos`; not part of the default run).

The control plane, node simulator and `lws controller` processes are the integration
tests' fixtures; this directory adds the webhook relay and prints every scenario's
figures at the end of the session. The API server restarts run last: they push the
controller manager's reflectors into backoff, which would slow whatever came next.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.toolkit.manager_process import (
    managers_fixture,  # noqa: F401  (fixtures, registered by import)
    no_inprocess_controller_fixture,  # noqa: F401
    operator_namespace_fixture,  # noqa: F401
)

from .harness import ALL_FIGURES, WebhookRelay

LAST = ("test_restarts.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name in LAST)


@pytest_asyncio.fixture(loop_scope="session", name="relay")
async def relay_fixture() -> AsyncIterator[WebhookRelay]:
    relay = WebhookRelay()
    await relay.start()
    yield relay
    await relay.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ALL_FIGURES:
        return
    terminalreporter.section("chaos figures")
    for fig in ALL_FIGURES:
        terminalreporter.write_line(fig.line())
    total = sum(f.wall_seconds for f in ALL_FIGURES)
    terminalreporter.write_line(f"scenarios' wall time: {total:.0f}s")
