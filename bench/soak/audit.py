"""The API server's audit log, kept for the soak's writes: the controller's counters say
how many writes it made, the audit log says which (verb, resource, object), so a write
in a quiet window can be named. Only writes are logged, at Metadata level, and Lease
renewals not at all (every client renews a lease every few seconds)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

# Our controller's user agent starts so (`lws/<version> (<os>/<arch>) <commit>`).
CONTROLLER_AGENT = "lws/"
POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""


def apiserver_args(directory: Path) -> tuple[Path, list[str]]:
    """The log's path and the kube-apiserver flags that write it."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(POLICY)
    log = directory / "audit.log"
    return log, [f"--audit-policy-file={policy}", f"--audit-log-path={log}"]


def _when(entry: dict[str, object]) -> float:
    stamp = str(entry.get("requestReceivedTimestamp", ""))
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else 0.0


def controller_writes(log: Path, start: float, end: float) -> Counter[str]:
    """The controller's writes received between two wall-clock times, by
    `verb resource[/subresource] namespace/name`."""
    found: Counter[str] = Counter()
    if not log.exists():
        return found
    with log.open() as lines:
        for line in lines:
            if f'"userAgent":"{CONTROLLER_AGENT}' not in line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # the line the API server is writing now
                continue
            if not start <= _when(entry) < end:
                continue
            ref = entry.get("objectRef") or {}
            assert isinstance(ref, dict)
            resource = ref.get("resource", "")
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            found[
                f"{entry.get('verb')} {resource} {ref.get('namespace', '')}/{ref.get('name', '')}"
            ] += 1
    return found


def now() -> float:
    return datetime.now(UTC).timestamp()
