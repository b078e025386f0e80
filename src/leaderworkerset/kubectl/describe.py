"""`kubectl lws describe NAME GROUP`: one group's pods, worker StatefulSet, Services
and recent Events, and one sentence on why it is in its state."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, meta_of, name_of, revision_key_of
from leaderworkerset.group.gang_state import Gang, GangState
from leaderworkerset.group.readiness import (
    pod_condition_true,
    pod_counts_as_ready,
    pod_finished,
    pod_terminating,
    statefulset_ready,
)
from leaderworkerset.group.roles import group_index, is_leader, worker_index
from leaderworkerset.group.state import Group, GroupState, group_state
from leaderworkerset.kubectl.ages import age_since, human_age, parse_time
from leaderworkerset.kubectl.pairing import Pairing
from leaderworkerset.kubectl.rows import GroupRow, pairing_of, rows_of, short
from leaderworkerset.kubectl.snapshot import Snapshot
from leaderworkerset.tables import NONE, table

RECENT_EVENTS = 20
# Sections' tables sit under their titles, as in `kubectl describe`.
INDENT = "  "


class UnknownGroup(Exception):
    """No group (or more than one) matches; the message lists the candidates."""


def find_group(snapshot: Snapshot, wanted: str) -> Group:
    """A group by ordinal, full key, key prefix, or its leader pod's name."""
    groups = snapshot.groups()
    exact = [g for g in groups if wanted in (g.index, name_of(g.leader))]
    if len(exact) == 1:
        return exact[0]
    matches = [g for g in groups if not g.index.isdigit() and g.index.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    valid = ", ".join(short(g.index) for g in groups) or "none"
    lws = name_of(snapshot.lws)
    if matches:
        raise UnknownGroup(
            f'group "{wanted}" of leaderworkerset "{lws}" is ambiguous; '
            f"it starts {len(matches)} keys: {', '.join(short(g.index) for g in matches)}"
        )
    raise UnknownGroup(f'leaderworkerset "{lws}" has no group "{wanted}"; its groups: {valid}')


def _short_revision(value: object) -> str:
    return str(value)[:10] if value else NONE


def why(snapshot: Snapshot, group: Group, pairing: Pairing, now: datetime) -> str:
    """One sentence on why the group is in its state."""
    current = snapshot.current_revision
    state = group_state(group, current)
    leader = group.leader
    if state is GroupState.TEARING_DOWN:
        if leader is None:
            cause = "its leader is gone"
        elif pod_finished(leader):
            phase = (leader.get("status") or {}).get("phase")
            cause = f"its leader {name_of(leader)} is {phase}"
        else:
            cause = f"its leader {name_of(leader)} is terminating{grace_period(leader, now)}"
        remaining = len(group.pods)
        waiter = next((n for n, k in pairing.waits_for.items() if k == group.index), None)
        tail = f"; gated leader {waiter} waits for it" if waiter else ""
        return f"tearing down: {cause}, {remaining} pod(s) left{tail}."
    assert leader is not None
    name = name_of(leader)
    counts = f"(T={pairing.tearing_down}, G={pairing.gated})"
    if state is GroupState.GATED:
        waited = pairing.waits_for.get(name)
        if waited:
            return f"gated: waiting for group {short(waited)} to finish tearing down {counts}."
        if name in pairing.admitting:
            return (
                f"gated: fewer groups are tearing down than leaders wait, so this one, among "
                f"the oldest, is being admitted {counts}."
            )
        return f"gated: its scheduling gate is still on {counts}."
    if state is GroupState.READY:
        workers = len(group.workers)
        return (
            f"ready: leader {name} is Running and Ready and its {workers} worker(s) are "
            f"ready on its revision."
        )
    if state is GroupState.UPDATING:
        revision = group.revision
        sts = group.worker_statefulset
        if current is not None and revision != current:
            return (
                f"updating: the group runs revision {_short_revision(revision)} while the "
                f"current one is {_short_revision(current)}, and it is not ready."
            )
        if sts is not None and (revision_key_of(sts) or None) != revision:
            return (
                f"updating: worker StatefulSet {name_of(sts)} is not yet on the leader's "
                f"revision {_short_revision(revision)}."
            )
        status = (sts or {}).get("status") or {}
        return (
            f"updating: worker StatefulSet {name_of(sts)} is rolling out "
            f"({status.get('currentRevision')} -> {status.get('updateRevision')})."
        )
    return f"not ready: {_not_ready_cause(group)}."


def grace_period(pod: JSON, now: datetime) -> str:
    """When a terminating pod's grace period ends, as " (grace period ends in 25s)" or
    " (grace period ended 3s ago)"; empty without a deletionTimestamp. The API server
    sets that timestamp to the end of the grace period, not to when the deletion
    was asked for, so it lies ahead until the kubelet is late or a finalizer holds
    the pod."""
    end = parse_time(meta_of(pod).get("deletionTimestamp"))
    if end is None:
        return ""
    remaining = (end - now).total_seconds()
    if remaining >= 0:
        return f" (grace period ends in {human_age(remaining)})"
    return f" (grace period ended {human_age(-remaining)} ago)"


def _not_ready_cause(group: Group) -> str:
    leader = group.leader
    assert leader is not None
    name = name_of(leader)
    if not (leader.get("spec") or {}).get("nodeName"):
        return f"leader {name} is not scheduled yet"
    phase = (leader.get("status") or {}).get("phase")
    if phase != "Running":
        return f"leader {name} is {phase}"
    sts = group.worker_statefulset
    if len(group.workers) + 1 < (group.size or 1) and sts is None:
        return f"leader {name} has no worker StatefulSet yet"
    unready = [
        f"{name_of(p)} (terminating)" if pod_terminating(p) else name_of(p)
        for p in group.workers
        if not pod_counts_as_ready(p)
    ]
    if unready:
        return f"{len(unready)} worker(s) not ready: {', '.join(sorted(unready))}"
    if sts is not None and not statefulset_ready(sts):
        status = sts.get("status") or {}
        return (
            f"worker StatefulSet {name_of(sts)} has {status.get('availableReplicas', 0)}/"
            f"{(sts.get('spec') or {}).get('replicas', 1)} available"
        )
    if not pod_condition_true(leader, "Ready"):
        return f"leader {name} is Running but not Ready"
    return "its group-ready condition is not set yet"


def _pod_line(pod: JSON, now: datetime) -> list[str]:
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Unknown")
    if pod_terminating(pod):
        phase += " (terminating)"
    elif (pod.get("spec") or {}).get("schedulingGates"):
        phase += " (gated)"
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len((pod.get("spec") or {}).get("containers") or []) or len(statuses)
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    role = "leader" if is_leader(pod) else f"worker {worker_index(pod)}"
    return [
        name_of(pod),
        role,
        phase,
        f"{ready}/{total}",
        str((pod.get("spec") or {}).get("nodeName") or NONE),
        str(restarts),
        age_since(meta_of(pod).get("creationTimestamp"), now),
    ]


def _event_time(event: JSON) -> str:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        meta_of(event).get("creationTimestamp"),
    ):
        if value:
            return str(value)
    return ""


