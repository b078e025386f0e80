"""Run etcd, kube-apiserver, kube-controller-manager and kube-scheduler locally.

Each component is a child process in its own process group, with its log in
``<workdir>/logs``. Children are asked to die with the thread that started
them (``PR_SET_PDEATHSIG``), so even a SIGKILLed test run leaks no process;
start a control plane from a thread that lives as long as it should (the main
thread, normally). A running cluster is recorded in ``<workdir>/state.json`` so
that another process (``lws dev status/down``) can find and stop it. Every cluster
serves and schedules with the Workload API (scheduling.k8s.io/v1beta1 Workload and
PodGroup) unless started with ``ControlPlane(workload_api=False)``.

Modules: ``plane`` (:class:`ControlPlane`, the facade the rest of the package and the
tests use), ``components`` (names, ports, paths, errors), ``flags`` (each component's
command line, pure functions), ``processes`` (starting, waiting for, stopping and
reviving the child processes), ``readiness`` (health endpoints, the API server's
/readyz) and ``pki`` (credentials and kubeconfigs). The names below are the package's
interface; import them from here.
"""

from lws_localcluster.controlplane.components import (
    APISERVER,
    COMPONENTS,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    STATE_FILE,
    ControlPlaneError,
    Ports,
    cache_root,
    default_workdir,
)
from lws_localcluster.controlplane.flags import (
    KCM_CONTROLLERS,
    KCM_CONTROLLERS_WITHOUT_NODE_LIFECYCLE,
    SERVICE_CLUSTER_IP_RANGE,
    WORKLOAD_API_FEATURE_GATES,
    WORKLOAD_API_GROUP_VERSION,
)
from lws_localcluster.controlplane.pki import kubeconfig_text
from lws_localcluster.controlplane.plane import ControlPlane, running
from lws_localcluster.controlplane.processes import (
    Revived,
    die_with_parent,
    pid_alive,
    pid_belongs_to,
)

__all__ = [
    "APISERVER",
    "COMPONENTS",
    "CONTROLLER_MANAGER",
    "ETCD",
    "KCM_CONTROLLERS",
    "KCM_CONTROLLERS_WITHOUT_NODE_LIFECYCLE",
    "SCHEDULER",
    "SERVICE_CLUSTER_IP_RANGE",
    "STATE_FILE",
    "WORKLOAD_API_FEATURE_GATES",
    "WORKLOAD_API_GROUP_VERSION",
    "ControlPlane",
    "ControlPlaneError",
    "Ports",
    "Revived",
    "cache_root",
    "default_workdir",
    "die_with_parent",
    "kubeconfig_text",
    "pid_alive",
    "pid_belongs_to",
    "running",
]
