"""DisaggregatedSet metrics, per role, in the `lws_` naming style.

Labelled by namespace, set name and role only: revisions and slices come and go with
every rollout and would make the number of series grow without bound (the per-slice,
per-revision detail is in the LeaderWorkerSets' own status).
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge

LABELS = ("namespace", "name", "role")


class DisaggregatedSetMetrics:
    """The families on one registry: the process's (wiring builds them on the
    Manager's) or, without, one of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        registry = self.registry
        self.replicas = Gauge(
            "lws_disaggregatedset_role_replicas",
            "Groups a DisaggregatedSet role asks for, over all its slices and revisions",
            LABELS,
            registry=registry,
        )
        self.ready = Gauge(
            "lws_disaggregatedset_role_ready_replicas",
            "Ready groups of a DisaggregatedSet role, over all its slices and revisions",
            LABELS,
            registry=registry,
        )
        self.updated = Gauge(
            "lws_disaggregatedset_role_updated_replicas",
            "Groups of a DisaggregatedSet role at the set's current revision",
            LABELS,
            registry=registry,
        )
        self.rollout_steps = Counter(
            "lws_disaggregatedset_rollout_steps_total",
            "Rolling-update steps a DisaggregatedSet took (one scale of its revisions)",
            ("namespace", "name"),
            registry=registry,
        )
        self._roles: dict[tuple[str, str], set[str]] = {}

    def observe(self, namespace: str, name: str, counts: dict[str, tuple[int, int, int]]) -> None:
        """`counts`: role -> (replicas, ready, updated). Roles no longer there are removed."""
        gone = self._roles.get((namespace, name), set()) - set(counts)
        for role in gone:
            for gauge in (self.replicas, self.ready, self.updated):
                gauge.remove(namespace, name, role)
        for role, (replicas, ready, updated) in counts.items():
            self.replicas.labels(namespace, name, role).set(replicas)
            self.ready.labels(namespace, name, role).set(ready)
            self.updated.labels(namespace, name, role).set(updated)
        self._roles[(namespace, name)] = set(counts)

    def forget(self, namespace: str, name: str) -> None:
        self.observe(namespace, name, {})
        self._roles.pop((namespace, name), None)
        with contextlib.suppress(KeyError):
            self.rollout_steps.remove(namespace, name)
