"""Prometheus metrics under the names controller-runtime uses.

Dashboards and alerts written for Go controllers (the upstream LWS manager among
them) read these names, so a drop-in controller exposes the same families with
the same labels. Everything registers in one registry that /metrics serves.
"""

from __future__ import annotations

import gc
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

# Buckets of controller-runtime's reconcile and webhook histograms.
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
    20, 25, 30, 40, 50, 60,
)  # fmt: skip
_QUEUE_BUCKETS = tuple(10.0**exp for exp in range(-8, 2))

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=_RECONCILE_BUCKETS,
    registry=REGISTRY,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)

WORKQUEUE_DEPTH = Gauge(
    "workqueue_depth", "Current depth of workqueue", ["name", "controller"], registry=REGISTRY
)
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total",
    "Total number of adds handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_LATENCY = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name", "controller"],
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed "
    "by work_duration",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_LONGEST_RUNNING = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running",
    ["name", "controller"],
    registry=REGISTRY,
)

WEBHOOK_REQUESTS = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code",
    ["webhook", "code"],
    registry=REGISTRY,
)
WEBHOOK_LATENCY = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    registry=REGISTRY,
)
WEBHOOK_IN_FLIGHT = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served",
    ["webhook"],
    registry=REGISTRY,
)
# Ours: a review that opens its connection also pays for a TLS handshake, several
# times the review's own cost; reviews per connection shows how well the API server's
# pool of kept-alive connections holds up under the admission rate.
WEBHOOK_CONNECTIONS = Counter(
    "lws_webhook_connections_total",
    "Connections to the webhook server, counted when accepted (after the TLS handshake)",
    registry=REGISTRY,
)

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host",
    ["code", "method", "host"],
    registry=REGISTRY,
)

LEADER_ELECTION_MASTER = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease",
    ["name"],
    registry=REGISTRY,
)


# Ours: a long-running controller is judged by what it holds and does when nothing
# changes. Lease renewals are writes too (counted in rest_client_requests_total), so
# the writes the reconcilers make are those minus these; open watches and the loop's
# tasks should stay flat however long the process runs (docs/soak.md).
LEASE_WRITES = Counter(
    "lws_leader_election_lease_writes_total",
    "Lease creates and updates sent by leader election (also in rest_client_requests_total)",
    ["name"],
    registry=REGISTRY,
)
WATCHES_OPEN = Gauge(
    "lws_watches_open",
    "Watch streams open to the API server, by resource",
    ["resource"],
    registry=REGISTRY,
)
EVENT_LOOP_TASKS = Gauge(
    "lws_event_loop_tasks",
    "Tasks on the manager's event loop",
    registry=REGISTRY,
)


def observe_client_response(method: str, code: str, host: str) -> None:
    """The ApiClient response hook that feeds rest_client_requests_total."""
    REST_CLIENT_REQUESTS.labels(code=code, method=method, host=host).inc()


# A collection stops every thread, the webhook server's too; a pause here is a
# pause in every admission in flight, so the webhook's tail is read beside it.
GC_PAUSE = Histogram(
    "python_gc_pause_seconds",
    "Time the garbage collector stopped the process, by generation collected",
    ["generation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=REGISTRY,
)
_gc_started: list[float] = []


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started.append(time.perf_counter())
    elif _gc_started:
        GC_PAUSE.labels(str(info.get("generation", ""))).observe(
            time.perf_counter() - _gc_started.pop()
        )


def observe_gc_pauses() -> None:
    """Time every collection from now on (once per process)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


# Fed by runtime.stalls: how late a thread that only sleeps woke up, split by whether
# the process ran meanwhile, so a slow admission can be put down to the node or the
# CPU limit ("starved") or to the interpreter itself ("busy").
PROCESS_STALL = Histogram(
    "lws_process_stall_seconds",
    "Time the process could not run Python code, by cause: starved (it was not "
    "scheduled) or busy (it ran, but one thread held the interpreter)",
    ["cause"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
