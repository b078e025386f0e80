"""Every API string the project speaks: group/version, labels, annotations, env vars,
conditions, gates and enum values.

These strings are the wire contract with the upstream Go controller and with
existing manifests and tools, so nothing else in the code spells them.
"""

from typing import Final

# --- API identity -----------------------------------------------------------
GROUP: Final = "leaderworkerset.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "LeaderWorkerSet"
LIST_KIND: Final = "LeaderWorkerSetList"
PLURAL: Final = "leaderworkersets"
SINGULAR: Final = "leaderworkerset"
SHORT_NAME: Final = "lws"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"
# Provenance annotations on the generated CRD.
ANNOTATION_CRD_GENERATED_BY: Final = f"{GROUP}/generated-by"
ANNOTATION_CRD_POD_TEMPLATE_SCHEMA: Final = f"{GROUP}/pod-template-schema"

# --- Label / annotation prefix ------------------------------------------------
PREFIX: Final = "leaderworkerset.sigs.k8s.io/"

# Labels
LABEL_SET_NAME: Final = PREFIX + "name"
LABEL_TEMPLATE_REVISION_HASH: Final = PREFIX + "template-revision-hash"
LABEL_WORKER_INDEX: Final = PREFIX + "worker-index"
LABEL_GROUP_INDEX: Final = PREFIX + "group-index"
LABEL_GROUP_KEY: Final = PREFIX + "group-key"
LABEL_SUBGROUP_INDEX: Final = PREFIX + "subgroup-index"
LABEL_SUBGROUP_KEY: Final = PREFIX + "subgroup-key"

# Annotations a user sets on the LeaderWorkerSet
ANNOTATION_EXCLUSIVE_TOPOLOGY: Final = PREFIX + "exclusive-topology"
ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: Final = PREFIX + "subgroup-exclusive-topology"
ANNOTATION_RECREATE_GROUP_AFTER_START: Final = PREFIX + "experimental-recreate-group-after-start"

# Annotations the controllers write on StatefulSets and pod templates
ANNOTATION_SIZE: Final = PREFIX + "size"
ANNOTATION_REPLICAS: Final = PREFIX + "replicas"
ANNOTATION_LEADER_NAME: Final = PREFIX + "leader-name"
ANNOTATION_SUBGROUP_SIZE: Final = PREFIX + "subgroup-size"
ANNOTATION_SUBGROUP_POLICY_TYPE: Final = PREFIX + "subgroup-policy-type"
ANNOTATION_SUBDOMAIN_POLICY: Final = PREFIX + "subdomainPolicy"
ANNOTATION_LEADER_REQUESTS_TPUS: Final = PREFIX + "leader-requests-tpus"

# The restart budget (spec.leaderWorkerTemplate.maxGroupRestarts, upstream #877): the
# count on the leader pod, and per group on the LeaderWorkerSet ({group: count}, JSON) so
# that it outlives the leader.
ANNOTATION_GROUP_RESTART_COUNT: Final = PREFIX + "group-restart-count"
ANNOTATION_GROUP_RESTART_COUNTS: Final = PREFIX + "group-restart-counts"
# Our addition, on the LeaderWorkerSet: per group, its recent recreations and the last
# one's time ({group: {"recent": n, "last": RFC 3339}}), for the group back-off and for a
# Hash replacement to take over the record of the group it replaces.
ANNOTATION_GROUP_RECREATIONS: Final = PREFIX + "group-recreations"

# Gang scheduling (volcano)
ANNOTATION_POD_GROUP_NAME: Final = "scheduling.k8s.io/group-name"
ANNOTATION_VOLCANO_QUEUE_NAME: Final = "scheduling.volcano.sh/queue-name"
VOLCANO_ANNOTATION_PREFIX: Final = "volcano.sh/"

# --- Group Identity (our addition; names documented in docs/hash-mode.md) -----------
CONDITION_GROUP_READY: Final = PREFIX + "group-ready"
SCHEDULING_GATE_GROUP_REPLACEMENT: Final = PREFIX + "group-replacement"

# --- Environment variables ----------------------------------------------------
ENV_LEADER_ADDRESS: Final = "LWS_LEADER_ADDRESS"
ENV_GROUP_SIZE: Final = "LWS_GROUP_SIZE"
ENV_WORKER_INDEX: Final = "LWS_WORKER_INDEX"
LWS_ENV_NAMES: Final = (ENV_LEADER_ADDRESS, ENV_GROUP_SIZE, ENV_WORKER_INDEX)

ENV_TPU_WORKER_HOSTNAMES: Final = "TPU_WORKER_HOSTNAMES"
ENV_TPU_WORKER_ID: Final = "TPU_WORKER_ID"
ENV_TPU_NAME: Final = "TPU_NAME"
ENV_TPU_PROCESS_ADDRESSES: Final = "TPU_PROCESS_ADDRESSES"
ENV_TPU_PROCESS_PORT: Final = "TPU_PROCESS_PORT"
TPU_RESOURCE_NAME: Final = "google.com/tpu"
TPU_DEFAULT_PROCESS_PORT: Final = 8476

