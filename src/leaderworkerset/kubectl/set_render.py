"""`kubectl lws disaggregatedset` output: the set's summary, its roles, its
LeaderWorkerSets and each one's groups (the `kubectl lws groups` table), as text in
`kubectl describe`'s layout, or the same data as JSON or YAML."""

from __future__ import annotations

import json

import yaml

from leaderworkerset.api.objects import JSON
from leaderworkerset.kubectl.render import group_table
from leaderworkerset.kubectl.set_rows import LwsLine, SetView
from leaderworkerset.tables import NONE, table

INDENT = "  "
ROLE_HEADER = ["ROLE", "SCALING", "TARGET", "REPLICAS", "READY", "UPDATED", "GROUP IDENTITY"]
LWS_HEADER = ["SLICE", "REVISION", "ROLE", "NAME", "REPLICAS", "READY", "INITIAL", "SERVICE"]


def set_text(view: SetView, *, wide: bool = False) -> str:
    out = _summary(view)
    out += ["", "Roles:", _roles(view)]
    out += ["", "LeaderWorkerSets:", _leaderworkersets(view)]
    for line in view.leaderworkersets:
        out += ["", f"Groups of {line.name} ({line.group_identity}):"]
        if line.groups:
            table_text = group_table(
                line.groups, hash_mode=line.hash_mode, wide=wide, indent=INDENT, gangs=line.gangs
            )
            out.append(table_text)
        else:
            out.append(f"{INDENT}{NONE}")
    return "\n".join(out)


def set_objects(view: SetView, output: str) -> str:
    document = {
        "disaggregatedSet": view.name,
        "namespace": view.namespace,
        "revision": view.revision,
        "slices": view.slices,
        "placement": view.placement,
        "generation": view.generation,
        "observedGeneration": view.observed_generation,
        "conditions": view.conditions,
        "roles": [role.as_dict() for role in view.roles],
        "leaderWorkerSets": [line.as_dict() for line in view.leaderworkersets],
    }
    if output == "json":
        return json.dumps(document, indent=2)
    return yaml.safe_dump(document, sort_keys=False).rstrip("\n")


def _summary(view: SetView) -> list[str]:
    lines = [
        ("Name", view.name),
        ("Namespace", view.namespace),
        ("Revision", view.revision),
        ("Slices", str(view.slices)),
        ("Placement", view.placement),
    ]
    # Upstream's controller writes no conditions; ours writes Available and Progressing.
    lines += [(str(cond.get("type")), _condition(cond)) for cond in view.conditions]
    if not view.conditions:
        lines.append(("Conditions", NONE))
    if view.stale:
        # The controller has not acted on the latest spec yet: what is above may be old.
        lines.append(
            (
                "Status",
                f"stale: describes generation {view.observed_generation}, "
                f"the spec is at {view.generation}",
            )
        )
    return [f"{key + ':':<13}{value}" for key, value in lines]


def _condition(cond: JSON) -> str:
    text = f"{cond.get('status')} ({cond.get('reason') or NONE})"
    message = " ".join(str(cond.get("message") or "").split())
    return f"{text}: {message}" if message else text


def _roles(view: SetView) -> str:
    rows = [
        [
            role.name,
            role.scaling,
            NONE if role.target is None else str(role.target),
            str(role.replicas),
            str(role.ready),
            str(role.updated),
            role.group_identity,
        ]
        for role in view.roles
    ]
    return table(ROLE_HEADER, rows, indent=INDENT)


def _leaderworkersets(view: SetView) -> str:
    if not view.leaderworkersets:
        return f"{INDENT}{NONE}"
    return table(LWS_HEADER, [_lws_row(line) for line in view.leaderworkersets], indent=INDENT)


def _lws_row(line: LwsLine) -> list[str]:
    which = "current" if line.current else "old"
    return [
        line.slice,
        f"{line.revision or NONE} ({which})",
        line.role,
        line.name,
        str(line.replicas),
        str(line.ready),
        "-" if line.initial is None else str(line.initial),
        line.service or NONE,
    ]
