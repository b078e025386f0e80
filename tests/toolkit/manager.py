"""A real manager for unit tests, serving nothing and never calling the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leaderworkerset.runtime.manager import Manager, ManagerOptions
from tests.toolkit.fake_client import FakeApiClient


def new_manager(tmp_path: Path, **options: Any) -> Manager:
    """A real manager for unit tests, serving nothing."""
    opts = ManagerOptions(
        namespace="default",
        webhook_host="127.0.0.1",
        webhook_port=0,
        cert_dir=tmp_path,
        handle_signals=False,
        graceful_shutdown_timeout=5,
        **options,
    )
    # Without a rotator, an elector or a recorder, the manager never calls the API.
    return Manager(opts, client=FakeApiClient())
