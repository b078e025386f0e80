"""LWS environment variables of a pod: LWS_LEADER_ADDRESS,
LWS_GROUP_SIZE and LWS_WORKER_INDEX, injected first in every container."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group import names as naming
from leaderworkerset.webhooks.denial import Denied, display_name
from leaderworkerset.webhooks.nested import Pod

EnvVar = JSON

_ENV_FAILURE = "Failure constructing environment variables"


def lws_env(pod: Pod, *, hash_mode: bool) -> list[EnvVar]:
    """LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX, in that order."""
    meta = meta_of(pod)
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
        leader_host = naming.leader_pod_name(lws_name, group_index)
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
