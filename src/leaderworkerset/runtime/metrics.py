"""Prometheus metrics under the names controller-runtime uses.

Dashboards and alerts written for Go controllers (the upstream LWS manager among
them) read these names, so a drop-in controller exposes the same families with
the same labels.

The families are no module globals: a :class:`RuntimeMetrics` owns them on its own
registry, built once per process (`controller_command`, or the Manager when given
none) and handed to what updates them; the controllers' families (group and
DisaggregatedSet metrics) register on the same registry, the one /metrics serves.
Tests build their own and see nothing another test counted.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

# Buckets of controller-runtime's reconcile and webhook histograms.
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
    20, 25, 30, 40, 50, 60,
)  # fmt: skip
_QUEUE_BUCKETS = tuple(10.0**exp for exp in range(-8, 2))


class RuntimeMetrics:
    """The process's families under controller-runtime's names (and ours beside them),
    on one registry: what /metrics serves."""

    # One piece: every family declared in one list, so names, labels and help (which
    # dashboards written for controller-runtime depend on) read side by side.
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        if registry is None:
            registry = CollectorRegistry(auto_describe=True)
            # What every Prometheus client serves by default (process_*, python_info,
            # python_gc_*), as dashboards and the kube-prometheus alerts expect them.
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
        self.registry = registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        # A reconcile that raised something other than an API or transport error: a
        # bug, what a panic is in Go (also counted in reconcile_errors, as there).
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller",
            ["controller"],
            registry=registry,
        )
        # Served at 0 for dashboards that sum them: no reconciler here returns a
        # terminal error (one never retried) or has a reconcile timeout.
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_timeouts = Counter(
            "controller_runtime_reconcile_timeouts_total",
            "Total number of reconciliation timeouts per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=registry,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=registry,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=registry,
        )

        self.workqueue_depth = Gauge(
            "workqueue_depth",
            "Current depth of workqueue",
            ["name", "controller"],
            registry=registry,
        )
        self.workqueue_adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            ["name", "controller"],
            registry=registry,
        )
        self.workqueue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name", "controller"],
            buckets=_QUEUE_BUCKETS,
            registry=registry,
        )
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            ["name", "controller"],
            buckets=_QUEUE_BUCKETS,
            registry=registry,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            ["name", "controller"],
            registry=registry,
        )
        self.workqueue_unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by work_duration",
            ["name", "controller"],
            registry=registry,
        )
        self.workqueue_longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            ["name", "controller"],
            registry=registry,
        )

        self.webhook_requests = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code",
            ["webhook", "code"],
            registry=registry,
        )
        self.webhook_latency = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ["webhook"],
            registry=registry,
        )
        self.webhook_in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served",
            ["webhook"],
            registry=registry,
        )
        # Ours: a review that opens its connection also pays for a TLS handshake, several
        # times the review's own cost; reviews per connection shows how well the API server's
        # pool of kept-alive connections holds up under the admission rate.
        self.webhook_panics = Counter(
            "controller_runtime_webhook_panics_total",
            "Total number of webhook panics",
            registry=registry,
        )
        # Reads of serving certificate files that changed on disk (a mounted Secret
        # rotated), as controller-runtime's certwatcher counts them.
        self.certificate_reads = Counter(
            "certwatcher_read_certificate_total",
            "Total number of certificate reads",
            registry=registry,
        )
        self.certificate_read_errors = Counter(
            "certwatcher_read_certificate_errors_total",
            "Total number of certificate read errors",
            registry=registry,
        )
        self.webhook_connections = Counter(
            "lws_webhook_connections_total",
            "Connections to the webhook server, counted when accepted (after the TLS handshake)",
            registry=registry,
        )

        self.rest_client_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host",
            ["code", "method", "host"],
            registry=registry,
        )

        self.leader_election_master = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease",
            ["name"],
            registry=registry,
        )
        self.leader_election_slowpath = Counter(
            "leader_election_slowpath_total",
            "Total number of slow path exercised in renewing leader leases. 'name' is the "
            "string used to identify the lease",
            ["name"],
            registry=registry,
        )

        # Ours: a long-running controller is judged by what it holds and does when nothing
        # changes. Lease renewals are writes too (counted in rest_client_requests_total), so
        # the writes the reconcilers make are those minus these; open watches and the loop's
        # tasks should stay flat however long the process runs (docs/soak.md).
        self.lease_writes = Counter(
            "lws_leader_election_lease_writes_total",
            "Lease creates and updates sent by leader election "
            "(also in rest_client_requests_total)",
            ["name"],
            registry=registry,
        )
        # A list is the whole cache read again: the first one at start, then one per
        # expired watch (410), which is where memory and API-server load step up.
        self.cache_lists = Counter(
            "lws_cache_lists_total",
            "Full lists of a resource into the manager's caches, by resource",
            ["resource"],
            registry=registry,
        )
        self.watches_open = Gauge(
            "lws_watches_open",
            "Watch streams open to the API server, by resource",
            ["resource"],
            registry=registry,
        )
        self.event_loop_tasks = Gauge(
            "lws_event_loop_tasks",
            "Tasks on the manager's event loop",
            registry=registry,
        )

        # A collection stops every thread, the webhook server's too; a pause here is a
        # pause in every admission in flight, so the webhook's tail is read beside it.
        self.gc_pause = Histogram(
            "python_gc_pause_seconds",
            "Time the garbage collector stopped the process, by generation collected",
            ["generation"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=registry,
        )
        # Fed by runtime.stalls: how late a thread that only sleeps woke up, split by whether
        # the process ran meanwhile, so a slow admission can be put down to the node or the
        # CPU limit ("starved") or to the interpreter itself ("busy").
        self.process_stall = Histogram(
            "lws_process_stall_seconds",
            "Time the process could not run Python code, by cause: starved (it was not "
            "scheduled) or busy (it ran, but one thread held the interpreter)",
            ["cause"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=registry,
        )
        self._gc_started: list[float] = []

    def observe_client_response(self, method: str, code: str, host: str) -> None:
        """The ApiClient response hook that feeds rest_client_requests_total."""
        self.rest_client_requests.labels(code=code, method=method, host=host).inc()

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started.append(time.perf_counter())
        elif self._gc_started:
            self.gc_pause.labels(str(info.get("generation", ""))).observe(
                time.perf_counter() - self._gc_started.pop()
            )

    def observe_gc_pauses(self) -> None:
        """Time every collection from now on (once however often it is called)."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def stop_observing_gc_pauses(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
