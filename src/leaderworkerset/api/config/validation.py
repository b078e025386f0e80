"""Validation of a defaulted Configuration; every error names its field path."""

from __future__ import annotations

from leaderworkerset.api.config.tls import CIPHER_SUITES, TLS_VERSIONS
from leaderworkerset.api.config.types import (
    TEARDOWN_MODES,
    TLS,
    Configuration,
    GangSchedulingManagement,
    GroupBackoff,
    GroupReplacement,
    InternalCertManagement,
    LeaderWorkerSetLimits,
    Teardown,
)
from leaderworkerset.api.errors import FieldError, invalid, not_supported, required
from leaderworkerset.api.go.durations import Duration, format_duration
from leaderworkerset.api.leaderworkerset.scheduling import (
    KNOWN_FEATURE_GATES,
    PROVIDER_KUBERNETES,
    PROVIDER_VOLCANO,
)
from leaderworkerset.api.metavalidation import dns1035_label_errors, dns1123_subdomain_errors

SUPPORTED_RESOURCE_LOCKS = ("leases",)
SUPPORTED_GANG_SCHEDULERS = (PROVIDER_KUBERNETES, PROVIDER_VOLCANO)
SECURE_TLS_VERSIONS = ("VersionTLS12", "VersionTLS13")


def validate(cfg: Configuration) -> list[FieldError]:
    errs: list[FieldError] = []
    if cfg.tls is not None:
        errs += _validate_tls(cfg.tls)
    icm = cfg.internal_cert_management
    if icm is not None and icm.enable:
        errs += _validate_cert_management(icm)
    if cfg.gang_scheduling_management is not None:
        errs += _validate_gang_scheduling(cfg.gang_scheduling_management)
    if any(name not in KNOWN_FEATURE_GATES for name in cfg.feature_gates):
        # As upstream: the whole map is the bad value.
        errs.append(not_supported("featureGates", cfg.feature_gates, KNOWN_FEATURE_GATES))
    le = cfg.leader_election
    if le.leader_elect and le.resource_lock not in SUPPORTED_RESOURCE_LOCKS:
        errs.append(
            not_supported("leaderElection.resourceLock", le.resource_lock, SUPPORTED_RESOURCE_LOCKS)
        )
    if cfg.group_replacement is not None:
        errs += _validate_group_replacement(cfg.group_replacement)
    if cfg.group_backoff is not None:
        errs += _validate_group_backoff(cfg.group_backoff)
    if cfg.leader_worker_set_limits is not None:
        errs += _validate_limits(cfg.leader_worker_set_limits)
    if cfg.teardown is not None:
        errs += _validate_teardown(cfg.teardown)
    port = cfg.webhook.port
    if port is not None and not 0 < port < 65536:
        errs.append(invalid("webhook.port", port, "must be between 1 and 65535, inclusive"))
    return errs


def tls_version_error(version: str) -> str:
    """Why a minimum TLS version may not be served, or "" when it may."""
    if version in SECURE_TLS_VERSIONS:
        return ""
    if version in TLS_VERSIONS:
        return "insecure TLS version, use VersionTLS12 or VersionTLS13"
    return "unknown TLS version, use VersionTLS12 or VersionTLS13"


def _validate_tls(tls: TLS) -> list[FieldError]:
    errs: list[FieldError] = []
    version = tls.min_version
    if version and (detail := tls_version_error(version)):
        errs.append(invalid("tls.minVersion", version, detail))
    if tls.cipher_suites and version == "VersionTLS13":
        errs.append(
            invalid(
                "tls.cipherSuites",
                tls.cipher_suites,
                "may not be specified when minVersion is VersionTLS13",
            )
        )
    for i, suite in enumerate(tls.cipher_suites):
        if suite not in CIPHER_SUITES:
            errs.append(invalid(f"tls.cipherSuites[{i}]", suite, "not supported or doesn't exist"))
    return errs


def _validate_cert_management(icm: InternalCertManagement) -> list[FieldError]:
    errs: list[FieldError] = []
    if icm.webhook_service_name is not None:
        for msg in dns1035_label_errors(icm.webhook_service_name):
            errs.append(
                invalid("internalCertManagement.webhookServiceName", icm.webhook_service_name, msg)
            )
    name = icm.webhook_secret_name
    if name is not None:
        for msg in dns1123_subdomain_errors(name):
            errs.append(invalid("internalCertManagement.webhookSecretName", name, msg))
    return errs


def _validate_gang_scheduling(gang: GangSchedulingManagement) -> list[FieldError]:
    provider = gang.scheduler_provider
    if not provider:
        return [required("gangSchedulingManagement.schedulerProvider")]
    if provider not in SUPPORTED_GANG_SCHEDULERS:
        return [
            not_supported(
                "gangSchedulingManagement.schedulerProvider", provider, SUPPORTED_GANG_SCHEDULERS
            )
        ]
    return []


def _validate_limits(limits: LeaderWorkerSetLimits) -> list[FieldError]:
    return [
        invalid(f"leaderWorkerSetLimits.{name}", value, "must be greater than or equal to 0")
        for name, value in (("maxSize", limits.max_size), ("maxPods", limits.max_pods))
        if value is not None and value < 0
    ]


def _negative_durations(
    section: str, durations: tuple[tuple[str, Duration | None], ...], detail: str
) -> list[FieldError]:
    return [
        invalid(f"{section}.{name}", format_duration(value), detail)
        for name, value in durations
        if value is not None and value < 0
    ]


def _validate_group_backoff(gb: GroupBackoff) -> list[FieldError]:
    first, cap, reset = gb.initial_delay, gb.max_delay, gb.reset_after
    errs = _negative_durations(
        "groupBackoff",
        (("initialDelay", first), ("maxDelay", cap), ("resetAfter", reset)),
        "must be greater than or equal to 0s",
    )
    if first and cap is not None and reset is not None and 0 <= reset <= cap:
        errs.append(
            invalid(
                "groupBackoff.resetAfter",
                format_duration(reset),
                f"must be greater than maxDelay ({format_duration(cap)}): a group would "
                "be forgiven while it waits",
            )
        )
    if first is not None and cap is not None and 0 <= cap < first:
        errs.append(
            invalid(
                "groupBackoff.maxDelay",
                format_duration(cap),
                f"must be greater than or equal to initialDelay ({format_duration(first)})",
            )
        )
    return errs


def _validate_group_replacement(gr: GroupReplacement) -> list[FieldError]:
    return _negative_durations(
        "groupReplacement",
        (
            ("nodeNotReadyRelease", gr.node_not_ready_release),
            ("terminationOverrunRelease", gr.termination_overrun_release),
        ),
        "must be greater than or equal to 0s (0s: no bound)",
    )


def _validate_teardown(td: Teardown) -> list[FieldError]:
    return [
        not_supported(f"teardown.{name}", value, TEARDOWN_MODES)
        for name, value in (
            ("groupRestart", td.group_restart),
            ("leaderWorkerSetDeletion", td.leader_worker_set_deletion),
        )
        if value is not None and value not in TEARDOWN_MODES
    ]
