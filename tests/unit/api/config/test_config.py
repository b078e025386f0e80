"""The manager configuration: strict decoding, defaults, validation, flags."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from leaderworkerset.api.config.codec import ConfigError, configuration_yaml, decode_configuration
from leaderworkerset.api.config.defaults import set_defaults
from leaderworkerset.api.config.types import feature_enabled
from leaderworkerset.api.config.validation import validate
from leaderworkerset.api.go.durations import format_duration, parse_duration
from leaderworkerset.controller_command import (
    Settings,
    controller_command,
    load_configuration,
    operator_namespace,
    user_agent,
    webhooks_enabled,
)
from leaderworkerset.runtime import logging as runtime_logging
from tests.toolkit.commands import run_command

HEADER = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + body)
    return path


def errors_of(body: str) -> list[str]:
    return [str(e) for e in validate(set_defaults(decode_configuration(HEADER + body)))]


# --- decoding ---------------------------------------------------------------------


def test_defaults_without_a_file() -> None:
    cfg = load_configuration(None)
    assert cfg.webhook.port == 9443
    assert cfg.webhook.host == ""
    assert cfg.webhook.cert_dir == "/tmp/k8s-webhook-server/serving-certs"
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (
        True,
        15.0,
        10.0,
        2.0,
    )
    assert (le.resource_lock, le.resource_name) == ("leases", "b8b2488c.x-k8s.io")
    assert cfg.metrics.bind_address == ":8443"
    assert cfg.health.health_probe_bind_address == ":8081"
    assert cfg.health.readiness_endpoint_name == "/readyz"
    assert cfg.health.liveness_endpoint_name == "/healthz"
    assert cfg.tls is None
    icm = cfg.internal_cert_management
    assert icm is not None
    assert (icm.enable, icm.webhook_service_name, icm.webhook_secret_name) == (
        True,
        "lws-webhook-service",
        "lws-webhook-server-cert",
    )
    assert cfg.gang_scheduling_management is None
    assert cfg.client_connection is not None
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (500.0, 500)


def test_the_shipped_configmap(tmp_path: Path) -> None:
    path = write(
        tmp_path, "leaderElection:\n  leaderElect: true\ninternalCertManagement:\n  enable: true\n"
    )
    cfg = load_configuration(path)
    assert cfg.leader_election.leader_elect is True
    assert cfg.internal_cert_management is not None
    assert cfg.internal_cert_management.webhook_secret_name == "lws-webhook-server-cert"


def test_every_field_decodes(tmp_path: Path) -> None:
    body = """
webhook: {port: 9444, host: 0.0.0.0, certDir: /certs}
leaderElection:
  leaderElect: false
  leaseDuration: 1m30s
  renewDeadline: 500ms
  retryPeriod: 100ms
  resourceLock: leases
  resourceName: my-lease
  resourceNamespace: ignored
metrics: {bindAddress: ":9090"}
health:
  healthProbeBindAddress: ":9091"
  readinessEndpointName: /ready
  livenessEndpointName: /live
