"""The Helm chart's RBAC templates are generated from config/rbac, the rules that
tests/integration/test_rbac.py proves least-privilege; they must not drift."""

from __future__ import annotations

import subprocess
import sys

from tests.toolkit.paths import REPO


def test_chart_rbac_is_generated_from_config_rbac() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "hack" / "sync-chart-rbac.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
