"""The manager's configuration: the `config.lws.x-k8s.io/v1alpha1` file, flags, environment.

Decoding is strict like the Go manager's (an unknown or duplicated field is an error
naming it), defaults are applied after decoding, and command-line flags override the
file only when given explicitly. `controller_command()` makes the `lws controller`
click command; `Settings.manager_options()` turns the result into `ManagerOptions`.
This is the one runtime module that knows the LeaderWorkerSet-specific names.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import click
import yaml

from leaderworkerset.api import constants as c
from leaderworkerset.api.errors import FieldError, invalid, not_supported, required
from leaderworkerset.api.metavalidation import DNS1123_SUBDOMAIN_MSG, dns1035_label_errors
from leaderworkerset.runtime import logging as runtime_logging
from leaderworkerset.runtime.certs import (
    CIPHER_SUITES,
    TLS_VERSIONS,
    CertRotatorOptions,
    TLSOptions,
)
from leaderworkerset.runtime.election import LeaderElectionConfig, default_identity
from leaderworkerset.runtime.logging import ENCODERS, TIME_ENCODINGS
from leaderworkerset.runtime.manager import ManagerOptions

API_VERSION = "config.lws.x-k8s.io/v1alpha1"
KIND = "Configuration"
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
CA_NAME = "lws-ca"
CA_ORGANIZATION = "lws"
SUPPORTED_RESOURCE_LOCKS = ("leases",)
SUPPORTED_GANG_SCHEDULERS = ("volcano",)
SECURE_TLS_VERSIONS = ("VersionTLS12", "VersionTLS13")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


class ConfigError(ValueError):
    pass


# --- Go durations ---------------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds (`1m30s`, `500ms`, `-2h`, `0`)."""
    original, sign = text, 1.0
    if text[:1] in "+-" and text:
        sign, text = (-1.0 if text[0] == "-" else 1.0), text[1:]
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            raise ValueError(f'time: invalid duration "{original}"')
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not text:
        raise ValueError(f'time: invalid duration "{original}"')
    return sign * total


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling (`15s`, `1m30s`, `500ms`)."""
    if seconds == 0:
        return "0s"
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{int(hours)}h" if hours else ""
    out += f"{int(minutes)}m" if hours or minutes else ""
    return f"{sign}{out}{secs:g}s"


class Duration(float):
    """A float of seconds that the file spells as a Go duration string."""


# --- The Configuration type ----------------------------------------------------------


def json_name(field_name: str) -> str:
    """Every member's wire name is the camelCase of its Python name."""
    head, *rest = field_name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass
class ControllerWebhook:
    port: int | None = None
    host: str = ""
    cert_dir: str = ""


@dataclass
class LeaderElection:
    leader_elect: bool | None = None
    lease_duration: Duration | None = None
    renew_deadline: Duration | None = None
    retry_period: Duration | None = None
    resource_lock: str = ""
    resource_name: str = ""
    resource_namespace: str = ""


@dataclass
class ControllerMetrics:
    bind_address: str = ""


@dataclass
class ControllerHealth:
    health_probe_bind_address: str = ""
    readiness_endpoint_name: str = ""
    liveness_endpoint_name: str = ""


@dataclass
class TLS:
    min_version: str = ""
    cipher_suites: list[str] = field(default_factory=list)


@dataclass
class InternalCertManagement:
    enable: bool | None = None
    webhook_service_name: str | None = None
    webhook_secret_name: str | None = None


@dataclass
class GangSchedulingManagement:
    scheduler_provider: str | None = None


@dataclass
class ClientConnection:
    qps: float | None = None
    burst: int | None = None


