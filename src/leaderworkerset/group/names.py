"""How LeaderWorkerSet objects are named and keyed: the group key and everything
derived from it (leader and worker hostnames, the per-group Service, the leader
address, subgroup keys), ordinals and revision names.

Pure functions shared by the webhooks and the controllers, so that the names a
webhook writes at admission and the names a controller looks up are computed by
the same code.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from leaderworkerset.api.go.ints import go_div, go_mod
from leaderworkerset.api.leaderworkerset import constants as c

_ORDINAL_SUFFIX = re.compile(r"^(.*)-([0-9]+)$")
_INT32_MAX = 2**31 - 1
# Hash-mode hostnames are the first characters of the group key (docs/hash-mode.md).
HASH_HOSTNAME_LENGTH = 8


def sha1_hex(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def parse_ordinal(pod_name: str) -> tuple[str, int]:
    """("web-3-2") -> ("web-3", 2); ("web") -> ("", -1). Out-of-int32 ordinals are -1."""
    match = _ORDINAL_SUFFIX.match(pod_name)
    if match is None:
        return "", -1
    ordinal = int(match.group(2))
    if ordinal > _INT32_MAX:
        return "", -1
    return match.group(1), ordinal


def ordinal_group_key(namespace: str, leader_pod_name: str) -> str:
    """Ordinal mode: a function of the leader's name, so a recreated leader keeps it."""
    return sha1_hex(f"{namespace}/{leader_pod_name}")


def random_group_key(namespace: str) -> str:
    """Hash mode: drawn once per leader at admission and never reused."""
    return sha1_hex(f"{namespace}/{secrets.token_hex(8)}")


def subgroup_key(owner: str, subgroup_index: str | int) -> str:
    """`owner` is the leader's pod name in Ordinal mode. In Hash mode it is the group
    key: leader and workers both know it at admission, while the leader's pod name
    does not exist yet."""
    return sha1_hex(f"{owner}/{subgroup_index}")


def subgroup_index(size: int, subgroup_size: int, worker_index: int) -> str:
    """When size-1 (and not size) divides evenly, the leader is subgroup 0's extra member."""
    if go_mod(size - 1, subgroup_size) == 0 and go_mod(size, subgroup_size) != 0:
        return str(go_div(worker_index - 1, subgroup_size))
    return str(go_div(worker_index, subgroup_size))


def leader_pod_name(lws_name: str, group_index: int | str) -> str:
    return f"{lws_name}-{group_index}"


def hash_hostname(group_key: str) -> str:
    return group_key[:HASH_HOSTNAME_LENGTH]


def hash_worker_hostname(group_key: str, worker_index: int) -> str:
    """Hash-mode worker hostname; the leader's TPU host list is built from it."""
    return f"{hash_hostname(group_key)}-{worker_index}"


def hash_group_service_name(lws_name: str, group_key: str) -> str:
    """Per-group headless Service of a Hash-mode group under UniquePerReplica.

    Derived from the key, not the leader's name, because the name does not exist
    yet when the leader is admitted: the webhook sets the leader's subdomain and
    the pod reconciler names the Service and the worker StatefulSet's serviceName
    with this one function.
    """
    return f"{lws_name}-{hash_hostname(group_key)}"


def leader_address(hostname: str, subdomain: str, namespace: str) -> str:
    """LWS_LEADER_ADDRESS: no cluster-domain suffix, as upstream."""
    return f"{hostname}.{subdomain}.{namespace}"


def hpa_pod_selector(lws_name: str) -> str:
    return f"{c.LABEL_SET_NAME}={lws_name},{c.LABEL_WORKER_INDEX}=0"


def revision_name(lws_name: str, hash_string: str, revision: int) -> str:
    """ControllerRevision names: the owner's name is cut to 220 bytes as upstream."""
    prefix = lws_name.encode("utf-8")[:220].decode("utf-8", "ignore")
    return f"{prefix}-{hash_string}-{revision}"
