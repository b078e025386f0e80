"""What a node's death does in a local cluster: kube-controller-manager's node
lifecycle, its time constants, and the simulator's heartbeat that must outrun them.

With ``ControlPlane(node_lifecycle=...)`` the controller manager runs its
``node-lifecycle-controller`` (its taint-eviction manager, ``taint-eviction-controller``,
runs in every local cluster), so a node whose simulated kubelet goes silent is seen as a
real cluster sees it: ``Ready`` turns ``Unknown`` once no Lease renewal has been
observed for ``grace_period``, the node is tainted ``node.kubernetes.io/unreachable``
(``NoSchedule`` and ``NoExecute``), and its pods are deleted once their toleration of
that taint runs out. Every pod gets that toleration from the API server's
DefaultTolerationSeconds admission plugin; ``toleration_seconds`` sets its length
(300 s upstream).

The playground shortens each constant so that a node's death plays out in about a
minute, and keeps each one a multiple of the next: the simulator renews a Lease every
``lease_interval`` (2 s), ten times per grace period (20 s), so a node whose simulator
runs is taken for dead only if ten renewals in a row are lost. The simulator is a
process of its own, whose loop nothing else blocks, so on a loaded two-core machine a
renewal is late by well under a second (upstream's kubelet renews every 10 s against
a 50 s grace period: five renewals).

The test suite's control planes run without it. Their simulator shares pytest's event
loop, which does not run during a synchronous test (the install test takes minutes), so
every node's Lease would lapse and each node would turn Unknown and tainted under the
tests that come after.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeLifecycle:
    """The node lifecycle controller's timings, and the heartbeat they assume."""

    # No Lease renewal observed for this long: Ready becomes Unknown, the taints follow.
    grace_period: int = 20
    # How often the controller checks the nodes (upstream: 5 s).
    monitor_period: int = 2
    # A registered node that never posted a status is given this long (upstream: 60 s).
    startup_grace_period: int = 30
    # The toleration every pod gets of the not-ready and unreachable NoExecute taints.
    toleration_seconds: int = 30
    # The simulator's Lease renewal period for these timings.
    lease_interval: float = 2.0

    def __post_init__(self) -> None:
        if self.lease_interval * 5 > self.grace_period:
            raise ValueError(
                f"a lease renewed every {self.lease_interval}s needs a grace period of at "
                f"least {self.lease_interval * 5:g}s, not {self.grace_period}s"
            )

    def controller_manager_args(self) -> list[str]:
        return [
            f"--node-monitor-grace-period={self.grace_period}s",
            f"--node-monitor-period={self.monitor_period}s",
            f"--node-startup-grace-period={self.startup_grace_period}s",
        ]

    def apiserver_args(self) -> list[str]:
        return [
            f"--default-not-ready-toleration-seconds={self.toleration_seconds}",
            f"--default-unreachable-toleration-seconds={self.toleration_seconds}",
        ]

    @property
    def kubelet_lease_seconds(self) -> int:
        """A real kubelet's nodeLeaseDurationSeconds for this heartbeat: it renews its
        Lease every quarter of that."""
        return round(self.lease_interval * 4)

    def describe(self) -> str:
        return (
            f"a node is Unknown {self.grace_period}s after its last Lease renewal, "
            f"its pods are evicted {self.toleration_seconds}s after the taint"
        )


# The playground's: a node's death plays out in about a minute (see the module doc).
PLAYGROUND = NodeLifecycle()

# Kubernetes' own defaults, for a cluster whose only nodes are real: the kubelet renews
# every 10 s, and the node lifecycle controller must run for its not-ready taint, set
# at registration, to be lifted once the node is Ready.
UPSTREAM = NodeLifecycle(
    grace_period=50,
    monitor_period=5,
    startup_grace_period=60,
    toleration_seconds=300,
    lease_interval=10.0,
)

# The playground controller's bounds on a Hash-mode replacement's wait
# (groupReplacement: 2m and 5m by default), on the playground's time scale: a tenth,
# as its toleration is of upstream's 300 s. Upstream evicts a lost node's pods 5 min
# after the node is lost, long after the node bound has run out, so a replacement
# schedules as soon as its group is evicted; these keep that order. The overrun bound
# matters when a group's leader, on a healthy node, finished but stays (foreground
# deletion) until its worker on the lost node is gone.
PLAYGROUND_GROUP_REPLACEMENT = {"nodeNotReadyRelease": "15s", "terminationOverrunRelease": "30s"}