def group_events(snapshot: Snapshot, names: set[tuple[str, str]]) -> list[JSON]:
    """Events about any (kind, name) in `names`, oldest first, the last few only."""
    picked = []
    for event in snapshot.events:
        about = event.get("involvedObject") or event.get("regarding") or {}
        if (str(about.get("kind")), str(about.get("name"))) in names:
            picked.append(event)
    picked.sort(key=lambda e: (parse_time(_event_time(e)) or datetime.min.astimezone(), name_of(e)))
    return picked[-RECENT_EVENTS:]


def describe(snapshot: Snapshot, group: Group, now: datetime) -> str:
    pods = sorted(
        (p for p in snapshot.pods if group_index(p) == group.index),
        key=lambda p: (not is_leader(p), int(worker_index(p) or 0), name_of(p)),
    )
    row = next(r for r in rows_of(snapshot, now) if r.index == group.index)
    out = _summary(snapshot, group, row, now)
    out += ["", "Pods:"]
    pod_rows = [_pod_line(p, now) for p in pods]
    header = ["NAME", "ROLE", "PHASE", "READY", "NODE", "RESTARTS", "AGE"]
    out.append(table(header, pod_rows, indent=INDENT) if pod_rows else "  <none>")
    out += ["", "Worker StatefulSet:", _statefulset_section(group.worker_statefulset)]
    out += ["", "Services:"]
    services = _services(snapshot.services, group.index)
    out.append(
        table(["NAME", "SCOPE", "SELECTOR"], services, indent=INDENT) if services else "  <none>"
    )
    out += ["", "Events:", _events_section(snapshot, group, pods, now, row.gang)]
    return "\n".join(out)


