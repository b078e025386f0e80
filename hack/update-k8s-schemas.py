#!/usr/bin/env python3
"""Refresh src/leaderworkerset/api/schemas/k8s-<version>.json from Kubernetes' OpenAPI v3.

The k8s.io/kubernetes Go module carries the published OpenAPI documents under
api/openapi-spec/v3. This script downloads the module through the Go module
proxy (`go mod download`), keeps the schemas that the LeaderWorkerSet CRD
embeds (PodTemplateSpec, PersistentVolumeClaim, the StatefulSet PVC retention
policy) and everything they reference, and writes them as data with a note of
their origin. Run it after bumping KUBERNETES_VERSION; the CRD generator
(`lws crd generate`) reads the result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KUBERNETES_VERSION = "v1.37.2"
DOCUMENTS = ("api__v1_openapi.json", "apis__apps__v1_openapi.json")
ROOTS = (
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.core.v1.PersistentVolumeClaim",
    "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
)
REF_PREFIX = "#/components/schemas/"
OUT = Path(__file__).resolve().parents[1] / "src/leaderworkerset/api/schemas"


def module_dir(version: str) -> Path:
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return Path(json.loads(out)["Dir"])


def refs_of(node: object) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            found.add(ref[len(REF_PREFIX) :])
        for value in node.values():
            found |= refs_of(value)
    elif isinstance(node, list):
        for value in node:
            found |= refs_of(value)
    return found


def main() -> int:
    spec_dir = module_dir(KUBERNETES_VERSION) / "api/openapi-spec/v3"
    available: dict[str, object] = {}
    for doc in DOCUMENTS:
        available.update(json.loads((spec_dir / doc).read_text())["components"]["schemas"])
    keep: dict[str, object] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = available[name]
        todo.extend(refs_of(available[name]) - keep.keys())
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / f"k8s-{KUBERNETES_VERSION}.json"
    payload = {
        "source": {
            "module": f"k8s.io/kubernetes@{KUBERNETES_VERSION}",
            "documents": [f"api/openapi-spec/v3/{d}" for d in DOCUMENTS],
            "roots": list(ROOTS),
            "generator": "hack/update-k8s-schemas.py",
        },
        "schemas": dict(sorted(keep.items())),
    }
    target.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(keep)} schemas to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
