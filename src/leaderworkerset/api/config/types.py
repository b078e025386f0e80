"""The `config.lws.x-k8s.io/v1alpha1` Configuration types and their wire names.

None marks a member the file left unset, so that defaulting can tell it from an
explicit zero, as the Go types' pointers do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.go.durations import Duration, format_duration

API_VERSION = "config.lws.x-k8s.io/v1alpha1"
KIND = "Configuration"


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
class GroupReplacement:
    """Our addition: bounds on how long a Hash-mode replacement waits under
    PostTermination for a group whose capacity will not come back (0s: no bound)."""

    # The group's remaining pods are on nodes not Ready (or gone) for this long.
    node_not_ready_release: Duration | None = None
    # The group's remaining pods are still there this long past their deletion timestamp.
    termination_overrun_release: Duration | None = None


# Who deletes what a teardown leaves below its first object (Teardown's values).
TEARDOWN_PARALLEL = "Parallel"
TEARDOWN_GARBAGE_COLLECTOR = "GarbageCollector"
TEARDOWN_MODES = (TEARDOWN_PARALLEL, TEARDOWN_GARBAGE_COLLECTOR)


@dataclass
class Teardown:
    """Our addition: whether the controller deletes the lower levels of a teardown
    itself, beside the garbage collector (Parallel), or leaves them to it
    (GarbageCollector, as upstream). docs/group-recovery.md, "Faster teardown"."""

    # A failed group's worker StatefulSet, pods and Service (default Parallel).
    group_restart: str | None = None
    # A deleted LeaderWorkerSet's leader StatefulSet, leaders, worker StatefulSets
    # and workers (default GarbageCollector: workers then terminate with their leaders
    # rather than after them, which upstream never does).
    leader_worker_set_deletion: str | None = None


@dataclass
class GroupBackoff:
    """Our addition: repeated recreations of one group by the restart policy wait
    initialDelay, then twice that, ... up to maxDelay; a group not recreated for
    resetAfter starts again with no wait. initialDelay 0s: no back-off (upstream)."""

    initial_delay: Duration | None = None
    max_delay: Duration | None = None
    reset_after: Duration | None = None


@dataclass
class LeaderWorkerSetLimits:
    """Our addition, for clusters shared by many teams: admission refuses a
    LeaderWorkerSet past these (absent or 0: no limit, as upstream). A `size` in the
    millions is valid upstream, and kube-controller-manager's StatefulSet controller
    then takes all the memory of the node it runs on."""

    # Pods in one group (spec.leaderWorkerTemplate.size).
    max_size: int | None = None
    # Pods in the whole LeaderWorkerSet (spec.replicas x size).
    max_pods: int | None = None


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
    # Alpha features of this controller by name (upstream's featureGates); an unknown
    # name is an error, an absent one is off.
    feature_gates: dict[str, bool] = field(default_factory=dict)
    client_connection: ClientConnection | None = None
    group_replacement: GroupReplacement | None = None
    group_backoff: GroupBackoff | None = None
    leader_worker_set_limits: LeaderWorkerSetLimits | None = None
    teardown: Teardown | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form (durations as Go strings, unset members left out)."""
        out = _encode(self)
        assert isinstance(out, dict)
        return out


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
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def feature_enabled(cfg: Configuration, name: str) -> bool:
    """Whether the feature gate `name` is on: alpha gates are off unless set true."""
    return cfg.feature_gates.get(name, False) is True