@dataclass
class Configuration:
    api_version: str = ""
    kind: str = ""
    webhook: ControllerWebhook = field(default_factory=ControllerWebhook)
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    health: ControllerHealth = field(default_factory=ControllerHealth)
    tls: TLS | None = None
    internal_cert_management: InternalCertManagement | None = None
    gang_scheduling_management: GangSchedulingManagement | None = None
    client_connection: ClientConnection | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form (durations as Go strings, unset members left out)."""
        out = _encode(self)
        assert isinstance(out, dict)
        return out


# --- Strict decoding ----------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """YAML whose mappings may not repeat a key (Go's strict decoding rejects that)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise ConfigError(f'strict decoding error: duplicate field "{key}"')
        seen.add(key)
    return dict(loader.construct_mapping(node))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "string", Duration: "duration"}


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _decode(cls: type, data: Any, path: str, unknown: list[str]) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f'cannot decode {_type_name(data)} into "{path or "Configuration"}"')
    hints = get_type_hints(cls)
    by_json = {json_name(f.name): f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in data.items():
        where = f"{path}.{key}" if path else str(key)
        spec = by_json.get(key)
        if spec is None:
            unknown.append(where)
            continue
        values[spec.name] = _decode_value(hints[spec.name], raw, where, unknown)
    return cls(**values)


def _decode_value(hint: Any, raw: Any, where: str, unknown: list[str]) -> Any:
    if get_origin(hint) is not None and type(None) in get_args(hint):  # Optional[...]
        if raw is None:
            return None
        hint = next(a for a in get_args(hint) if a is not type(None))
    if raw is None:
        return None if dataclasses.is_dataclass(hint) else _zero(hint)
    if dataclasses.is_dataclass(hint):
        return _decode(hint, raw, where, unknown)  # type: ignore[arg-type]
    if get_origin(hint) is list:
        if not isinstance(raw, list):
            raise _type_error(where, raw, "[]string")
        return [
            _decode_value(get_args(hint)[0], item, f"{where}[{i}]", unknown)
            for i, item in enumerate(raw)
        ]
    if hint is Duration:
        if not isinstance(raw, str):
            raise _type_error(where, raw, "duration")
        try:
            return Duration(parse_duration(raw))
        except ValueError as exc:
            raise ConfigError(f'invalid "{where}": {exc}') from None
    if hint is bool:
        if not isinstance(raw, bool):
            raise _type_error(where, raw, "bool")
        return raw
    if hint is int:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or int(raw) != raw:
            raise _type_error(where, raw, "int")
        return int(raw)
    if hint is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise _type_error(where, raw, "float")
        return float(raw)
    if hint is str:
        if not isinstance(raw, str):
            raise _type_error(where, raw, "string")
        return raw
    raise TypeError(f"no decoder for {hint!r}")


def _zero(hint: Any) -> Any:
    return {bool: False, int: 0, float: 0.0, str: ""}.get(
        hint, [] if get_origin(hint) is list else None
    )


def _type_error(where: str, raw: Any, want: str) -> ConfigError:
    return ConfigError(f'cannot unmarshal {_type_name(raw)} into field "{where}" of type {want}')


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for spec in dataclasses.fields(value):
            encoded = _encode(getattr(value, spec.name))
            if encoded not in (None, "", [], {}):
                out[json_name(spec.name)] = encoded
        return out
    if isinstance(value, Duration):
        return format_duration(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def decode_configuration(text: str) -> Configuration:
    """Strictly decode a configuration document (no defaults applied)."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot parse the configuration: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a mapping")
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not kind:
        raise ConfigError("Object 'Kind' is missing in the configuration")
    if api_version != API_VERSION or kind != KIND:
        raise ConfigError(
            f'no kind "{kind}" is registered for version "{api_version}": '
            f"want kind {KIND} of {API_VERSION}"
        )
    unknown: list[str] = []
    cfg = _decode(Configuration, data, "", unknown)
    if unknown:
        raise ConfigError(
            "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
        )
    assert isinstance(cfg, Configuration)
    return cfg


# --- Defaults and validation ------------------------------------------------------


DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
DEFAULT_METRICS_BIND_ADDRESS = ":8443"
DEFAULT_HEALTH_PROBE_BIND_ADDRESS = ":8081"
DEFAULT_READINESS_ENDPOINT = "/readyz"
DEFAULT_LIVENESS_ENDPOINT = "/healthz"
DEFAULT_QPS = 500.0
DEFAULT_BURST = 500


def set_defaults(cfg: Configuration) -> Configuration:
    """Fill unset members in place (and return `cfg`), as SetDefaults_Configuration does."""
    if cfg.webhook.port is None:
        cfg.webhook.port = DEFAULT_WEBHOOK_PORT
    cfg.webhook.cert_dir = cfg.webhook.cert_dir or DEFAULT_CERT_DIR
    le = cfg.leader_election
    if le.leader_elect is None:
        le.leader_elect = True
    le.lease_duration = Duration(15.0) if le.lease_duration is None else le.lease_duration
    le.renew_deadline = Duration(10.0) if le.renew_deadline is None else le.renew_deadline
    le.retry_period = Duration(2.0) if le.retry_period is None else le.retry_period
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
    return cfg


def validate(cfg: Configuration) -> list[FieldError]:
    errs: list[FieldError] = []
    if cfg.tls is not None:
        version = cfg.tls.min_version
        if version and version not in SECURE_TLS_VERSIONS:
            detail = (
                "insecure TLS version, use VersionTLS12 or VersionTLS13"
                if version in TLS_VERSIONS
                else "unknown TLS version, use VersionTLS12 or VersionTLS13"
            )
            errs.append(invalid("tls.minVersion", version, detail))
        if cfg.tls.cipher_suites and version == "VersionTLS13":
            errs.append(
                invalid(
                    "tls.cipherSuites",
                    cfg.tls.cipher_suites,
                    "may not be specified when minVersion is VersionTLS13",
                )
            )
        for i, suite in enumerate(cfg.tls.cipher_suites):
            if suite not in CIPHER_SUITES:
                errs.append(
                    invalid(f"tls.cipherSuites[{i}]", suite, "not supported or doesn't exist")
                )
    icm = cfg.internal_cert_management
    if icm is not None and icm.enable:
        if icm.webhook_service_name is not None:
            for msg in dns1035_label_errors(icm.webhook_service_name):
                errs.append(
                    invalid(
                        "internalCertManagement.webhookServiceName", icm.webhook_service_name, msg
                    )
                )
        name = icm.webhook_secret_name
        if name is not None:
            if len(name) > 253:
                errs.append(
                    invalid(
                        "internalCertManagement.webhookSecretName",
                        name,
                        "must be no more than 253 characters",
                    )
                )
            if not _DNS1123_SUBDOMAIN.match(name):
                errs.append(
                    invalid("internalCertManagement.webhookSecretName", name, DNS1123_SUBDOMAIN_MSG)
                )
    gang = cfg.gang_scheduling_management
    if gang is not None:
        provider = gang.scheduler_provider
        if not provider:
            errs.append(required("gangSchedulingManagement.schedulerProvider"))
        elif provider not in SUPPORTED_GANG_SCHEDULERS:
            errs.append(
                not_supported(
                    "gangSchedulingManagement.schedulerProvider",
                    provider,
                    SUPPORTED_GANG_SCHEDULERS,
                )
            )
    le = cfg.leader_election
    if le.leader_elect and le.resource_lock not in SUPPORTED_RESOURCE_LOCKS:
        errs.append(
            not_supported("leaderElection.resourceLock", le.resource_lock, SUPPORTED_RESOURCE_LOCKS)
        )
    port = cfg.webhook.port
    if port is not None and not 0 < port < 65536:
        errs.append(invalid("webhook.port", port, "must be between 1 and 65535, inclusive"))
    return errs


# --- Flags, environment, effective settings -----------------------------------------


@dataclass(frozen=True)
class FlagOverrides:
    """Flags given on the command line; None means "not given", so the file wins."""

    metrics_bind_address: str | None = None
    health_probe_bind_address: str | None = None
    kube_api_qps: float | None = None
    kube_api_burst: int | None = None
    leader_elect: bool | None = None
    leader_elect_lease_duration: float | None = None
    leader_elect_renew_deadline: float | None = None
    leader_elect_retry_period: float | None = None
    leader_elect_resource_lock: str | None = None
    leader_elect_resource_name: str | None = None


def apply_overrides(cfg: Configuration, flags: FlagOverrides) -> Configuration:
    le = cfg.leader_election
    cc = cfg.client_connection = cfg.client_connection or ClientConnection()
    if flags.metrics_bind_address is not None:
        cfg.metrics.bind_address = flags.metrics_bind_address
    if flags.health_probe_bind_address is not None:
        cfg.health.health_probe_bind_address = flags.health_probe_bind_address
    if flags.kube_api_qps is not None:
        cc.qps = flags.kube_api_qps
    if flags.kube_api_burst is not None:
        cc.burst = flags.kube_api_burst
    if flags.leader_elect is not None:
        le.leader_elect = flags.leader_elect
    if flags.leader_elect_lease_duration is not None:
        le.lease_duration = Duration(flags.leader_elect_lease_duration)
    if flags.leader_elect_renew_deadline is not None:
        le.renew_deadline = Duration(flags.leader_elect_renew_deadline)
    if flags.leader_elect_retry_period is not None:
        le.retry_period = Duration(flags.leader_elect_retry_period)
    if flags.leader_elect_resource_lock is not None:
        le.resource_lock = flags.leader_elect_resource_lock
    if flags.leader_elect_resource_name is not None:
        le.resource_name = flags.leader_elect_resource_name
    return cfg


def load_configuration(
    path: Path | str | None, flags: FlagOverrides = FlagOverrides()
) -> Configuration:
    """File (or nothing) → defaults → explicit flags → validation; ConfigError when invalid."""
    if path:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read the configuration file: {exc}") from None
        cfg = decode_configuration(text)
    else:
        cfg = Configuration(api_version=API_VERSION, kind=KIND)
    apply_overrides(set_defaults(cfg), flags)
    errs = validate(cfg)
    if errs:
        raise ConfigError("invalid configuration: " + "; ".join(str(e) for e in errs))
    return cfg


def operator_namespace(
    override: str | None = None, sa_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE
) -> str:
    if override:
        return override
    try:
        namespace = sa_file.read_text().strip()
    except OSError:
        namespace = ""
    return namespace or c.DEFAULT_OPERATOR_NAMESPACE


def webhooks_enabled(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("ENABLE_WEBHOOKS", "") != "false"


def user_agent(version: str, git_commit: str = "") -> str:
    """`lws/<version> (<os>/<arch>) <commit[:7] or unknown>`, as the Go manager sends."""
    system = platform.system().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return f"lws/{version} ({system}/{arch}) {git_commit[:7] or 'unknown'}"


@dataclass(frozen=True)
class Settings:
    """Everything `lws controller` decided before the manager is built."""

    configuration: Configuration
    namespace: str
    kubeconfig: Path | None = None
    enable_webhooks: bool = True
    metrics_secure: bool = True
    extra_dns_names: tuple[str, ...] = ()
    extra_ip_addresses: tuple[str, ...] = ()
    user_agent: str = "lws"
    identity: str = field(default_factory=default_identity)
    exit_on_leadership_loss: bool = True

    @property
    def gang_scheduling_provider(self) -> str | None:
        gang = self.configuration.gang_scheduling_management
        return gang.scheduler_provider if gang else None

    def manager_options(self) -> ManagerOptions:
        cfg = self.configuration
        le = cfg.leader_election
        election = None
        if le.leader_elect:
            election = LeaderElectionConfig(
                # resourceNamespace is ignored upstream: the lease lives with the operator.
                namespace=self.namespace,
                name=le.resource_name,
                identity=self.identity,
                lease_duration=float(le.lease_duration or 15.0),
                renew_deadline=float(le.renew_deadline or 10.0),
                retry_period=float(le.retry_period or 2.0),
                release_on_cancel=True,
            )
        tls = TLSOptions()
        if cfg.tls is not None:
            tls = TLSOptions(cfg.tls.min_version, tuple(cfg.tls.cipher_suites))
        cert_dir = Path(cfg.webhook.cert_dir)
        rotator = None
        icm = cfg.internal_cert_management
        if icm is not None and icm.enable:
            rotator = CertRotatorOptions(
                namespace=self.namespace,
                secret_name=icm.webhook_secret_name or c.WEBHOOK_SECRET_NAME,
                service_name=icm.webhook_service_name or c.WEBHOOK_SERVICE_NAME,
                cert_dir=cert_dir,
                ca_name=CA_NAME,
                ca_organization=CA_ORGANIZATION,
                mutating_webhook_configurations=(c.MUTATING_WEBHOOK_CONFIGURATION,),
                validating_webhook_configurations=(c.VALIDATING_WEBHOOK_CONFIGURATION,),
                extra_dns_names=self.extra_dns_names,
                extra_ip_addresses=self.extra_ip_addresses,
            )
        cc = cfg.client_connection or ClientConnection()
        return ManagerOptions(
            namespace=self.namespace,
            kubeconfig=self.kubeconfig,
            qps=float(DEFAULT_QPS if cc.qps is None else cc.qps),
            burst=int(DEFAULT_BURST if cc.burst is None else cc.burst),
            user_agent=self.user_agent,
            leader_election=election,
            exit_on_leadership_loss=self.exit_on_leadership_loss,
            metrics_bind_address=cfg.metrics.bind_address,
            metrics_secure=self.metrics_secure,
            health_probe_bind_address=cfg.health.health_probe_bind_address,
            liveness_endpoint=cfg.health.liveness_endpoint_name,
            readiness_endpoint=cfg.health.readiness_endpoint_name,
            webhook_host=cfg.webhook.host,
            webhook_port=int(cfg.webhook.port or DEFAULT_WEBHOOK_PORT),
            cert_dir=cert_dir,
            tls=tls,
            cert_rotator=rotator,
            event_reporting_controller=c.EVENT_REPORTING_CONTROLLER,
        )


def configuration_yaml(cfg: Configuration) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


# --- The click command ----------------------------------------------------------------


class _GoDuration(click.ParamType[float, Any]):
    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _go_bool(name: str, help_text: str) -> Callable[[Any], Any]:
    # Go bool flags: `--x` means true, `--x=false` is the only way to say false.
    return click.option(
        name, type=click.BOOL, is_flag=False, flag_value="true", default=None, help=help_text
    )


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def controller_command(
    run: Callable[[Settings], None],
    *,
    name: str = "controller",
    version: str = "",
    build_date: str = "",
    git_commit: str = "",
) -> click.Command:
    """The manager's command line with the Go manager's flag names; `run(settings)` is
    called with the effective settings after logging has been configured."""

    @click.command(name, context_settings={"show_default": True})
    @click.option("--config", "config_path", default="", help="Path to the Configuration file.")
    @click.option("--version", "print_version", is_flag=True, help="Print the version and exit.")
    @click.option(
        "--metrics-bind-address",
        default=None,
        help="[deprecated] Metrics address; '0' disables. Default :8443.",
    )
    @click.option(
        "--health-probe-bind-address",
        default=None,
        help="[deprecated] Probe address. Default :8081.",
    )
    @click.option("--kube-api-qps", type=float, default=None, help="Client QPS. Default 500.")
    @click.option("--kube-api-burst", type=int, default=None, help="Client burst. Default 500.")
    @_go_bool("--leader-elect", "Enable leader election. Default true.")
    @click.option(
        "--leader-elect-lease-duration",
        type=_GoDuration(),
        default=None,
        help="[deprecated] Default 15s.",
    )
    @click.option(
        "--leader-elect-renew-deadline",
        type=_GoDuration(),
        default=None,
        help="[deprecated] Default 10s.",
    )
    @click.option(
        "--leader-elect-retry-period",
        type=_GoDuration(),
        default=None,
        help="[deprecated] Default 2s.",
    )
    @click.option("--leader-elect-resource-lock", default=None, help="[deprecated] Default leases.")
    @click.option(
        "--leader-elect-resource-name",
        default=None,
        help=f"[deprecated] Default {c.LEADER_ELECTION_LEASE_NAME}.",
    )
    @click.option(
        "--zap-log-level", default="info", help="debug, info, error, or an integer verbosity."
    )
    @click.option("--zap-encoder", type=click.Choice(ENCODERS), default="json")
    @_go_bool("--zap-devel", "Development mode: console encoder, debug level.")
    @click.option("--zap-stacktrace-level", default="error")
    @click.option("--zap-time-encoding", type=click.Choice(TIME_ENCODINGS), default="iso8601")
    @click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config).",
    )
    @click.option(
        "--operator-namespace",
        "namespace_override",
        envvar="LWS_OPERATOR_NAMESPACE",
        default=None,
        help="Namespace of the lease and webhook secret (default: the pod's, else lws-system).",
    )
    @_go_bool(
        "--metrics-secure",
        "Serve metrics over HTTPS to callers authorized by TokenReview and "
        "SubjectAccessReview; false serves plain HTTP to anyone. Default true.",
    )
    @click.option(
        "--webhook-cert-extra-sans",
        multiple=True,
        help="Extra DNS names / IPs for the serving certificate (local runs).",
    )
    def command(
        config_path: str,
        print_version: bool,
        zap_log_level: str,
        zap_encoder: str,
        zap_devel: bool | None,
        zap_stacktrace_level: str,
        zap_time_encoding: str,
        kubeconfig: Path | None,
        namespace_override: str | None,
        metrics_secure: bool | None,
        webhook_cert_extra_sans: tuple[str, ...],
        **flags: Any,
    ) -> None:
        """Run the LeaderWorkerSet controller manager."""
        if print_version:
            click.echo(f"Version: {version}\nBuildDate: {build_date}\nGitCommit: {git_commit}")
            return
        try:
            runtime_logging.configure(
                "debug" if zap_devel and zap_log_level == "info" else zap_log_level,
                encoder="console" if zap_devel else zap_encoder,
                time_encoding=zap_time_encoding,
                stacktrace_level=zap_stacktrace_level,
            )
            cfg = load_configuration(config_path or None, FlagOverrides(**flags))
        except (ConfigError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        sans = _split(webhook_cert_extra_sans)
        settings = Settings(
            configuration=cfg,
            namespace=operator_namespace(namespace_override),
            kubeconfig=kubeconfig,
            enable_webhooks=webhooks_enabled(),
            metrics_secure=metrics_secure is not False,
            extra_dns_names=tuple(s for s in sans if not _is_ip(s)),
            extra_ip_addresses=tuple(s for s in sans if _is_ip(s)),
            user_agent=user_agent(version or "unknown", git_commit),
        )
        logging.getLogger("setup").info(
            "effective configuration", extra={"config": configuration_yaml(cfg)}
        )
        run(settings)

    return command


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
