"""What the soak runs: 200 groups of 4 over five LeaderWorkerSets that between them take
every path the controller has (both group identities, both replacement policies,
subgroups, exclusive placement), on simulated nodes."""

from __future__ import annotations

from dataclasses import dataclass

from lws_localcluster.nodesim.nodes import NodeSpec
from tests.chaos.harness import chaos_lws

from leaderworkerset.api.leaderworkerset import constants as c

NAMESPACE = "soak"
# Exclusive placement keeps a group's pods off nodes holding another group's pods of
# the same namespace, whichever LWS they belong to: that LWS gets a namespace of its own.
EXCLUSIVE_NAMESPACE = "soak-exclusive"
SIZE = 4
NODES = 24


@dataclass(frozen=True)
class Member:
    name: str
    namespace: str
    replicas: int
    hash_mode: bool
    policy: str | None = None  # groupReplacementPolicy, Hash only
    subgroup_size: int | None = None
    exclusive: bool = False

    @property
    def label(self) -> str:
        mode = "Hash" if self.hash_mode else "Ordinal"
        extra = [self.policy or ""]
        if self.subgroup_size:
            extra.append(f"subgroups of {self.subgroup_size}")
        if self.exclusive:
            extra.append("exclusive per node")
        return ", ".join(x for x in [mode, *extra] if x)

    def manifest(self) -> dict[str, object]:
        spec: dict[str, object] = {}
        if self.policy:
            spec["groupReplacementPolicy"] = self.policy
        body = chaos_lws(
            self.name,
            self.namespace,
            replicas=self.replicas,
            size=SIZE,
            hash_mode=self.hash_mode,
            termination_delay=2.0,
            **spec,
        )
        if self.subgroup_size:
            body["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {
                "subGroupSize": self.subgroup_size
            }
        if self.exclusive:
            body["metadata"]["annotations"] = {
                c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "kubernetes.io/hostname"
            }
        return body


FLEET = (
    Member("ordinal", NAMESPACE, 50, hash_mode=False),
    Member("hash-post", NAMESPACE, 50, hash_mode=True, policy=c.GROUP_REPLACEMENT_POST_TERMINATION),
    Member("hash-immediate", NAMESPACE, 40, hash_mode=True, policy=c.GROUP_REPLACEMENT_IMMEDIATE),
    Member("subgroups", NAMESPACE, 44, hash_mode=False, subgroup_size=2),
    Member(
        "exclusive",
        EXCLUSIVE_NAMESPACE,
        16,
        hash_mode=True,
        policy=c.GROUP_REPLACEMENT_POST_TERMINATION,
        exclusive=True,
    ),
)


def bounds(member: Member) -> tuple[int, int]:
    """Scaling keeps a member between half and one and a half times its start; an
    exclusive one also leaves nodes free for a node that is down."""
    top = member.replicas * 3 // 2
    if member.exclusive:
        top = min(top, NODES - 4)
    return max(1, member.replicas // 2), top


def by_name(name: str) -> Member:
    return next(m for m in FLEET if m.name == name)


def nodes() -> list[NodeSpec]:
    return [NodeSpec(f"soak-node-{i:02d}", cpu="16", pods=110) for i in range(NODES)]
