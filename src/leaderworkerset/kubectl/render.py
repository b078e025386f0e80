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


def group_table(
    rows: Sequence[GroupRow], *, hash_mode: bool, wide: bool = False, indent: str = ""
) -> str:
    header = ["GROUP", "STATE", "READY", "REVISION", "LEADER NODE", "RESTARTS", "AGE"]
    if hash_mode:
        header += ["SCALE-DOWN RANK", "WAITING FOR"]
    if wide:
        header += ["LEADER POD", "WORKER STATEFULSET"]
    cells = []
    for row in rows:
        line = [
            row.group,
            row.state.value,
            f"{row.ready}/{row.size}",
            _revision(row),
            row.leader_node or NONE,
            str(row.restarts),
            row.age,
        ]
        if hash_mode:
            rank = row.scale_down_rank
            line += [str(rank) if rank is not None else "-", row.waiting_for or "-"]
        if wide:
            line += [row.leader or NONE, row.worker_statefulset or NONE]
        cells.append(line)
    return table(header, cells, indent=indent)


def group_objects(
    rows: Sequence[GroupRow], *, name: str, namespace: str, hash_mode: bool, output: str
) -> str:
    document = {
        "leaderWorkerSet": name,
        "namespace": namespace,
        "groupIdentity": "Hash" if hash_mode else "Ordinal",
        "groups": [row.as_dict(hash_mode) for row in rows],
    }
    if output == "json":
        return json.dumps(document, indent=2)
    return yaml.safe_dump(document, sort_keys=False).rstrip("\n")
