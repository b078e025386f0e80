"""Defaults the manager applies to a decoded Configuration."""

from __future__ import annotations

from leaderworkerset.api.config.types import (
    TEARDOWN_GARBAGE_COLLECTOR,
    TEARDOWN_PARALLEL,
    ClientConnection,
    Configuration,
    GroupBackoff,
    GroupReplacement,
    InternalCertManagement,
    Teardown,
)
from leaderworkerset.api.go.durations import Duration
from leaderworkerset.api.leaderworkerset import constants as c

DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
DEFAULT_METRICS_BIND_ADDRESS = ":8443"
DEFAULT_HEALTH_PROBE_BIND_ADDRESS = ":8081"
DEFAULT_READINESS_ENDPOINT = "/readyz"
DEFAULT_LIVENESS_ENDPOINT = "/healthz"
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
DEFAULT_QPS = 500.0
DEFAULT_BURST = 500
# The same values as group.options' (api may not import group).
DEFAULT_NODE_NOT_READY_RELEASE = 120.0
DEFAULT_TERMINATION_OVERRUN_RELEASE = 300.0
# The same values as group.recreations' (a kubelet's CrashLoopBackOff).
DEFAULT_INITIAL_BACKOFF = 10.0
DEFAULT_MAX_BACKOFF = 300.0
DEFAULT_BACKOFF_RESET = 600.0


def set_defaults(cfg: Configuration) -> Configuration:
    """Fill unset members in place (and return `cfg`), as SetDefaults_Configuration does."""
    if cfg.webhook.port is None:
        cfg.webhook.port = DEFAULT_WEBHOOK_PORT
    cfg.webhook.cert_dir = cfg.webhook.cert_dir or DEFAULT_CERT_DIR
    le = cfg.leader_election
    if le.leader_elect is None:
        le.leader_elect = True
    if le.lease_duration is None:
        le.lease_duration = Duration(DEFAULT_LEASE_DURATION)
    if le.renew_deadline is None:
        le.renew_deadline = Duration(DEFAULT_RENEW_DEADLINE)
    if le.retry_period is None:
        le.retry_period = Duration(DEFAULT_RETRY_PERIOD)
    le.resource_lock = le.resource_lock or "leases"
    le.resource_name = le.resource_name or c.LEADER_ELECTION_LEASE_NAME
    cfg.metrics.bind_address = cfg.metrics.bind_address or DEFAULT_METRICS_BIND_ADDRESS
    health = cfg.health
    health.health_probe_bind_address = (
        health.health_probe_bind_address or DEFAULT_HEALTH_PROBE_BIND_ADDRESS
    )
    health.readiness_endpoint_name = health.readiness_endpoint_name or DEFAULT_READINESS_ENDPOINT
    health.liveness_endpoint_name = health.liveness_endpoint_name or DEFAULT_LIVENESS_ENDPOINT
    icm = cfg.internal_cert_management = cfg.internal_cert_management or InternalCertManagement()
    if icm.enable is None:
        icm.enable = True
    if icm.enable:
        if icm.webhook_service_name is None:
            icm.webhook_service_name = c.WEBHOOK_SERVICE_NAME
        if icm.webhook_secret_name is None:
            icm.webhook_secret_name = c.WEBHOOK_SECRET_NAME
    cc = cfg.client_connection = cfg.client_connection or ClientConnection()
    cc.qps = DEFAULT_QPS if cc.qps is None else cc.qps
    cc.burst = DEFAULT_BURST if cc.burst is None else cc.burst
    gr = cfg.group_replacement = cfg.group_replacement or GroupReplacement()
    if gr.node_not_ready_release is None:
        gr.node_not_ready_release = Duration(DEFAULT_NODE_NOT_READY_RELEASE)
    if gr.termination_overrun_release is None:
        gr.termination_overrun_release = Duration(DEFAULT_TERMINATION_OVERRUN_RELEASE)
    gb = cfg.group_backoff = cfg.group_backoff or GroupBackoff()
    if gb.initial_delay is None:
        gb.initial_delay = Duration(DEFAULT_INITIAL_BACKOFF)
    if gb.max_delay is None:
        gb.max_delay = Duration(max(DEFAULT_MAX_BACKOFF, float(gb.initial_delay)))
    if gb.reset_after is None:
        # Longer than the longest wait, or a group would be forgiven while it waits.
        gb.reset_after = Duration(max(DEFAULT_BACKOFF_RESET, 2 * float(gb.max_delay)))
    td = cfg.teardown = cfg.teardown or Teardown()
    td.group_restart = td.group_restart or TEARDOWN_PARALLEL
    td.leader_worker_set_deletion = td.leader_worker_set_deletion or TEARDOWN_GARBAGE_COLLECTOR
    return cfg
