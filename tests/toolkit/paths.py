"""Where the repository is, for tests that read its manifests, samples or sources
(test modules sit at different depths, so none counts parents of its own)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
