"""LWS environment variables of a pod (spec §5.11) and the primitives every pod
mutation step shares: the denial error and Go-compatible integer parsing.

These live here because this module sits at the bottom of the webhook import
graph (tpu.py and pods.py import it, it imports neither).
"""

from __future__ import annotations

import json
import re
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.group import names as naming

Pod = dict[str, Any]
EnvVar = dict[str, Any]

_ENV_FAILURE = "Failure constructing environment variables"
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Denied(Exception):
    """An admission denial; `message` is what the API server shows the client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def atoi(text: str) -> int:
    """Parse like Go's strconv.Atoi, denying with its exact error text.

    Python's int() accepts spaces and underscores that Go rejects, and users
    compare these messages with the upstream controller's.
    """
    quoted = json.dumps(text, ensure_ascii=False)
    if _DECIMAL.fullmatch(text) is None:
        raise Denied(f"strconv.Atoi: parsing {quoted}: invalid syntax")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise Denied(f"strconv.Atoi: parsing {quoted}: value out of range")
    return value


def go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero; Python's floors."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def go_mod(a: int, b: int) -> int:
    return a - b * go_div(a, b)


def child_map(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """`parent[key]`, created empty when absent or null, for writing into."""
    value: dict[str, Any] | None = parent.get(key)
    if value is None:
        value = {}
        parent[key] = value
    return value


def display_name(pod: Pod) -> str:
    """The pod's name, or its generateName while the API server has not named it
    (Hash-mode leaders), so that denials still say which pod was refused."""
    meta = pod.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "")


def lws_env(pod: Pod, *, hash_mode: bool) -> list[EnvVar]:
    """LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX, in that order."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    namespace = meta.get("namespace") or ""
    who = f"{namespace}/{display_name(pod)}"

    def required(mapping: dict[str, str], key: str, what: str) -> str:
        if key not in mapping:
            raise Denied(f"{_ENV_FAILURE}, no {what} found for pod {who}")
        return mapping[key]

    lws_name = required(labels, c.LABEL_SET_NAME, "name label")
    group_index = required(labels, c.LABEL_GROUP_INDEX, "group index label")
    if hash_mode:
        # Hash groups have no ordinal; their leader is addressed by its key-derived hostname.
        leader_host = naming.hash_hostname(required(labels, c.LABEL_GROUP_KEY, "group key label"))
    else:
        leader_host = f"{lws_name}-{group_index}"
    size = required(annotations, c.ANNOTATION_SIZE, "size annotation")
    worker_index = required(labels, c.LABEL_WORKER_INDEX, "worker index label")
    subdomain = (pod.get("spec") or {}).get("subdomain") or ""
    return [
        {
            "name": c.ENV_LEADER_ADDRESS,
            "value": naming.leader_address(leader_host, subdomain, namespace),
        },
        {"name": c.ENV_GROUP_SIZE, "value": size},
        {"name": c.ENV_WORKER_INDEX, "value": worker_index},
    ]


def with_env_first(first: list[EnvVar], env: list[EnvVar]) -> list[EnvVar]:
    """`first`, then `env` in its order without duplicate names (first occurrence wins).

    Entries named like one of `first` are dropped so that the injected values
    always win over user-supplied ones.
    """
    seen = {str(var.get("name", "")) for var in first}
    result = list(first)
    for var in env:
        name = str(var.get("name", ""))
        if name not in seen:
            seen.add(name)
            result.append(var)
    return result


def add_lws_env(pod: Pod, *, hash_mode: bool) -> None:
    """Put the LWS variables first in every container and init container, in place."""
    injected = lws_env(pod, hash_mode=hash_mode)
    spec = pod.get("spec") or {}
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or []:
            container["env"] = with_env_first(
                [dict(var) for var in injected], container.get("env") or []
            )