tls: {minVersion: VersionTLS12, cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]}
internalCertManagement: {enable: true, webhookServiceName: svc, webhookSecretName: sec.ret}
gangSchedulingManagement: {schedulerProvider: volcano}
clientConnection: {qps: 50.5, burst: 100}
"""
    cfg = load_configuration(write(tmp_path, body))
    assert (cfg.webhook.port, cfg.webhook.host, cfg.webhook.cert_dir) == (9444, "0.0.0.0", "/certs")
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (
        False,
        90.0,
        0.5,
        0.1,
    )
    assert (le.resource_name, le.resource_namespace) == ("my-lease", "ignored")
    assert cfg.health.readiness_endpoint_name == "/ready"
    assert cfg.tls is not None and cfg.tls.cipher_suites == [
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    ]
    assert cfg.gang_scheduling_management is not None
    assert cfg.gang_scheduling_management.scheduler_provider == "volcano"
    assert cfg.client_connection is not None and cfg.client_connection.qps == 50.5
    # The effective configuration logs in the file's own spelling.
    rendered = configuration_yaml(cfg)
    assert "leaseDuration: 1m30s" in rendered and "renewDeadline: 500ms" in rendered


def test_unknown_field_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r'^strict decoding error: unknown field "invalidField"$'):
        decode_configuration(HEADER + "invalidField: invalidValue\n")


def test_unknown_nested_fields_are_named_with_their_path() -> None:
    with pytest.raises(ConfigError) as info:
        decode_configuration(HEADER + "webhook:\n  prot: 1\nleaderElection:\n  leaderelect: true\n")
    assert str(info.value) == (
        'strict decoding error: unknown field "webhook.prot", '
        'unknown field "leaderElection.leaderelect"'
    )


def test_duplicate_field_is_an_error() -> None:
    with pytest.raises(ConfigError, match='duplicate field "metrics"'):
        decode_configuration(HEADER + "metrics: {}\nmetrics: {}\n")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "webhook: {port: '9443'}",
            'cannot unmarshal string into field "webhook.port" of type int',
        ),
        ("webhook: {port: 1.5}", 'field "webhook.port" of type int'),
        ("leaderElection: {leaderElect: 'yes'}", 'field "leaderElection.leaderElect" of type bool'),
        (
            "leaderElection: {leaseDuration: 15}",
            'field "leaderElection.leaseDuration" of type duration',
        ),
        ("leaderElection: {leaseDuration: 15x}", 'time: invalid duration "15x"'),
        (
            "tls: {cipherSuites: TLS_AES_128_GCM_SHA256}",
            'field "tls.cipherSuites" of type []string',
        ),
        ("webhook: 3", 'cannot decode number into "webhook"'),
    ],
)
def test_type_errors(body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decode_configuration(HEADER + body + "\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("webhook: {}\n", "Object 'Kind' is missing"),
        (
            "apiVersion: v1\nkind: Configuration\n",
            'no kind "Configuration" is registered for version "v1"',
        ),
        ("- a\n", "must be a mapping"),
        ("a: [\n", "cannot parse"),
    ],
)
def test_documents_that_are_not_a_configuration(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        decode_configuration(text)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_configuration(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("0", 0.0),
        ("1.5s", 1.5),
        ("-2s", -2.0),
        ("10us", 1e-5),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1x", "1s2", "--1s"])
def test_invalid_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_durations_format_like_go() -> None:
    assert [format_duration(s) for s in (15, 90, 0.5, 3600, 3725, 0)] == [
        "15s",
        "1m30s",
        "500ms",
        "1h0m0s",
        "1h2m5s",
        "0s",
    ]


# --- validation ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ["VersionTLS10", "VersionTLS11", "TLS1.2"])
def test_insecure_or_unknown_tls_versions_are_rejected(version: str) -> None:
    (err,) = errors_of(f"tls: {{minVersion: {version}}}")
    assert err.startswith(f'tls.minVersion: Invalid value: "{version}"')


@pytest.mark.parametrize("version", ["VersionTLS12", "VersionTLS13"])
def test_secure_tls_versions_are_accepted(version: str) -> None:
    assert errors_of(f"tls: {{minVersion: {version}}}") == []


def test_cipher_suites_are_rejected_with_tls13() -> None:
    (err,) = errors_of(
        "tls: {minVersion: VersionTLS13, cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]}"
    )
    assert err.startswith("tls.cipherSuites: Invalid value")
    assert "may not be specified when minVersion is VersionTLS13" in err


def test_unknown_cipher_suite_is_rejected() -> None:
    (err,) = errors_of("tls: {cipherSuites: [TLS_NOPE]}")
    assert err == 'tls.cipherSuites[0]: Invalid value: "TLS_NOPE": not supported or doesn\'t exist'


def test_webhook_service_name_must_be_a_dns1035_label() -> None:
    (err,) = errors_of("internalCertManagement: {webhookServiceName: 1-service}")
    assert err.startswith('internalCertManagement.webhookServiceName: Invalid value: "1-service"')
    assert "DNS-1035" in err
    assert errors_of("internalCertManagement: {webhookServiceName: my-svc}") == []


def test_webhook_secret_name_must_be_a_dns1123_subdomain() -> None:
    (err,) = errors_of("internalCertManagement: {webhookSecretName: Bad_Secret}")
    assert err.startswith('internalCertManagement.webhookSecretName: Invalid value: "Bad_Secret"')
    assert "RFC 1123 subdomain" in err
    assert errors_of("internalCertManagement: {webhookSecretName: a.b-c}") == []


def test_disabled_cert_management_neither_defaults_nor_checks_names() -> None:
    cfg = set_defaults(decode_configuration(HEADER + "internalCertManagement: {enable: false}\n"))
    assert cfg.internal_cert_management is not None
    assert cfg.internal_cert_management.webhook_service_name is None
    assert cfg.internal_cert_management.webhook_secret_name is None
    assert errors_of("internalCertManagement: {enable: false, webhookServiceName: 1-bad}") == []


def test_gang_scheduling_provider_is_required_and_volcano_or_kubernetes() -> None:
    assert errors_of("gangSchedulingManagement: {schedulerProvider: volcano}") == []
    assert errors_of("gangSchedulingManagement: {schedulerProvider: kubernetes}") == []
    (missing,) = errors_of("gangSchedulingManagement: {}")
    assert missing == "gangSchedulingManagement.schedulerProvider: Required value"
    (other,) = errors_of("gangSchedulingManagement: {schedulerProvider: kueue}")
    assert other == (
        'gangSchedulingManagement.schedulerProvider: Unsupported value: "kueue": '
        'supported values: "kubernetes", "volcano"'
    )


# --- featureGates (upstream #982) ----------------------------------------------------------


def test_feature_gates_decode_and_default_off() -> None:
    cfg = decode_configuration(HEADER + "featureGates: {WorkloadAwareScheduling: true}\n")
    assert cfg.feature_gates == {"WorkloadAwareScheduling": True}
    assert feature_enabled(cfg, "WorkloadAwareScheduling")
    off = decode_configuration(HEADER + "featureGates: {WorkloadAwareScheduling: false}\n")
    assert not feature_enabled(off, "WorkloadAwareScheduling")
    absent = set_defaults(decode_configuration(HEADER))
    assert absent.feature_gates == {} and not feature_enabled(absent, "WorkloadAwareScheduling")
    assert errors_of("featureGates: {WorkloadAwareScheduling: true}") == []
    # YAML null is Go's zero value for a map.
    assert decode_configuration(HEADER + "featureGates:\n").feature_gates == {}


def test_an_unknown_feature_gate_is_refused_naming_the_known_ones() -> None:
    (err,) = errors_of("featureGates: {WorkloadAwareScheduling: true, Gang: true}")
    assert err == (
        'featureGates: Unsupported value: {"Gang": true, "WorkloadAwareScheduling": true}: '
        'supported values: "WorkloadAwareScheduling"'
    )
    # Off is no excuse: the name itself is unknown.
    (err,) = errors_of("featureGates: {workloadawarescheduling: false}")
    assert err.startswith("featureGates: Unsupported value:")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "featureGates: [WorkloadAwareScheduling]",
            'cannot unmarshal array into field "featureGates" of type map[string]bool',
        ),
        (
            "featureGates: {WorkloadAwareScheduling: yes please}",
            'cannot unmarshal string into field "featureGates.WorkloadAwareScheduling" '
            "of type bool",
        ),
        (
            "featureGates: {WorkloadAwareScheduling: 1}",
            'cannot unmarshal number into field "featureGates.WorkloadAwareScheduling" '
            "of type bool",
        ),
    ],
)
def test_feature_gates_of_the_wrong_type_are_decoding_errors(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_configuration(HEADER + body + "\n")
    assert str(info.value) == message


def test_feature_gates_round_trip() -> None:
    cfg = decode_configuration(
        HEADER
        + "gangSchedulingManagement: {schedulerProvider: kubernetes}\n"
        + "featureGates: {WorkloadAwareScheduling: true}\n"
    )
    rendered = configuration_yaml(cfg)
    assert "featureGates:\n  WorkloadAwareScheduling: true\n" in rendered
    again = decode_configuration(rendered)
    assert again == cfg
    assert again.gang_scheduling_management is not None
    assert again.gang_scheduling_management.scheduler_provider == "kubernetes"
    # An empty map is left out, as Go's omitempty does.
    assert "featureGates" not in configuration_yaml(decode_configuration(HEADER))


def test_only_lease_locks_are_supported() -> None:
    (err,) = errors_of("leaderElection: {resourceLock: configmaps}")
    assert err.startswith('leaderElection.resourceLock: Unsupported value: "configmaps"')


def test_load_configuration_reports_all_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "tls: {minVersion: VersionTLS10}\ngangSchedulingManagement: {}\n")
    with pytest.raises(ConfigError) as info:
        load_configuration(path)
    assert "tls.minVersion" in str(info.value)
    assert "gangSchedulingManagement.schedulerProvider" in str(info.value)


# --- environment ------------------------------------------------------------------------


def test_operator_namespace(tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    assert operator_namespace(sa_file=sa) == "lws-system"
    sa.write_text("  custom-ns\n")
    assert operator_namespace(sa_file=sa) == "custom-ns"
    assert operator_namespace("override", sa_file=sa) == "override"


def test_enable_webhooks_env() -> None:
    assert webhooks_enabled({})
    assert webhooks_enabled({"ENABLE_WEBHOOKS": "true"})
    assert not webhooks_enabled({"ENABLE_WEBHOOKS": "false"})


def test_user_agent_shape() -> None:
    agent = user_agent("v0.7.0", "0123456789abcdef")
    assert agent.startswith("lws/v0.7.0 (")
    assert agent.endswith(") 0123456")
    assert user_agent("v0.7.0").endswith(" unknown")


# --- flags --------------------------------------------------------------------------


FILE = """
leaderElection: {leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 5s, resourceName: from-file}
metrics: {bindAddress: ":9000"}
health: {healthProbeBindAddress: ":9001"}
clientConnection: {qps: 10, burst: 20}
"""


def test_file_values_hold_when_flags_are_not_given(tmp_path: Path) -> None:
    settings, _ = run_command(["--config", str(write(tmp_path, FILE))])
    cfg = settings.configuration
    assert cfg.leader_election.lease_duration == 30.0
    assert cfg.leader_election.resource_name == "from-file"
    assert cfg.metrics.bind_address == ":9000"
    assert cfg.health.health_probe_bind_address == ":9001"
    assert cfg.client_connection is not None
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (10.0, 20)
    assert cfg.leader_election.leader_elect is True


def test_explicit_flags_override_the_file(tmp_path: Path) -> None:
    settings, _ = run_command(
        [
            f"--config={write(tmp_path, FILE)}",
            "--metrics-bind-address=0",
            "--health-probe-bind-address",
            ":7000",
            "--kube-api-qps=7.5",
            "--kube-api-burst=9",
            "--leader-elect=false",
            "--leader-elect-lease-duration=40s",
            "--leader-elect-renew-deadline=1m",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-lock=leases",
            "--leader-elect-resource-name=from-flag",
        ]
    )
    cfg = settings.configuration
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (
        False,
        40.0,
        60.0,
        0.5,
    )
    assert le.resource_name == "from-flag"
    assert cfg.metrics.bind_address == "0"
    assert cfg.health.health_probe_bind_address == ":7000"
    assert cfg.client_connection is not None
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (7.5, 9)
    assert settings.manager_options().leader_election is None


def test_bare_go_bool_flag_means_true(tmp_path: Path) -> None:
    path = write(tmp_path, "leaderElection: {leaderElect: false}\n")
    settings, _ = run_command([f"--config={path}", "--leader-elect", "--zap-log-level=2"])
    assert settings.configuration.leader_election.leader_elect is True
    assert logging.getLogger().level == logging.INFO - 2


def test_invalid_file_fails_the_command(tmp_path: Path) -> None:
    command = controller_command(lambda s: None)
    result = CliRunner().invoke(command, ["--config", str(write(tmp_path, "invalidField: 1\n"))])
    assert result.exit_code == 1
    assert 'unknown field "invalidField"' in result.output


def test_version_flag_prints_and_does_not_run() -> None:
    ran: list[Settings] = []
    command = controller_command(
        ran.append, version="v1.2.3", build_date="2025-01-01", git_commit="abc"
    )
    result = CliRunner().invoke(command, ["--version"])
    assert result.exit_code == 0
    assert result.output == "Version: v1.2.3\nBuildDate: 2025-01-01\nGitCommit: abc\n"
    assert ran == []


def test_settings_for_local_runs(tmp_path: Path) -> None:
    settings, _ = run_command(
        [
            "--operator-namespace=dev",
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--webhook-cert-extra-sans=127.0.0.1,localhost",
            "--metrics-secure=false",
        ],
        env={"ENABLE_WEBHOOKS": "false"},
    )
    assert settings.namespace == "dev"
    assert settings.kubeconfig == tmp_path / "kubeconfig"
    assert settings.enable_webhooks is False
    assert settings.metrics_secure is False
    assert settings.extra_ip_addresses == ("127.0.0.1",)
    assert settings.extra_dns_names == ("localhost",)
    assert settings.user_agent.startswith("lws/v1.2.3 ")


def test_manager_options_from_defaults() -> None:
    settings = Settings(
        configuration=load_configuration(None), namespace="lws-system", identity="me"
    )
    options = settings.manager_options()
    assert options.namespace == "lws-system"
    election = options.leader_election
    assert election is not None
    assert (election.namespace, election.name, election.identity) == (
        "lws-system",
        "b8b2488c.x-k8s.io",
        "me",
    )
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (15, 10, 2)
    assert election.release_on_cancel
    rotator = options.cert_rotator
    assert rotator is not None
    assert rotator.dns_names[:2] == (
        "lws-webhook-service.lws-system.svc",
        "lws-webhook-service.lws-system.svc.cluster.local",
    )
    assert (rotator.ca_name, rotator.ca_organization) == ("lws-ca", "lws")
    assert rotator.secret_name == "lws-webhook-server-cert"
    assert rotator.mutating_webhook_configurations == ("lws-mutating-webhook-configuration",)
    assert rotator.validating_webhook_configurations == ("lws-validating-webhook-configuration",)
    assert options.metrics_bind_address == ":8443"
    assert options.health_probe_bind_address == ":8081"
    assert options.webhook_port == 9443
    assert options.event_reporting_controller == "leaderworkerset"
    assert (options.qps, options.burst) == (500.0, 500)


def test_manager_options_follow_the_configured_webhook_names(tmp_path: Path) -> None:
    """How a chart names the webhook Service and Secret for the manager: the
    Configuration's internalCertManagement names (upstream's chart leaves them at their
    defaults). The webhook configurations' names are fixed, as in upstream's manager,
    which derives them from nothing."""
    path = write(
        tmp_path,
        "internalCertManagement: {enable: true, webhookServiceName: my-svc, "
        "webhookSecretName: my-secret}\n",
    )
    options = Settings(configuration=load_configuration(path), namespace="ns").manager_options()
    rotator = options.cert_rotator
    assert rotator is not None
    assert rotator.dns_names[:2] == ("my-svc.ns.svc", "my-svc.ns.svc.cluster.local")
    assert rotator.secret_name == "my-secret"
    assert rotator.namespace == "ns"
    assert rotator.mutating_webhook_configurations == ("lws-mutating-webhook-configuration",)
    assert rotator.validating_webhook_configurations == ("lws-validating-webhook-configuration",)
    # Where both charts mount cert-manager's metrics certificate.
    assert str(options.metrics_cert_dir) == "/tmp/k8s-metrics-server/serving-certs"


def test_manager_options_without_cert_management() -> None:
    cfg = load_configuration(None)
    assert cfg.internal_cert_management is not None
    cfg.internal_cert_management.enable = False
    options = Settings(configuration=cfg, namespace="x").manager_options()
    assert options.cert_rotator is None


def test_json_log_lines(tmp_path: Path) -> None:
    stream = io.StringIO()
    runtime_logging.configure("2", stream=stream)
    log = logging.getLogger("lws-test")
    log.info("hello %s", "world", extra={"controller": "lws", "path": tmp_path})
    log.log(runtime_logging.v(2), "verbose")
    log.log(runtime_logging.v(3), "too verbose")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["hello world", "verbose", "failed"]
    first = lines[0]
    assert first["level"] == "info" and first["logger"] == "lws-test"
    assert first["controller"] == "lws" and first["path"] == str(tmp_path)
    assert first["ts"].endswith("Z")
    assert lines[1]["level"] == "debug" and lines[1]["v"] == 2
    assert lines[2]["level"] == "error" and lines[2]["error"] == "boom"
    assert "ValueError: boom" in lines[2]["stacktrace"]


@pytest.mark.parametrize(
    ("value", "level"),
    [("debug", logging.DEBUG), ("info", logging.INFO), ("error", logging.ERROR), ("2", 18)],
)
def test_zap_log_levels(value: str, level: int) -> None:
    assert runtime_logging.parse_level(value) == level


def test_invalid_zap_log_level() -> None:
    with pytest.raises(ValueError, match="invalid log level"):
        runtime_logging.parse_level("loud")
    with pytest.raises(ValueError, match="negative"):
        runtime_logging.parse_level("-1")


def test_metrics_are_secure_unless_turned_off(tmp_path: Path) -> None:
    settings, _ = run_command(["--kubeconfig", str(tmp_path / "kubeconfig")])
    assert settings.metrics_secure is True
    assert settings.manager_options().metrics_secure is True
    settings, _ = run_command(["--kubeconfig", str(tmp_path / "kubeconfig"), "--metrics-secure"])
    assert settings.metrics_secure is True


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


def configured_logging(args: list[str]) -> tuple[str, int, str]:
    """What `lws controller ARGS` configures: the encoder, the root level and (JSON only)
    the level from which records carry a stack trace."""
    run_command(args)
    root = logging.getLogger()
    (handler,) = [h for h in root.handlers if h.get_name() == "leaderworkerset-runtime"]
    formatter = handler.formatter
    if isinstance(formatter, runtime_logging.JsonFormatter):
        return "json", root.level, logging.getLevelName(formatter.stacktrace_level)
    assert isinstance(formatter, runtime_logging.ConsoleFormatter)
    return "console", root.level, ""


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(
    ("args", "want"),
    [
        # The Go manager's default: zap's development preset.
        ([], ("console", logging.DEBUG, "")),
        (["--zap-log-level=2"], ("console", 18, "")),
        (["--zap-log-level=info"], ("console", logging.INFO, "")),
        (["--zap-encoder=json"], ("json", logging.DEBUG, "WARNING")),
        (["--zap-devel=false"], ("json", logging.INFO, "ERROR")),
        (["--zap-devel=false", "--zap-encoder=console"], ("console", logging.INFO, "")),
        (["--zap-devel=false", "--zap-stacktrace-level=info"], ("json", logging.INFO, "INFO")),
    ],
)
def test_logging_defaults_to_the_development_preset_as_the_go_manager(
    args: list[str], want: tuple[str, int, str], tmp_path: Path
) -> None:
    assert configured_logging(["--kubeconfig", str(tmp_path / "kubeconfig"), *args]) == want


@pytest.mark.usefixtures("restored_logging")
def test_console_lines_are_what_the_e2e_suite_looks_for(tmp_path: Path) -> None:
    stream = io.StringIO()
    runtime_logging.configure("info", encoder="console", stream=stream)
    logging.getLogger("controller-runtime.metrics").info(
        "Serving metrics server", extra={"bindAddress": ":8443", "secure": True}
    )
    # Upstream's metrics spec greps the manager's log for this substring.
    assert "controller-runtime.metrics\tServing metrics server\t" in stream.getvalue()


# --- groupBackoff (ours) ---------------------------------------------------------------------
def test_group_backoff_defaults_and_settings() -> None:
    cfg = set_defaults(decode_configuration(HEADER))
    assert cfg.group_backoff is not None
    assert (
        format_duration(cfg.group_backoff.initial_delay or 0),
        format_duration(cfg.group_backoff.max_delay or 0),
        format_duration(cfg.group_backoff.reset_after or 0),
    ) == ("10s", "5m0s", "10m0s")
    # A longer cap stretches the default reset beyond it.
    cfg = set_defaults(decode_configuration(HEADER + "groupBackoff: {maxDelay: 15m}\n"))
    assert cfg.group_backoff is not None and float(cfg.group_backoff.reset_after or 0) == 1800
    assert errors_of("groupBackoff: {initialDelay: 0s}") == []


def test_group_backoff_bounds_are_checked_with_their_fields() -> None:
    (negative,) = errors_of("groupBackoff: {initialDelay: -1s}")
    assert negative.startswith('groupBackoff.initialDelay: Invalid value: "-1s"')
    (cap,) = errors_of("groupBackoff: {initialDelay: 1m, maxDelay: 30s, resetAfter: 1h}")
    assert cap.startswith('groupBackoff.maxDelay: Invalid value: "30s"')
    (reset,) = errors_of("groupBackoff: {maxDelay: 5m, resetAfter: 5m}")
    assert reset.startswith('groupBackoff.resetAfter: Invalid value: "5m0s"')
    assert "greater than maxDelay" in reset
