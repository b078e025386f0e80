"""TPU environment variables of a pod.

TPU runtimes find their peers through TPU_WORKER_HOSTNAMES and their own rank
through TPU_WORKER_ID, so the lists below must name, in rank order, exactly
the DNS names the group's pods get.

In Hash mode (`leader_host` given) the leader's pod name is unknown at
admission, so the key-derived hostname takes its place: the leader is
`<leader_host>.<sub>` and worker m is `<leader_host>-<m>.<sub>`, which is why
pods.py gives Hash-mode workers exactly those hostnames.
"""

from __future__ import annotations

from leaderworkerset.api.go.ints import go_div, go_mod
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group import names as naming
from leaderworkerset.group.roles import is_leader
from leaderworkerset.group.tpu import tpu_containers
from leaderworkerset.webhooks.denial import Denied, atoi, display_name
from leaderworkerset.webhooks.env import EnvVar
from leaderworkerset.webhooks.nested import Pod

Container = JSON


def _env_value(container: Container, name: str) -> str | None:
    for var in container.get("env") or []:
        if var.get("name") == name:
            return str(var.get("value", ""))
    return None


def _already_set(container: Container) -> bool:
    return any(
        _env_value(container, name) is not None
        for name in (c.ENV_TPU_WORKER_HOSTNAMES, c.ENV_TPU_WORKER_ID)
    )


def _append_env(container: Container, values: list[tuple[str, str]]) -> None:
    env: list[EnvVar] = container.get("env") or []
    env.extend({"name": name, "value": value} for name, value in values)
    container["env"] = env


def _parent(pod: Pod) -> tuple[str, int]:
    parent, ordinal = naming.parse_ordinal(display_name(pod))
    if parent == "":
        raise Denied(f"parsing parent name from pod {display_name(pod)}")
    return parent, ordinal


class _Facts:
    """What every TPU rule reads from the pod."""

    def __init__(self, pod: Pod) -> None:
        meta = meta_of(pod)
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.annotations: dict[str, str] = meta.get("annotations") or {}
        self.subdomain: str = (pod.get("spec") or {}).get("subdomain") or ""
        self.is_leader = is_leader(pod)
        self.leader_requests_tpus = (
            self.annotations.get(c.ANNOTATION_LEADER_REQUESTS_TPUS) == "true"
        )
        policy = self.annotations.get(c.ANNOTATION_SUBGROUP_POLICY_TYPE)
        self.leader_excluded = policy == c.SUBGROUP_POLICY_LEADER_EXCLUDED


def add_tpu_env(pod: Pod, size: int, *, leader_host: str | None = None) -> None:
    """Append the TPU variables to the TPU containers, in place; may deny."""
    containers = tpu_containers(pod)
    if not containers:
        return
    facts = _Facts(pod)
    if c.ANNOTATION_SUBGROUP_SIZE in facts.annotations:
        _add_subgroup_env(pod, containers[0], facts, leader_host)
    else:
        _add_group_env(pod, containers, size, facts, leader_host)


def _add_group_env(
    pod: Pod, containers: list[Container], size: int, facts: _Facts, leader_host: str | None
) -> None:
    """One slice spans the whole group, each TPU container being one worker of it."""
    if _already_set(containers[0]):
        return
    if facts.is_leader:
        leader, worker = leader_host or display_name(pod), 0
    else:
        parent, ordinal = _parent(pod)
        leader = leader_host or parent
        # Without TPUs the leader holds no rank, so worker 1 is rank 0.
        worker = ordinal if facts.leader_requests_tpus else ordinal - 1
    defined = [_env_value(container, c.ENV_TPU_PROCESS_PORT) for container in containers]
    ports = [
        port if port is not None else str(c.TPU_DEFAULT_PROCESS_PORT + k)
        for k, port in enumerate(defined)
    ]
    members = [leader] if facts.leader_requests_tpus or facts.is_leader else []
    members += [f"{leader}-{m}" for m in range(1, size)]
    hosts = [f"{member}.{facts.subdomain}" for member in members for _ in ports]
    addresses = [f"{member}.{facts.subdomain}:{port}" for member in members for port in ports]
    for k, container in enumerate(containers):
        values = [
            (c.ENV_TPU_WORKER_HOSTNAMES, ",".join(hosts)),
            (c.ENV_TPU_WORKER_ID, str(worker * len(containers) + k)),
            (c.ENV_TPU_NAME, leader),
            (c.ENV_TPU_PROCESS_ADDRESSES, ",".join(addresses)),
        ]
        if defined[k] is None:
            values.append((c.ENV_TPU_PROCESS_PORT, ports[k]))
        _append_env(container, values)


def _add_subgroup_env(
    pod: Pod, container: Container, facts: _Facts, leader_host: str | None
) -> None:
    """One slice per subgroup; only the first TPU container joins it."""
    if _already_set(container):
        return
    if facts.is_leader and facts.leader_excluded:
        # Deviation from upstream, which denies this leader because it has no
        # subgroup-index: an excluded leader belongs to no slice, so it gets none
        # (docs/upstream-deviations.md#tpu-leader-under-leaderexcluded).
        return
    # An excluded leader's TPUs are not in any slice, so workers must not count it.
    leader_in_slice = facts.leader_requests_tpus and not facts.leader_excluded
    sgs = atoi(facts.annotations.get(c.ANNOTATION_SUBGROUP_SIZE, ""))
    subgroup = atoi(facts.labels.get(c.LABEL_SUBGROUP_INDEX, ""))
    worker_index = atoi(facts.labels.get(c.LABEL_WORKER_INDEX, ""))
    if sgs < 1:
        raise Denied(f"subgroup size must be a positive integer for pod {display_name(pod)}")
    rank = go_mod(worker_index, sgs)
    if worker_index != 0 and not leader_in_slice:
        rank = go_mod(worker_index - 1, sgs)
        subgroup = go_div(worker_index - 1, sgs)
    port = _env_value(container, c.ENV_TPU_PROCESS_PORT)
    start, end = sgs * subgroup + 1, sgs * (subgroup + 1)
    members: list[str] = []
    if facts.is_leader:
        leader = leader_host or display_name(pod)
        members.append(leader)
        end -= 1
    else:
        leader = leader_host or _parent(pod)[0]
        if leader_in_slice and subgroup == 0:
            members.append(leader)
            end -= 1
        elif leader_in_slice:
            start, end = start - 1, end - 1
    members += [f"{leader}-{m}" for m in range(start, end + 1)]
    shown_port = port if port is not None else str(c.TPU_DEFAULT_PROCESS_PORT)
    values = [
        (c.ENV_TPU_WORKER_HOSTNAMES, ",".join(f"{m}.{facts.subdomain}" for m in members)),
        (c.ENV_TPU_WORKER_ID, str(rank)),
        (c.ENV_TPU_NAME, leader),
        (
            c.ENV_TPU_PROCESS_ADDRESSES,
            ",".join(f"{m}.{facts.subdomain}:{shown_port}" for m in members),
        ),
    ]
    if port is None:
        values.append((c.ENV_TPU_PROCESS_PORT, shown_port))
    _append_env(container, values)
