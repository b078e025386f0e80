"""What must hold for a LeaderWorkerSet once the cluster has settled, whatever faults
came before: checked on a snapshot of the objects (a pure function, so it can be
tested on hand-made sets) and polled with a deadline by :func:`converged`.

A group is a live leader pod (not terminating, not finished); it is identified by
its group key in Hash mode and by its group index in Ordinal mode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    LEADERWORKERSETS,
    PODS,
    SERVICES,
    STATEFULSETS,
)
from leaderworkerset.runtime.client import ApiClient

JSON = dict[str, Any]
TRACEBACK = "Traceback (most recent call last)"
CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# Connection-level failures while the API server is away.
TRANSIENT = re.compile(
    r"aiohttp\.(?:client_exceptions\.)?(ClientConnectorError|ClientConnectionError|"
    r"ClientConnectionResetError|ClientOSError|ServerDisconnectedError|ClientPayloadError|"
    r"ServerTimeoutError|ConnectionTimeoutError|SocketTimeoutError)\b"
)


@dataclass
class Snapshot:
    """One LWS and everything of it the checks look at, as the API server returned it."""

    lws: JSON
    pods: list[JSON] = field(default_factory=list)
    statefulsets: list[JSON] = field(default_factory=list)
    services: list[JSON] = field(default_factory=list)
    revisions: list[JSON] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)  # controller log name -> text


@dataclass(frozen=True)
class Violation:
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


# --- small readers ------------------------------------------------------------------------


def _meta(obj: JSON) -> JSON:
    meta: JSON = obj.get("metadata") or {}
    return meta


def _labels(obj: JSON) -> dict[str, str]:
    labels: dict[str, str] = _meta(obj).get("labels") or {}
    return labels


def _name(obj: JSON) -> str:
    return str(_meta(obj).get("name", ""))


def _spec(lws: JSON) -> JSON:
    spec: JSON = lws.get("spec") or {}
    return spec


def is_hash(lws: JSON) -> bool:
    return _spec(lws).get("groupIdentity") == c.GROUP_IDENTITY_HASH


def post_termination(lws: JSON) -> bool:
    policy = _spec(lws).get("groupReplacementPolicy") or c.GROUP_REPLACEMENT_POST_TERMINATION
    return bool(policy == c.GROUP_REPLACEMENT_POST_TERMINATION)


def replicas_of(lws: JSON) -> int:
    return int(_spec(lws).get("replicas", c.DEFAULT_REPLICAS))


def size_of(lws: JSON) -> int:
    return int((_spec(lws).get("leaderWorkerTemplate") or {}).get("size", c.DEFAULT_SIZE))


def terminating(pod: JSON) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def finished(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def live(pod: JSON) -> bool:
    return not terminating(pod) and not finished(pod)


def is_leader(pod: JSON) -> bool:
    return _labels(pod).get(c.LABEL_WORKER_INDEX) == c.LEADER_WORKER_INDEX


def running_and_ready(pod: JSON) -> bool:
    status = pod.get("status") or {}
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready


def gated(pod: JSON) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == c.SCHEDULING_GATE_GROUP_REPLACEMENT for g in gates)


def group_id(obj: JSON) -> str | None:
    """Both modes label pods and worker sets with a group key (Ordinal's is derived
    from the leader's name, Hash's is random)."""
    return _labels(obj).get(c.LABEL_GROUP_KEY) or None


def revision_of(obj: JSON) -> str | None:
    return _labels(obj).get(c.LABEL_TEMPLATE_REVISION_HASH)


def current_revision(revisions: Iterable[JSON]) -> str | None:
    """The template hash of the newest ControllerRevision (the one the spec is at)."""
    newest = max(revisions, key=lambda r: int(r.get("revision", 0)), default=None)
    return None if newest is None else revision_of(newest)


def worker_statefulsets(snapshot: Snapshot) -> list[JSON]:
    """Ordinal mode's leader StatefulSet carries the LWS's own name; every other one
    holds the workers of one group."""
    own = _name(snapshot.lws)
    return [s for s in snapshot.statefulsets if _name(s) != own]


# --- the checks ---------------------------------------------------------------------------


def check(snapshot: Snapshot) -> list[Violation]:
    """Every invariant broken by this snapshot (empty when all hold)."""
    return [
        *check_group_count(snapshot),
        *check_keys(snapshot),
        *check_worker_statefulsets(snapshot),
        *check_orphans(snapshot),
        *check_gates(snapshot),
        *check_revisions(snapshot),
        *check_status(snapshot),
        *check_logs(snapshot.logs),
    ]


def leaders(snapshot: Snapshot) -> list[JSON]:
    return [p for p in snapshot.pods if is_leader(p) and live(p)]


def check_group_count(snapshot: Snapshot) -> list[Violation]:
    groups = leaders(snapshot)
    want = replicas_of(snapshot.lws)
    out = []
    if len(groups) != want:
        out.append(Violation("group-count", f"{len(groups)} live groups, spec asks {want}"))
    ids = Counter(group_id(p) for p in groups)
    for gid, count in ids.items():
        if count > 1:
            out.append(Violation("group-count", f"{count} live leaders share group {gid}"))
    return out


def check_keys(snapshot: Snapshot) -> list[Violation]:
    """Every live pod carries a group key (the pod webhook gave it one)."""
    return [
        Violation("unkeyed", f"pod {_name(p)} has no {c.LABEL_GROUP_KEY} label")
        for p in snapshot.pods
        if live(p) and not group_id(p)
    ]


def check_worker_statefulsets(snapshot: Snapshot) -> list[Violation]:
    out = []
    per_group = Counter(group_id(s) for s in worker_statefulsets(snapshot))
    for gid, count in per_group.items():
        if count > 1:
            out.append(Violation("duplicate-worker-sts", f"{count} worker sets for group {gid}"))
    if size_of(snapshot.lws) > 1:
        have = {_name(s) for s in worker_statefulsets(snapshot)}
        for leader in leaders(snapshot):
            if gated(leader) or _name(leader) in have or placement_pending(snapshot.lws, leader):
                continue
            out.append(Violation("missing-worker-sts", f"leader {_name(leader)}"))
    return out


def placement_pending(lws: JSON, leader: JSON) -> bool:
    """With exclusive placement the workers follow the leader's topology domain, so
    their StatefulSet waits until the leader is scheduled (as upstream's does)."""
    exclusive = c.ANNOTATION_EXCLUSIVE_TOPOLOGY in (_meta(lws).get("annotations") or {})
    return exclusive and not (leader.get("spec") or {}).get("nodeName")


def check_orphans(snapshot: Snapshot) -> list[Violation]:
    """Each dependent's controller owner must exist (the garbage collector removes
    dependents of a deleted owner, so a survivor is a leak or a wrong reference)."""
    known = {_meta(o).get("uid") for o in (snapshot.lws, *snapshot.pods, *snapshot.statefulsets)}
    out = []
    kinds: Sequence[tuple[str, list[JSON]]] = (
        ("StatefulSet", snapshot.statefulsets),
        ("Service", snapshot.services),
        ("ControllerRevision", snapshot.revisions),
    )
    for kind, objects in kinds:
        for obj in objects:
            owners = _meta(obj).get("ownerReferences") or []
            controller = [o for o in owners if o.get("controller")]
            if not controller:
                out.append(Violation("orphan", f"{kind} {_name(obj)} has no controller owner"))
            elif controller[0].get("uid") not in known:
                gone = f"{controller[0].get('kind')} {controller[0].get('name')}"
                out.append(Violation("orphan", f"{kind} {_name(obj)}: owner {gone} is gone"))
    return out


def check_gates(snapshot: Snapshot) -> list[Violation]:
    """PostTermination holds a replacement only while some group tears down (T > 0)."""
    lws = snapshot.lws
    if not (is_hash(lws) and post_termination(lws)):
        return []
    if any(terminating(p) for p in snapshot.pods):
        return []
    return [
        Violation("gate-left", f"leader {_name(p)} gated while no group tears down")
        for p in leaders(snapshot)
        if gated(p)
    ]


def check_revisions(snapshot: Snapshot) -> list[Violation]:
    by_group: dict[str | None, set[str | None]] = {}
    for pod in snapshot.pods:
        if live(pod):
            by_group.setdefault(group_id(pod), set()).add(revision_of(pod))
    for sts in worker_statefulsets(snapshot):
        gid = group_id(sts)
        if gid in by_group:
            by_group[gid].add(revision_of(sts))
    return [
        Violation("mixed-revisions", f"group {gid}: {sorted(map(str, revs))}")
        for gid, revs in by_group.items()
        if len(revs) > 1
    ]


def expected_status(snapshot: Snapshot) -> JSON:
    """replicas, readyReplicas and updatedReplicas as the pods tell them, and the one
    condition that should be True."""
    size = size_of(snapshot.lws)
    current = current_revision(snapshot.revisions)
    members: dict[str | None, list[JSON]] = {}
    for pod in snapshot.pods:
        if live(pod) and not is_leader(pod):
            members.setdefault(group_id(pod), []).append(pod)
    worker_sets = {_name(s): s for s in worker_statefulsets(snapshot)}
    ready = updated = 0
    groups = leaders(snapshot)
    # Ordinal (upstream's rule): a group of more than one counts only once its worker
    # StatefulSet exists, and is updated only with that set at the current revision.
    # Hash counts every live leader by its own revision (a Hash leader is Ready only
    # with its whole group, through the group-ready gate).
    ordinal = not is_hash(snapshot.lws)
    for leader in groups:
        worker_set = worker_sets.get(_name(leader)) if ordinal else None
        if ordinal and size > 1 and worker_set is None:
            continue
        workers = members.get(group_id(leader), [])
        whole = len(workers) == size - 1
        group_ready = (
            whole and running_and_ready(leader) and all(running_and_ready(w) for w in workers)
        )
        ready += group_ready
        updated += (
            revision_of(leader) == current
            and (worker_set is None or revision_of(worker_set) == current)
            and all(revision_of(w) == current for w in workers)
        )
    want = replicas_of(snapshot.lws)
    settled = len(groups) == want and ready == want and updated == want
    return {
        "replicas": len(groups),
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "true": c.CONDITION_AVAILABLE if settled else c.CONDITION_PROGRESSING,
    }


def check_status(snapshot: Snapshot) -> list[Violation]:
    status = snapshot.lws.get("status") or {}
    want = expected_status(snapshot)
    out = []
    for name in ("replicas", "readyReplicas", "updatedReplicas"):
        if int(status.get(name, 0)) != want[name]:
            out.append(
                Violation("status", f"{name} says {status.get(name, 0)}, pods say {want[name]}")
            )
    true = sorted(
        cond.get("type") for cond in status.get("conditions") or [] if cond.get("status") == "True"
    )
    if want["true"] not in true or (want["true"] == c.CONDITION_AVAILABLE and len(true) != 1):
        out.append(Violation("status", f"conditions True: {true}, pods say {want['true']}"))
    return out


def tracebacks(text: str) -> list[str]:
    """Every traceback of a log: from the JSON lines' fields (the controller logs a
    failed reconcile with its stack) and from plain lines (the console format, or a
    crash on stderr). A chained exception ("The above exception was the direct cause",
    "During handling of the above exception") is one traceback, ending in the
    exception that was raised last."""
    found = []
    lines = text.splitlines()
    chained = False
    for i, line in enumerate(lines):
        if line.strip() in CHAINED:
            chained = True
            continue
        if TRACEBACK not in line:
            if line.strip() and not line.startswith(" "):
                chained = False
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            found += [v for v in record.values() if isinstance(v, str) and TRACEBACK in v]
            continue
        block = [line]
        for follow in lines[i + 1 :]:
            block.append(follow)
            if follow and not follow.startswith(" "):
                break
        if chained and found:
            found[-1] += "\n" + "\n".join(block)
        else:
            found.append("\n".join(block))
        chained = False
    return found


def raised(traceback: str) -> str:
    """The exception line a traceback ends with."""
    lines = [line for line in traceback.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def expected(traceback: str) -> bool:
    """A failure of the connection to the API server (restarted, or not yet up), which
    the controller logs with its stack and retries: not a bug."""
    return bool(TRANSIENT.match(raised(traceback)))


def check_logs(logs: dict[str, str]) -> list[Violation]:
    out = []
    for name, text in logs.items():
        unexpected = [tb for tb in tracebacks(text) if not expected(tb)]
        if unexpected:
            first = unexpected[0]
            detail = f"{len(unexpected)} in {name}, first raised {raised(first)}:\n{first[-1500:]}"
            out.append(Violation("traceback", detail))
    return out


def transient_tracebacks(logs: dict[str, str]) -> int:
    return sum(1 for text in logs.values() for tb in tracebacks(text) if expected(tb))


# --- against the cluster ------------------------------------------------------------------


def read_logs(paths: Iterable[Path]) -> dict[str, str]:
    logs = {}
    for path in paths:
        try:
            logs[path.name] = path.read_text(errors="replace")
        except OSError:
            logs[path.name] = ""
    return logs


async def take_snapshot(api: ApiClient, namespace: str, name: str) -> Snapshot:
    selector = f"{c.LABEL_SET_NAME}={name}"

    async def items(resource: Any) -> list[JSON]:
        answer = await api.list(resource, namespace, label_selector=selector)
        return list(answer.get("items") or [])

    lws = await api.get(LEADERWORKERSETS, name, namespace)
    pods, sets, services, revisions = await asyncio.gather(
        items(PODS), items(STATEFULSETS), items(SERVICES), items(CONTROLLER_REVISIONS)
    )
    # Services of the LWS carry no name label in every mode: take those it owns too.
    everything = (await api.list(SERVICES, namespace)).get("items") or []
    owners = {_meta(lws).get("uid")} | {_meta(p).get("uid") for p in pods}
    seen = {_name(s) for s in services}
    for svc in everything:
        refs = _meta(svc).get("ownerReferences") or []
        if _name(svc) not in seen and any(r.get("uid") in owners for r in refs):
            services.append(svc)
    return Snapshot(lws, pods, sets, services, revisions)


@dataclass
class Verdict:
    violations: list[Violation]
    seconds: float  # from the start of the wait to the last snapshot
    snapshot: Snapshot | None  # None for a verdict merged from several LWS

    def report(self) -> str:
        return "\n".join(str(v) for v in self.violations) or "none"


async def converged(
    api: ApiClient,
    namespace: str,
    name: str,
    *,
    log_paths: Iterable[Path] = (),
    within: float = 180.0,
    interval: float = 1.0,
) -> Verdict:
    """Poll until every invariant holds or the deadline passes; the last verdict either
    way (the caller asserts it has no violations, or marks the known ones)."""
    paths = list(log_paths)
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        # The logs only grow: they are read once the objects have settled.
        snapshot = await take_snapshot(api, namespace, name)
        elapsed = loop.time() - start
        if not check(snapshot) or elapsed >= within:
            final = dataclasses.replace(snapshot, logs=read_logs(paths))
            return Verdict(check(final), elapsed, final)
        await asyncio.sleep(interval)
