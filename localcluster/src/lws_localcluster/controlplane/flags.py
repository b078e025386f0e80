"""The command lines of etcd, kube-apiserver, kube-controller-manager and kube-scheduler:
pure functions of the ports, the work dir and the credentials, so that what a component
is started with can be checked without starting it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from lws_localcluster.controlplane.components import (
    APISERVER,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    Ports,
)
from lws_localcluster.controlplane.pki import ControlPlanePKI
from lws_localcluster.node_lifecycle import NodeLifecycle

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# node-ipam does nothing without --allocate-node-cidrs. The node lifecycle controller
# runs only when asked for (see node_lifecycle: the test suite's simulator cannot keep
# its leases renewed through a synchronous test). Everything else runs.
KCM_CONTROLLERS = "*,-node-ipam-controller"
KCM_CONTROLLERS_WITHOUT_NODE_LIFECYCLE = KCM_CONTROLLERS + ",-node-lifecycle-controller"

# The Workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup, pods'
# spec.schedulingGroup), off by default in v1.37, is on in every local cluster
# unless a cluster is asked for without it (ControlPlane(workload_api=False)).
# GenericWorkload (beta) serves the API and turns on, in kube-scheduler, the gang
# scheduling plugins and workload-aware preemption, and, in kube-controller-manager, the
# PodGroup protection controller (the scheduling.k8s.io/podgroup-protection finalizer);
# TopologyAwareWorkloadScheduling (alpha) adds PodGroup spec.schedulingConstraints.topology
# and the scheduler's placement of a whole group within one topology domain. Each
# component reads the gates for itself, so all three get the same list. Left off:
# CompositePodGroup (alpha, served only as v1alpha3), PodGroupPreemptionPolicy (alpha:
# a group's preemptionPolicy from its PriorityClass instead of from its pods) and
# DRAWorkloadResourceClaims (PodGroup resourceClaims); docs/gang-scheduling.md.
WORKLOAD_API_FEATURE_GATES = ("GenericWorkload", "TopologyAwareWorkloadScheduling")
WORKLOAD_API_GROUP_VERSION = "scheduling.k8s.io/v1beta1"
# The first release that serves the Workload API as WORKLOAD_API_GROUP_VERSION, the one
# the controller speaks. Before it the API is another (v1.36: v1alpha2 Workload and
# PodGroup; v1.35: v1alpha1 Workload, pods' spec.workloadRef) or none at all (v1.34),
# and the gates above are partly unknown: kube-apiserver refuses to start on an unknown
# gate or group version. A cluster of an older release runs without the Workload API.
WORKLOAD_API_SINCE = (1, 37)

# (major, minor, patch) of a release, as binaries.kubernetes_version reads it.
Version = tuple[int, int, int]


def serves_workload_api(version: Version | None) -> bool:
    """Whether a cluster of ``version`` can have the Workload API the controller speaks
    (None, a build that does not say: assumed to be the release hack/ builds)."""
    return version is None or version[:2] >= WORKLOAD_API_SINCE


def workload_api_args(component: str) -> list[str]:
    """The flags that turn the Workload API on in ``component`` (none for etcd)."""
    if component == ETCD:
        return []
    gates = "--feature-gates=" + ",".join(f"{g}=true" for g in WORKLOAD_API_FEATURE_GATES)
    if component == APISERVER:
        return [gates, f"--runtime-config={WORKLOAD_API_GROUP_VERSION}=true"]
    return [gates]


# The API server's audit log, when a cluster is asked for one (ControlPlane(audit_users=...)):
# JSON lines, one per request of the named users at Metadata level (who, verb, object
# reference, response code; no bodies), nothing for anyone else. The RBAC test reads it
# to see which of the manager's rules its requests used.
AUDIT_POLICY = "audit-policy.yaml"
AUDIT_LOG = Path("audit", "audit.log")


def audit_policy(users: Sequence[str]) -> str:
    """The audit policy (JSON, which is YAML): Metadata for `users`, None otherwise."""
    return json.dumps(
        {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            # One line per request, when it is answered (long watches also at start).
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "users": list(users)}, {"level": "None"}],
        },
        indent=2,
    )


def audit_args(workdir: Path) -> list[str]:
    return [
        f"--audit-policy-file={workdir / AUDIT_POLICY}",
        f"--audit-log-path={workdir / AUDIT_LOG}",
        "--audit-log-format=json",
        # Written as requests are answered, so a test reads what has happened so far.
        "--audit-log-mode=blocking",
        "--audit-log-maxbackup=1",
        "--audit-log-maxsize=200",
    ]


def etcd_args(ports: Ports, workdir: Path) -> list[str]:
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        "--name=lws",
        f"--data-dir={workdir / 'etcd'}",
        f"--listen-client-urls={ports.etcd_endpoint}",
        f"--advertise-client-urls={ports.etcd_endpoint}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=lws={peer}",
        # Throw-away data: fsync only costs test time.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_args(
    ports: Ports,
    workdir: Path,
    pki: ControlPlanePKI,
    *,
    host_ip: str | None = None,
    node_lifecycle: NodeLifecycle | None = None,
) -> list[str]:
    k = pki
    args = [
        f"--etcd-servers={ports.etcd_endpoint}",
        *apiserver_address_args(host_ip),
        # Otherwise open watches hold a SIGTERM for the 60s request
        # timeout; in this mode the HTTP server gets 2s after the
        # in-flight requests drain, and late clients get 429 +
        # Retry-After (which client-go retries) rather than refusals.
        "--shutdown-send-retry-after=true",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={workdir / 'certs' / 'apiserver'}",
        f"--tls-cert-file={k.crt('apiserver')}",
        f"--tls-private-key-file={k.key('apiserver')}",
        f"--client-ca-file={k.ca_crt}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={k.sa_pub}",
        f"--service-account-signing-key-file={k.sa_key}",
        "--authorization-mode=Node,RBAC",
        # As on clusters that harden owner references: a controller that
        # sets blockOwnerDeletion must be allowed to update the owner's
        # finalizers, which the RBAC test holds config/rbac to.
        "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
        "--allow-privileged=true",
        f"--requestheader-client-ca-file={k.crt('front-proxy-ca')}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={k.crt('front-proxy-client')}",
        f"--proxy-client-key-file={k.key('front-proxy-client')}",
        f"--kubelet-client-certificate={k.crt('apiserver-kubelet-client')}",
        f"--kubelet-client-key={k.key('apiserver-kubelet-client')}",
        # A real node's name is not in this machine's DNS; its address is.
        "--kubelet-preferred-address-types=InternalIP",
    ]
    if node_lifecycle is not None:
        args += node_lifecycle.apiserver_args()
    return args


def apiserver_address_args(host_ip: str | None) -> list[str]:
    if host_ip is None:
        return [
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The endpoint reconciler refuses loopback addresses; nothing
            # routes to the `kubernetes` Service here anyway.
            "--endpoint-reconciler-type=none",
        ]
    # The host address only: pods and this machine reach it, other machines do not.
    return [f"--bind-address={host_ip}", f"--advertise-address={host_ip}"]


def _client_component_args(component: str, ports: Ports, workdir: Path) -> list[str]:
    """What kube-controller-manager and kube-scheduler share: a kubeconfig of their own,
    an HTTPS port on loopback, no leader election."""
    stem = "controller-manager" if component == CONTROLLER_MANAGER else "scheduler"
    kubeconfig = workdir / f"{stem}.kubeconfig"
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.secure_port(component)}",
        f"--cert-dir={workdir / 'certs' / component}",
        "--leader-elect=false",
        # A local cluster's own figures (its client's requests, the scheduler's
        # queues) are for anyone on the machine to read, as its health is.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
    ]


def controller_manager_args(
    ports: Ports,
    workdir: Path,
    pki: ControlPlanePKI,
    *,
    node_lifecycle: NodeLifecycle | None = None,
) -> list[str]:
    args = _client_component_args(CONTROLLER_MANAGER, ports, workdir)
    controllers = KCM_CONTROLLERS_WITHOUT_NODE_LIFECYCLE
    if node_lifecycle is not None:
        controllers = KCM_CONTROLLERS
        args += node_lifecycle.controller_manager_args()
    return [
        *args,
        f"--controllers={controllers}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_crt}",
        f"--cluster-signing-cert-file={pki.ca_crt}",
        f"--cluster-signing-key-file={pki.ca_key}",
        # At the default 20 qps, minting one token per controller
        # alone takes ~5s of start-up, and tests creating many
        # pods at once would queue behind the limiter.
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--concurrent-statefulset-syncs=10",
    ]


# Where kube-scheduler's configuration file is written when it needs one.
SCHEDULER_CONFIG = "scheduler-config.yaml"


def scheduler_args(ports: Ports, workdir: Path, *, pod_max_backoff: int | None = None) -> list[str]:
    args = _client_component_args(SCHEDULER, ports, workdir)
    if pod_max_backoff is not None:
        # The file then sets what --kubeconfig would (the scheduler ignores it);
        # --leader-elect still applies.
        args.append(f"--config={workdir / SCHEDULER_CONFIG}")
    return args


def scheduler_config(workdir: Path, *, pod_max_backoff: int) -> str:
    """kube-scheduler's KubeSchedulerConfiguration (JSON, which is YAML) for a pod
    back-off of at most ``pod_max_backoff`` seconds: the back-off has no flag.

    Upstream's back-off is 1 s doubling per failed attempt up to 10 s (times the square
    root of a pod group's size for a group), and an unschedulable pod (or gang) woken by
    an event waits out what is left of it. Shorter, a pod that capacity frees is
    retried sooner; what may be scheduled, and where, is unchanged.
    """
    if pod_max_backoff < 1:
        raise ValueError(f"the scheduler's back-off is at least 1s, not {pod_max_backoff}s")
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(workdir / "scheduler.kubeconfig")},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": pod_max_backoff,
    }
    return json.dumps(config, indent=2) + "\n"


def component_args(
    component: str,
    ports: Ports,
    workdir: Path,
    pki: ControlPlanePKI,
    *,
    host_ip: str | None = None,
    node_lifecycle: NodeLifecycle | None = None,
    workload_api: bool = True,
    pod_max_backoff: int | None = None,
    audit: bool = False,
    extra_args: Mapping[str, Sequence[str]] | None = None,
    version: Version | None = None,
) -> list[str]:
    """The full argument list of ``component`` (after its binary): the Workload API's
    flags unless ``workload_api`` is false or the binaries' ``version`` predates the API,
    the API server's audit log with ``audit``,
    then extra arguments last so that they override (repeated --feature-gates flags
    merge, the last value of a gate winning)."""
    if component == ETCD:
        args = etcd_args(ports, workdir)
    elif component == APISERVER:
        args = apiserver_args(ports, workdir, pki, host_ip=host_ip, node_lifecycle=node_lifecycle)
    elif component == CONTROLLER_MANAGER:
        args = controller_manager_args(ports, workdir, pki, node_lifecycle=node_lifecycle)
    elif component == SCHEDULER:
        args = scheduler_args(ports, workdir, pod_max_backoff=pod_max_backoff)
    else:
        raise ValueError(f"no such control-plane component: {component!r}")
    if workload_api and serves_workload_api(version):
        args += workload_api_args(component)
    if audit and component == APISERVER:
        args += audit_args(workdir)
    return args + list((extra_args or {}).get(component, ()))
