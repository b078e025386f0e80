"""The Helm chart ships the same CRD file as the kustomize manifests."""

from __future__ import annotations

from pathlib import Path

from leaderworkerset.api.leaderworkerset.crd import CRD_FILE, render_crd_yaml
from tests.toolkit.paths import REPO

CHART_CRD = f"charts/lws/crds/{Path(CRD_FILE).name}"


def test_chart_crd_is_the_generated_crd() -> None:
    assert (REPO / CHART_CRD).read_text() == render_crd_yaml(), (
        f"{CHART_CRD} is stale: run `make crd`"
    )


def test_chart_crd_equals_kustomize_crd() -> None:
    assert (REPO / CHART_CRD).read_bytes() == (REPO / CRD_FILE).read_bytes()
