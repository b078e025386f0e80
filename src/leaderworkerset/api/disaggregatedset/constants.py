"""Every DisaggregatedSet API string and bound: group/version, kinds, labels,
annotations, enum values and limits, as upstream's v0.10.0 defines them."""

from typing import Final

# --- API identity ----------------------------------------------------------------
GROUP: Final = "disaggregatedset.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

KIND: Final = "DisaggregatedSet"
LIST_KIND: Final = "DisaggregatedSetList"
PLURAL: Final = "disaggregatedsets"
SINGULAR: Final = "disaggregatedset"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

SCALER_KIND: Final = "DisaggregatedSetRoleScaler"
SCALER_LIST_KIND: Final = "DisaggregatedSetRoleScalerList"
SCALER_PLURAL: Final = "disaggregatedsetrolescalers"
SCALER_SINGULAR: Final = "disaggregatedsetrolescaler"
SCALER_SHORT_NAME: Final = "dsrs"
SCALER_CRD_NAME: Final = f"{SCALER_PLURAL}.{GROUP}"

# --- Labels and annotations on what a DisaggregatedSet owns ----------------------
LABEL_SET_NAME: Final = f"{GROUP}/name"
LABEL_ROLE: Final = f"{GROUP}/role"
LABEL_SLICE: Final = f"{GROUP}/slice"
LABEL_REVISION: Final = f"{GROUP}/revision"
# Plain "app": upstream labels every LeaderWorkerSet and its pods <set>-<slice>-<role>.
LABEL_APP: Final = "app"
# The replicas an old revision's LeaderWorkerSet had when a rollout began.
ANNOTATION_INITIAL_REPLICAS: Final = f"{GROUP}/initial-replicas"

# --- Enum values -----------------------------------------------------------------
SCALING_STATIC: Final = "Static"
SCALING_EXTERNAL: Final = "External"
SCALING_MODES: Final = (SCALING_STATIC, SCALING_EXTERNAL)

PLACEMENT_NONE: Final = "None"
PLACEMENT_EXCLUSIVE_SLICE: Final = "ExclusiveSlice"
PLACEMENT_EXCLUSIVE_TOPOLOGY: Final = "ExclusiveTopology"
PLACEMENT_TYPES: Final = (PLACEMENT_NONE, PLACEMENT_EXCLUSIVE_SLICE, PLACEMENT_EXCLUSIVE_TOPOLOGY)

# --- Defaults and bounds -----------------------------------------------------------
MIN_ROLES: Final = 2
MAX_ROLES: Final = 10
DEFAULT_SLICES: Final = 1
MIN_SLICES: Final = 1
MAX_SLICES: Final = 100
ROLE_NAME_MAX_LENGTH: Final = 63
ROLE_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DEFAULT_SCALER_REPLICAS: Final = 0
# An object name (the RoleScaler's "<set>-<role>") holds at most this many characters.
OBJECT_NAME_MAX_LENGTH: Final = 253
# A LeaderWorkerSet name and a Service name are DNS-1035 labels.
DNS_LABEL_MAX_LENGTH: Final = 63
REVISION_LENGTH: Final = 8
SERVICE_SUFFIX: Final = "-prv"

# --- Status --------------------------------------------------------------------------
SCALER_CONDITION_READY: Final = "Ready"
SCALER_REASON_BOUND: Final = "Bound"
SCALER_MESSAGE_BOUND: Final = "Scaler bound to a live DisaggregatedSet role"

# The replicas-all-or-nothing rule of the CRD schema (CEL), as upstream words it.
REPLICAS_RULE: Final = (
    "self.roles.filter(r, !has(r.scaling) || r.scaling.mode != 'External')"
    ".all(r, !has(r.spec.replicas) || r.spec.replicas == 0) || "
    "self.roles.filter(r, !has(r.scaling) || r.scaling.mode != 'External')"
    ".all(r, has(r.spec.replicas) && r.spec.replicas > 0)"
)
REPLICAS_RULE_MESSAGE: Final = (
    "replicas must be zero for all non-External roles or non-zero for all non-External roles"
)