# --- Enum values of the spec -------------------------------------------------
RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART: Final = "RecreateGroupOnPodRestart"
RESTART_POLICY_RECREATE_GROUP_AFTER_START: Final = "RecreateGroupAfterStart"
RESTART_POLICY_NONE: Final = "None"
RESTART_POLICY_DEPRECATED_DEFAULT: Final = "Default"
RESTART_POLICIES: Final = (
    RESTART_POLICY_DEPRECATED_DEFAULT,
    RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART,
    RESTART_POLICY_RECREATE_GROUP_AFTER_START,
    RESTART_POLICY_NONE,
)

STARTUP_POLICY_LEADER_CREATED: Final = "LeaderCreated"
STARTUP_POLICY_LEADER_READY: Final = "LeaderReady"
STARTUP_POLICIES: Final = (STARTUP_POLICY_LEADER_CREATED, STARTUP_POLICY_LEADER_READY)

ROLLOUT_STRATEGY_ROLLING_UPDATE: Final = "RollingUpdate"
ROLLOUT_STRATEGY_TYPES: Final = (ROLLOUT_STRATEGY_ROLLING_UPDATE,)

SUBGROUP_POLICY_LEADER_WORKER: Final = "LeaderWorker"
SUBGROUP_POLICY_LEADER_EXCLUDED: Final = "LeaderExcluded"
SUBGROUP_POLICY_TYPES: Final = (SUBGROUP_POLICY_LEADER_WORKER, SUBGROUP_POLICY_LEADER_EXCLUDED)

SUBDOMAIN_POLICY_SHARED: Final = "Shared"
SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA: Final = "UniquePerReplica"
SUBDOMAIN_POLICIES: Final = (SUBDOMAIN_POLICY_SHARED, SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA)

GROUP_IDENTITY_ORDINAL: Final = "Ordinal"
GROUP_IDENTITY_HASH: Final = "Hash"
GROUP_IDENTITIES: Final = (GROUP_IDENTITY_ORDINAL, GROUP_IDENTITY_HASH)

GROUP_REPLACEMENT_POST_TERMINATION: Final = "PostTermination"
GROUP_REPLACEMENT_IMMEDIATE: Final = "Immediate"
GROUP_REPLACEMENT_POLICIES: Final = (
    GROUP_REPLACEMENT_POST_TERMINATION,
    GROUP_REPLACEMENT_IMMEDIATE,
)

PVC_RETENTION_RETAIN: Final = "Retain"
PVC_RETENTION_DELETE: Final = "Delete"

# --- Defaults and bounds ------------------------------------------------------
DEFAULT_REPLICAS: Final = 1
DEFAULT_SIZE: Final = 1
DEFAULT_MAX_UNAVAILABLE: Final = 1
DEFAULT_MAX_SURGE: Final = 0
DEFAULT_PARTITION: Final = 0
MAX_REPLICAS: Final = 1_000_000
MAX_INT32: Final = 2_147_483_647
# spec.scheduling.resourceClaims: the most a Kubernetes PodGroup holds (CRD maxItems).
MAX_SCHEDULING_RESOURCE_CLAIMS: Final = 4

# --- Status conditions ----------------------------------------------------------
CONDITION_AVAILABLE: Final = "Available"
CONDITION_PROGRESSING: Final = "Progressing"
CONDITION_UPDATE_IN_PROGRESS: Final = "UpdateInProgress"
# A group used up maxGroupRestarts (upstream #877).
CONDITION_FAILED: Final = "Failed"

REASON_ALL_GROUPS_READY: Final = "AllGroupsReady"
REASON_GROUPS_PROGRESSING: Final = "GroupsProgressing"
REASON_GROUPS_UPDATING: Final = "GroupsUpdating"

MESSAGE_ALL_GROUPS_READY: Final = "All replicas are ready"
MESSAGE_GROUPS_PROGRESSING: Final = "Replicas are progressing"
MESSAGE_GROUPS_UPDATING: Final = "Rolling Upgrade is in progress"
REASON_MAX_GROUP_RESTARTS_EXCEEDED: Final = "MaxGroupRestartsExceeded"
MESSAGE_MAX_GROUP_RESTARTS_EXCEEDED: Final = "One or more groups exceeded maxGroupRestarts"

# --- Event reasons -----------------------------------------------------------------
EVENT_REASON_CREATING_REVISION: Final = "CreatingRevision"
EVENT_REASON_FAILED_CREATE: Final = "FailedCreate"
EVENT_REASON_FAILED_UPDATE: Final = "FailedUpdate"
EVENT_REASON_RECREATE_GROUP: Final = "RecreateGroup"
EVENT_REPORTING_CONTROLLER: Final = "leaderworkerset"

# --- Manager identity --------------------------------------------------------------
FIELD_MANAGER: Final = "lws"
DEFAULT_OPERATOR_NAMESPACE: Final = "lws-system"
LEADER_ELECTION_LEASE_NAME: Final = "b8b2488c.x-k8s.io"
MUTATING_WEBHOOK_CONFIGURATION: Final = "lws-mutating-webhook-configuration"
VALIDATING_WEBHOOK_CONFIGURATION: Final = "lws-validating-webhook-configuration"
WEBHOOK_SERVICE_NAME: Final = "lws-webhook-service"
WEBHOOK_SECRET_NAME: Final = "lws-webhook-server-cert"

# --- Pod roles -------------------------------------------------------------------------
# worker-index label value that marks a leader pod.
LEADER_WORKER_INDEX: Final = "0"
