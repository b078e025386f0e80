"""kubectl and helm as a user runs them, against one cluster's kubeconfig.

Both come from ``hack/build-tools.sh`` (``make tools``); helm's caches and repository
list go to a folder of the test's, never the developer's home.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Tools:
    folder: Path
    kubeconfig: Path
    helm_home: Path

    def run(
        self, tool: str, *args: str | Path, stdin: str | None = None, timeout: float = 120
    ) -> str:
        """Run kubectl or helm; fail the test with its stderr when it fails."""
        proc = self.attempt(tool, *args, stdin=stdin, timeout=timeout)
        if proc.returncode != 0:
            pytest.fail(
                f"{tool} {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}"
            )
        return proc.stdout

    def attempt(
        self, tool: str, *args: str | Path, stdin: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl or helm and hand back whatever it did."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env[var] = str(self.helm_home / var.lower())
        cmd = [str(self.folder / tool), *map(str, args)]
        return subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, env=env, check=False, timeout=timeout
        )