def _summary(snapshot: Snapshot, group: Group, row: GroupRow, now: datetime) -> list[str]:
    pairing = pairing_of(snapshot, now) if snapshot.hash_mode else Pairing()
    revision = group.revision
    current = snapshot.current_revision
    if current is None:
        which = ""
    else:
        which = " (current)" if revision == current else f" (old; current is {current})"
    named = group.index if group.index.isdigit() else f"{short(group.index)} ({group.index})"
    lines = [
        ("Name", name_of(snapshot.lws)),
        ("Namespace", str(meta_of(snapshot.lws).get("namespace") or "")),
        ("Group", named),
        ("State", row.state.value),
        ("Why", why(snapshot, group, pairing, now)),
        ("Ready", f"{row.ready}/{row.size} pods"),
        ("Revision", f"{revision or NONE}{which}"),
        ("Leader", f"{row.leader or NONE} on {row.leader_node or NONE}"),
        ("Age", row.age),
    ]
    if snapshot.hash_mode:
        rank = row.scale_down_rank
        lines.append(("Scale-down rank", str(rank) if rank is not None else "-"))
    if snapshot.gang_scheduled:
        lines += _gang_lines(row)
    return [f"{key + ':':<17}{value}" for key, value in lines]


def _gang_lines(row: GroupRow) -> list[tuple[str, str]]:
    gang = row.gang
    if gang is None:
        return [("PodGroup", f"{NONE} (its pods name none)")]
    policy = f"gang of {gang.min_count}" if gang.min_count is not None else "basic"
    shape = f", {policy}, {gang.bound}/{gang.members} member(s) bound"
    known = gang.state not in (GangState.MISSING, GangState.UNKNOWN)
    message = " ".join(gang.message.split())
    return [
        ("PodGroup", gang.pod_group + (shape if known else "")),
        ("Gang", f"{gang.state.value}: {message}" if message else gang.state.value),
    ]


def _statefulset_section(sts: JSON | None) -> str:
    if sts is None:
        return "  <none>"
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    sts_revision = revision_key_of(sts)
    rollout = (
        "up to date"
        if status.get("currentRevision", "") == status.get("updateRevision", "")
        else f"rolling out {status.get('currentRevision')} -> {status.get('updateRevision')}"
    )
    row = [
        name_of(sts),
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        str(sts_revision or NONE),
        rollout,
    ]
    return table(["NAME", "READY", "REVISION", "ROLLOUT"], [row], indent=INDENT)


def _events_section(
    snapshot: Snapshot, group: Group, pods: list[JSON], now: datetime, gang: Gang | None
) -> str:
    about = {(c.KIND, name_of(snapshot.lws))} | {("Pod", name_of(p)) for p in pods}
    if group.worker_statefulset is not None:
        about.add(("StatefulSet", name_of(group.worker_statefulset)))
    if gang is not None:
        about.add(("PodGroup", gang.pod_group))
    events = group_events(snapshot, about)
    if not events:
        return "  <none>"
    event_rows = [
        [
            age_since(_event_time(e), now),
            str(e.get("type") or ""),
            str(e.get("reason") or ""),
            f"{(e.get('involvedObject') or {}).get('kind', '')}/"
            f"{(e.get('involvedObject') or {}).get('name', '')}",
            " ".join(str(e.get("message") or e.get("note") or "").split()),
        ]
        for e in events
    ]
    return table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], event_rows, indent=INDENT)


def _services(services: Sequence[JSON], index: str) -> list[list[str]]:
    rows = []
    for service in sorted(services, key=name_of):
        selector = (service.get("spec") or {}).get("selector") or {}
        if c.LABEL_GROUP_INDEX not in selector:
            scope = "shared"
        elif selector.get(c.LABEL_GROUP_INDEX) == index:
            scope = "this group"
        else:
            continue
        text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        rows.append([name_of(service), scope, text])
    return rows
