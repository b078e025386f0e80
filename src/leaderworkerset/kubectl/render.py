"""`kubectl lws groups` output: the group rows as a table (`leaderworkerset.tables`,
kubectl's layout, `<none>` for an empty cell) or as JSON or YAML objects."""

from __future__ import annotations

import json
from collections.abc import Sequence

import yaml

from leaderworkerset.kubectl.rows import GroupRow
from leaderworkerset.tables import NONE, table


def _revision(row: GroupRow) -> str:
    if row.current is None:
        return (row.revision or NONE)[:10]
    return "current" if row.current else "old"


def gang_cell(row: GroupRow) -> str:
    """The gang's state, with the scheduler's reason in brackets; `-` for a group whose
    pods name no PodGroup."""
    gang = row.gang
    if gang is None:
        return "-"
    return f"{gang.state.value} ({gang.reason})" if gang.reason else gang.state.value


def group_table(
    rows: Sequence[GroupRow],
    *,
    hash_mode: bool,
    wide: bool = False,
    indent: str = "",
    gangs: bool = False,
) -> str:
    """`gangs`: the LWS has spec.scheduling; PODGROUP and GANG come last, the gang's
    free-text reason at the end of the line."""
    header = [
        "GROUP",
        "STATE",
        "READY",
        "REVISION",
        "LEADER NODE",
        "RESTARTS",
        "RECREATED",
        "AGE",
    ]
    if hash_mode:
        header += ["SCALE-DOWN RANK", "WAITING FOR"]
    if wide:
        header += ["LEADER POD", "WORKER STATEFULSET"]
    if gangs:
        header += ["PODGROUP", "GANG"]
    cells = []
    for row in rows:
        line = [
            row.group,
            row.state_text,
            f"{row.ready}/{row.size}",
            _revision(row),
            row.leader_node or NONE,
            str(row.restarts),
            "-" if row.recreations is None else str(row.recreations),
            row.age,
        ]
        if hash_mode:
            rank = row.scale_down_rank
            line += [str(rank) if rank is not None else "-", row.waiting_for or "-"]
        if wide:
            line += [row.leader or NONE, row.worker_statefulset or NONE]
        if gangs:
            line += [row.gang.pod_group if row.gang else NONE, gang_cell(row)]
        cells.append(line)
    return table(header, cells, indent=indent)


def group_objects(
    rows: Sequence[GroupRow],
    *,
    name: str,
    namespace: str,
    hash_mode: bool,
    output: str,
    gangs: bool = False,
) -> str:
    document = {
        "leaderWorkerSet": name,
        "namespace": namespace,
        "groupIdentity": "Hash" if hash_mode else "Ordinal",
        "groups": [row.as_dict(hash_mode, gangs) for row in rows],
    }
    if output == "json":
        return json.dumps(document, indent=2)
    return yaml.safe_dump(document, sort_keys=False).rstrip("\n")
