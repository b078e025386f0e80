"""`lws controller`: flags and environment to effective settings, then the manager.

Command-line flags override the configuration file only when given explicitly.
`controller_command()` makes the click command; `Settings.manager_options()` turns its
result into the runtime's `ManagerOptions`; `run_controller` starts the manager with the
LeaderWorkerSet controllers and webhooks.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from lightkube.core.exceptions import ConfigError as KubeConfigError

from leaderworkerset import __version__
from leaderworkerset.api.config.codec import ConfigError, configuration_yaml, decode_configuration
from leaderworkerset.api.config.defaults import (
    DEFAULT_BURST,
    DEFAULT_LEASE_DURATION,
    DEFAULT_QPS,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    DEFAULT_WEBHOOK_PORT,
    set_defaults,
)
from leaderworkerset.api.config.types import (
    API_VERSION,
    KIND,
    TEARDOWN_PARALLEL,
    TLS,
    ClientConnection,
    Configuration,
    Teardown,
)
from leaderworkerset.api.config.validation import tls_version_error, validate
from leaderworkerset.api.go.durations import Duration, parse_duration
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import (
    FEATURE_WORKLOAD_AWARE_SCHEDULING,
    PROVIDER_KUBERNETES,
    PROVIDER_VOLCANO,
    SchedulingSupport,
)
from leaderworkerset.api.resources import POD_GROUPS, WORKLOADS
from leaderworkerset.group.options import ReleaseThresholds, TeardownModes
from leaderworkerset.group.recreations import BackoffPolicy
from leaderworkerset.runtime import logging as runtime_logging
from leaderworkerset.runtime.allocator import fix_malloc_thresholds
from leaderworkerset.runtime.certs import CertRotatorOptions, CertsNotReadyError, TLSOptions
from leaderworkerset.runtime.discovery import serves
from leaderworkerset.runtime.election import LeaderElectionConfig, default_identity
from leaderworkerset.runtime.eventloop import EVENT_LOOPS, loop_factory
from leaderworkerset.runtime.logging import ENCODERS, TIME_ENCODINGS
from leaderworkerset.runtime.manager import LeaderElectionLostError, Manager, ManagerOptions
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.stalls import start_stall_probe
from leaderworkerset.wiring import setup_controllers

SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
CA_NAME = "lws-ca"
CA_ORGANIZATION = "lws"


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
    tls_min_version: str | None = None


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
    if flags.tls_min_version is not None:
        cfg.tls = cfg.tls or TLS()
        cfg.tls.min_version = flags.tls_min_version
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
    enable_disaggregatedset: bool = True
    metrics_secure: bool = True
    extra_dns_names: tuple[str, ...] = ()
    extra_ip_addresses: tuple[str, ...] = ()
    user_agent: str = "lws"
    identity: str = field(default_factory=default_identity)
    exit_on_leadership_loss: bool = True
    event_loop: str = "auto"

    @property
    def gang_scheduling_provider(self) -> str | None:
        gang = self.configuration.gang_scheduling_management
        return gang.scheduler_provider if gang else None

    @property
    def replacement_release(self) -> ReleaseThresholds:
        """groupReplacement: how long a replacement waits for capacity that is lost."""
        gr = self.configuration.group_replacement
        defaults = ReleaseThresholds()
        if gr is None:
            return defaults
        node = gr.node_not_ready_release
        overrun = gr.termination_overrun_release
        return ReleaseThresholds(
            node_not_ready=defaults.node_not_ready if node is None else float(node),
            termination_overrun=(
                defaults.termination_overrun if overrun is None else float(overrun)
            ),
        )

    @property
    def group_backoff(self) -> BackoffPolicy:
        """groupBackoff: how repeated recreations of one group wait."""
        gb = self.configuration.group_backoff
        defaults = BackoffPolicy()
        if gb is None:
            return defaults
        first, cap, reset = gb.initial_delay, gb.max_delay, gb.reset_after
        return BackoffPolicy(
            initial=defaults.initial if first is None else float(first),
            cap=defaults.cap if cap is None else float(cap),
            reset_after=defaults.reset_after if reset is None else float(reset),
        )

    @property
    def teardown(self) -> TeardownModes:
        """teardown: which of groupRestart and leaderWorkerSetDeletion is Parallel."""
        td = self.configuration.teardown or Teardown()
        return TeardownModes(
            group_restart=(td.group_restart or TEARDOWN_PARALLEL) == TEARDOWN_PARALLEL,
            lws_deletion=td.leader_worker_set_deletion == TEARDOWN_PARALLEL,
        )

    @property
    def size_limits(self) -> SizeLimits:
        """leaderWorkerSetLimits: how big an LWS admission lets through (0: no limit)."""
        limits = self.configuration.leader_worker_set_limits
        if limits is None:
            return SizeLimits()
        return SizeLimits(max_size=limits.max_size, max_pods=limits.max_pods)

    def manager_options(self) -> ManagerOptions:
        cfg = self.configuration
        tls = TLSOptions()
        if cfg.tls is not None:
            tls = TLSOptions(cfg.tls.min_version, tuple(cfg.tls.cipher_suites))
        cc = cfg.client_connection or ClientConnection()
        return ManagerOptions(
            namespace=self.namespace,
            kubeconfig=self.kubeconfig,
            qps=float(DEFAULT_QPS if cc.qps is None else cc.qps),
            burst=int(DEFAULT_BURST if cc.burst is None else cc.burst),
            user_agent=self.user_agent,
            leader_election=self._leader_election(),
            exit_on_leadership_loss=self.exit_on_leadership_loss,
            metrics_bind_address=cfg.metrics.bind_address,
            metrics_secure=self.metrics_secure,
            health_probe_bind_address=cfg.health.health_probe_bind_address,
            liveness_endpoint=cfg.health.liveness_endpoint_name,
            readiness_endpoint=cfg.health.readiness_endpoint_name,
            webhook_host=cfg.webhook.host,
            webhook_port=int(cfg.webhook.port or DEFAULT_WEBHOOK_PORT),
            cert_dir=Path(cfg.webhook.cert_dir),
            tls=tls,
            cert_rotator=self._cert_rotator(),
            event_reporting_controller=c.EVENT_REPORTING_CONTROLLER,
        )

    def _leader_election(self) -> LeaderElectionConfig | None:
        le = self.configuration.leader_election
        if not le.leader_elect:
            return None
        return LeaderElectionConfig(
            # resourceNamespace is ignored upstream: the lease lives with the operator.
            namespace=self.namespace,
            name=le.resource_name,
            identity=self.identity,
            lease_duration=float(le.lease_duration or DEFAULT_LEASE_DURATION),
            renew_deadline=float(le.renew_deadline or DEFAULT_RENEW_DEADLINE),
            retry_period=float(le.retry_period or DEFAULT_RETRY_PERIOD),
            release_on_cancel=True,
        )

    def _cert_rotator(self) -> CertRotatorOptions | None:
        icm = self.configuration.internal_cert_management
        if icm is None or not icm.enable:
            return None
        return CertRotatorOptions(
            namespace=self.namespace,
            secret_name=icm.webhook_secret_name or c.WEBHOOK_SECRET_NAME,
            service_name=icm.webhook_service_name or c.WEBHOOK_SERVICE_NAME,
            cert_dir=Path(self.configuration.webhook.cert_dir),
            ca_name=CA_NAME,
            ca_organization=CA_ORGANIZATION,
            mutating_webhook_configurations=(c.MUTATING_WEBHOOK_CONFIGURATION,),
            validating_webhook_configurations=(c.VALIDATING_WEBHOOK_CONFIGURATION,),
            extra_dns_names=self.extra_dns_names,
            extra_ip_addresses=self.extra_ip_addresses,
        )


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


class _TLSVersion(click.ParamType[str, Any]):
    # Checked here, not only by the configuration's validation, so the error names the
    # flag rather than the `tls.minVersion` key the value was put in.
    name = "version"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        error = tls_version_error(str(value))
        if error:
            self.fail(f"{value!r}: {error}", param, ctx)
        return str(value)


def _go_bool(name: str, help_text: str) -> Callable[[Any], Any]:
    # Go bool flags: `--x` means true, `--x=false` is the only way to say false.
    return click.option(
        name, type=click.BOOL, is_flag=False, flag_value="true", default=None, help=help_text
    )


# The Go manager's flags, in the order `--help` lists them. Those that are not
# parameters of `command` below are collected into FlagOverrides.
_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    click.option("--config", "config_path", default="", help="Path to the Configuration file."),
    click.option("--version", "print_version", is_flag=True, help="Print the version and exit."),
    click.option(
        "--metrics-bind-address",
        default=None,
        help="[deprecated] Metrics address; '0' disables. Default :8443.",
    ),
    click.option(
        "--health-probe-bind-address",
        default=None,
        help="[deprecated] Probe address. Default :8081.",
    ),
    click.option("--kube-api-qps", type=float, default=None, help="Client QPS. Default 500."),
    click.option("--kube-api-burst", type=int, default=None, help="Client burst. Default 500."),
    _go_bool("--leader-elect", "Enable leader election. Default true."),
    click.option(
        "--leader-elect-lease-duration",
        type=_GoDuration(),
        default=None,
        help="[deprecated] Default 15s.",
    ),
    click.option(
        "--leader-elect-renew-deadline",
        type=_GoDuration(),
        default=None,
        help="[deprecated] Default 10s.",
    ),
    click.option(
        "--leader-elect-retry-period",
        type=_GoDuration(),
        default=None,
        help="[deprecated] Default 2s.",
    ),
    click.option("--leader-elect-resource-lock", default=None, help="[deprecated] Default leases."),
    click.option(
        "--leader-elect-resource-name",
        default=None,
        help=f"[deprecated] Default {c.LEADER_ELECTION_LEASE_NAME}.",
    ),
    click.option(
        "--zap-log-level",
        default=None,
        help="debug, info, error, or an integer verbosity. Default: debug with --zap-devel, "
        "else info.",
    ),
    click.option(
        "--zap-encoder",
        type=click.Choice(ENCODERS),
        default=None,
        help="Default: console with --zap-devel, else json.",
    ),
    _go_bool(
        "--zap-devel",
        "Development mode: console encoder, debug level, stack traces from warn. "
        "Default true, as the Go manager's.",
    ),
    click.option(
        "--zap-stacktrace-level", default=None, help="Default: warn with --zap-devel, else error."
    ),
    click.option("--zap-time-encoding", type=click.Choice(TIME_ENCODINGS), default="iso8601"),
    click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config).",
    ),
    click.option(
        "--operator-namespace",
        "namespace_override",
        envvar="LWS_OPERATOR_NAMESPACE",
        default=None,
        help="Namespace of the lease and webhook secret (default: the pod's, else lws-system).",
    ),
    click.option(
        "--tls-min-version",
        type=_TLSVersion(),
        default=None,
        help="Minimum TLS version of the webhook and metrics servers: VersionTLS12 or "
        "VersionTLS13. Overrides tls.minVersion of the configuration file. Default "
        "VersionTLS12.",
    ),
    _go_bool(
        "--metrics-secure",
        "Serve metrics over HTTPS to callers authorized by TokenReview and "
        "SubjectAccessReview; false serves plain HTTP to anyone. Default true.",
    ),
    _go_bool(
        "--enable-disaggregatedset",
        "Run the DisaggregatedSet controller and serve its webhook (its CRDs must be "
        "installed). Default true: upstream's manager always runs it.",
    ),
    click.option(
        "--webhook-cert-extra-sans",
        multiple=True,
        help="Extra DNS names / IPs for the serving certificate (local runs).",
    ),
    click.option(
        "--event-loop",
        type=click.Choice(EVENT_LOOPS),
        envvar="LWS_EVENT_LOOP",
        default="auto",
        help="Event loop of the manager and the webhook server: uvloop (compiled TLS, "
        "less CPU) or asyncio's own; auto is uvloop when installed. Env LWS_EVENT_LOOP.",
    ),
)


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

    def command(
        config_path: str,
        print_version: bool,
        zap_log_level: str | None,
        zap_encoder: str | None,
        zap_devel: bool | None,
        zap_stacktrace_level: str | None,
        zap_time_encoding: str,
        kubeconfig: Path | None,
        namespace_override: str | None,
        metrics_secure: bool | None,
        enable_disaggregatedset: bool | None,
        webhook_cert_extra_sans: tuple[str, ...],
        event_loop: str,
        **flags: Any,
    ) -> None:
        """Run the LeaderWorkerSet controller manager."""
        if print_version:
            click.echo(f"Version: {version}\nBuildDate: {build_date}\nGitCommit: {git_commit}")
            return
        try:
            _configure_logging(
                zap_log_level, zap_encoder, zap_devel, zap_stacktrace_level, zap_time_encoding
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
            enable_disaggregatedset=enable_disaggregatedset is not False,
            extra_dns_names=tuple(s for s in sans if not _is_ip(s)),
            extra_ip_addresses=tuple(s for s in sans if _is_ip(s)),
            user_agent=user_agent(version or "unknown", git_commit),
            event_loop=event_loop,
        )
        logging.getLogger("setup").info(
            "effective configuration", extra={"config": configuration_yaml(cfg)}
        )
        run(settings)

    decorated: Callable[..., None] = command
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return click.command(name, context_settings={"show_default": True})(decorated)


def _configure_logging(
    level: str | None,
    encoder: str | None,
    devel: bool | None,
    stacktrace_level: str | None,
    time_encoding: str,
) -> None:
    # --zap-devel is zap's development preset (console output, debug level, stack traces
    # from warn), each part only where its own flag is not given. The Go manager turns it
    # on by default (zap.Options{Development: true}), so its logs are console lines
    # unless `--zap-devel=false` or `--zap-encoder=json`; log queries and upstream's e2e
    # suite match those lines.
    devel = devel is not False
    runtime_logging.configure(
        level or ("debug" if devel else "info"),
        encoder=encoder or ("console" if devel else "json"),
        time_encoding=time_encoding,
        stacktrace_level=stacktrace_level or ("warn" if devel else "error"),
    )


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# --- Running the manager --------------------------------------------------------------


# The caches hold hundreds of thousands of small dicts. With CPython's default
# thresholds a full collection walks them all every few thousand events: in a
# replay of 8,000 pods' watch events that was more than half the CPU, with pauses
# of up to 220 ms (an admission waiting behind one misses any latency target).
# Cached objects are freed by reference counting, and cycles are rare (asyncio
# futures, exceptions), so collecting far less often costs next to no memory.
GC_THRESHOLDS = (10_000, 50, 100)

# The webhook server's thread wakes for each read and write of a review, and while the
# manager's loop runs Python it gets the GIL back only after this interval (CPython's
# default is 5 ms), several times per review. With the manager's loop busy all the
# time, 1 ms took the pod webhook's median from 10 ms to 2.5-5.5 ms and its p99 from
# 100-130 ms to 9-70 ms (bench.webhook_load --busy; the higher figures on a loaded
# machine). Forced switches happen only while a second thread waits: two threads both
# busy did the same work per CPU second at 5, 1 and 0.5 ms.
GIL_SWITCH_INTERVAL = 0.001


async def scheduling_support(manager: Manager, settings: Settings) -> SchedulingSupport:
    """What spec.scheduling can be served with; the Workload API is asked for only when
    the kubernetes provider and its feature gate are configured."""
    provider = settings.gang_scheduling_provider
    gates = settings.configuration.feature_gates or {}
    gate = bool(gates.get(FEATURE_WORKLOAD_AWARE_SCHEDULING, False))
    available = True
    if provider == PROVIDER_KUBERNETES and gate:
        available = await serves(manager.client, WORKLOADS, POD_GROUPS)
        log = logging.getLogger("setup")
        if available:
            log.info("gang scheduling by the Kubernetes Workload API")
        else:
            log.warning(
                "the kubernetes scheduler provider is configured, but the API server does "
                "not serve scheduling.k8s.io/v1beta1 Workload and PodGroup: LeaderWorkerSets "
                "with spec.scheduling are refused until it does and the controller restarts"
            )
    return SchedulingSupport(provider=provider, feature_gate=gate, api_available=available)


def run_controller(settings: Settings) -> None:
    """The manager with the LeaderWorkerSet controllers and webhooks."""
    gc.set_threshold(*GC_THRESHOLDS)
    fix_malloc_thresholds()
    # The process's one set of families: the manager serves it, and hands it on to
    # what it builds and what the wiring builds on it.
    metrics = RuntimeMetrics()
    metrics.observe_gc_pauses()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    stall_probe = start_stall_probe(metrics)

    async def serve() -> None:
        running = asyncio.get_running_loop()
        loop = type(running).__module__.partition(".")[0]
        logging.getLogger("setup").info("event loop", extra={"eventLoop": loop})
        metrics.event_loop_tasks.set_function(lambda: len(asyncio.all_tasks(running)))
        manager = Manager(settings.manager_options(), metrics=metrics)
        scheduling = await scheduling_support(manager, settings)
        setup_controllers(
            manager,
            enable_webhooks=settings.enable_webhooks,
            enable_disaggregatedset=settings.enable_disaggregatedset,
            gang_scheduling=settings.gang_scheduling_provider == PROVIDER_VOLCANO,
            scheduling=scheduling,
            replacement_release=settings.replacement_release,
            group_backoff=settings.group_backoff,
            limits=settings.size_limits,
            teardown=settings.teardown,
        )
        await manager.run()

    try:
        # The webhook server's thread runs a loop of the same kind (runtime.eventloop).
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            runner.run(serve())
    except (LeaderElectionLostError, CertsNotReadyError) as exc:
        sys.exit(f"{exc}")
    except KubeConfigError as exc:
        # Outside a pod with no kubeconfig: say so, as the Go manager does, not a trace.
        sys.exit(f"unable to get the cluster's configuration: {exc}")
    finally:
        stall_probe.stop()
        metrics.stop_observing_gc_pauses()


controller = controller_command(run_controller, version=__version__)
