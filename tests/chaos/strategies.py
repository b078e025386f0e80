"""Hypothesis strategies for whole LeaderWorkerSets and DisaggregatedSets, every spec
field included, with values valid or not (so that both admission and rejection are
exercised) and members the API does not know (which the API server prunes).

The field strategies of each kind are built once, in a `Fields`, not at every draw
(hypothesis checks a strategy object the first time it draws from it): with that, fewer
unknown members and eleven-role sets copied rather than drawn, drawing 10,000
DisaggregatedSets takes some 110-140 s rather than 450-570 s."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st

from leaderworkerset.api.disaggregatedset import constants as ds_c
from leaderworkerset.api.leaderworkerset import constants as c
from tests.toolkit.strategies import unknown_members

JSON = dict[str, Any]
BOGUS = st.sampled_from(["", "Bogus", "leaderready", "Hash "])
T = TypeVar("T")
U = TypeVar("U")
Pick = Callable[[st.SearchStrategy[Any], st.SearchStrategy[Any]], st.SearchStrategy[Any]]


def mostly(valid: st.SearchStrategy[T], invalid: st.SearchStrategy[U]) -> st.SearchStrategy[T | U]:
    """Meant as nineteen draws in twenty from ``valid``, but hypothesis' one_of keeps one
    copy of a repeated strategy: it draws one in two from each. The LeaderWorkerSet
    fuzzer's figures were measured with this, so it is kept for LeaderWorkerSets;
    `rarely` is what it meant to be."""
    return st.one_of(*[valid] * 19, invalid)


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True one draw in ``n``. A sampled_from, which hypothesis draws about evenly; it
    pulls `st.integers(0, n)` toward 0 (`== 0` holds about two draws in five for n=4)."""
    return st.sampled_from([False] * (n - 1) + [True])


def rarely(n: int) -> Pick:
    """A field's value from ``invalid`` one draw in ``n``, else from ``valid``."""
    wrong = one_in(n)

    def pick(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> Any:
        return wrong.flatmap(lambda w: invalid if w else valid)

    return pick


def optional(draw: st.DrawFn, out: JSON, key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        out[key] = draw(strategy)


class Fields:
    """Every field strategy of one kind's objects. ``pick(valid, invalid)`` chooses a
    field's value; ``breaks``, when given, is drawn before a cross-field rule is kept
    (true: the rule is left to chance). The few fields whose valid values depend on the
    kind (a DisaggregatedSet role forbids a partition) are arguments."""

    def __init__(
        self,
        pick: Pick,
        *,
        missing_worker: st.SearchStrategy[bool],
        breaks: st.SearchStrategy[bool] | None = None,
        sizes: st.SearchStrategy[int] | None = None,
        partitions: st.SearchStrategy[int] | None = None,
        subgroup_sizes: st.SearchStrategy[int] | None = None,
        subgroup_type_key: str = "type",
        extras: st.SearchStrategy[JSON] = unknown_members,
    ) -> None:
        self.pick = pick
        self.missing_worker = missing_worker
        self.breaks = breaks
        self.extras = extras
        self.subgroup_type_key = subgroup_type_key
        self.small_ints = pick(st.integers(0, 4), st.integers(-2, -1))
        self.counts = pick(st.integers(0, 3), st.sampled_from([-1, 2**31, 10**7]))
        self.sizes = sizes if sizes is not None else self.counts
        self.partitions = partitions if partitions is not None else self.small_ints
        self.subgroup_sizes = subgroup_sizes if subgroup_sizes is not None else self.small_ints
        self.int_or_percent = pick(
            st.integers(0, 4) | st.integers(0, 100).map(lambda v: f"{v}%"),
            st.integers(-2, -1) | st.sampled_from(["", "abc", "1.5", "%", "150%", "-5%"]),
        )
        self.quantities = pick(
            st.sampled_from(["1m", "5m", "10m", "1Gi"]), st.sampled_from(["-1", "abc"])
        )
        # Printable text, and now and then anything at all (control characters included).
        self.texts = pick(st.text(alphabet="abcxyz-_.:/ 019", max_size=6), st.text(max_size=4))
        self.container_names = pick(
            st.sampled_from(["main", "side"]), st.sampled_from(["Bad_Name", ""])
        )
        self.images = pick(st.sampled_from(["pause", "img:1"]), st.just(""))
        self.ports = pick(st.integers(1, 65535), st.sampled_from([-1, 0, 70000]))
        self.distinct = pick(st.just(True), st.just(False))
        self.grace = pick(st.integers(0, 30), st.just(-1))
        self.pod_restart = pick(st.just("Always"), st.just("Sometimes"))
        self.subdomains = pick(st.just("mine"), st.just("Not_A_Dns"))
        self.label_keys = pick(st.just("app"), st.just("bad label"))
        self.claim_names = pick(st.just("data"), st.just("Bad_Claim"))
        self._enums: dict[tuple[str, ...], st.SearchStrategy[str]] = {}
        self.retention = self.enum((c.PVC_RETENTION_RETAIN, c.PVC_RETENTION_DELETE))
        self.containers = containers(self)
        self.container_lists = pick(st.lists(self.containers, min_size=1, max_size=2), st.just([]))
        self.pod_templates = pod_templates(self)
        self.claim_templates = claim_templates(self)
        self.leader_worker_templates = leader_worker_templates(self)
        self.rollout_strategies = rollout_strategies(self)
        self.lws_specs = lws_specs(self)

    def enum(self, values: tuple[str, ...]) -> st.SearchStrategy[str]:
        if values not in self._enums:
            self._enums[values] = self.pick(st.sampled_from(values), BOGUS)
        return self._enums[values]


@st.composite
def containers(draw: st.DrawFn, f: Fields) -> JSON:
    container: JSON = {"name": draw(f.container_names), "image": draw(f.images)}
    if draw(st.booleans()):
        container["resources"] = {"requests": {"cpu": draw(f.quantities)}}
    if draw(st.booleans()):
        container["env"] = [{"name": "X", "value": draw(f.texts)}]
    if draw(st.booleans()):
        container["ports"] = [{"containerPort": draw(f.ports)}]
    container.update(draw(f.extras))
    return container


@st.composite
def pod_templates(draw: st.DrawFn, f: Fields) -> JSON:
    listed = draw(f.container_lists)
    # Two containers of one name are invalid: mostly keep them apart.
    if len(listed) == 2 and draw(f.distinct):
        listed[1]["name"] = listed[0]["name"] + "x"
    spec: JSON = {"containers": listed}
    optional(draw, spec, "terminationGracePeriodSeconds", f.grace)
    optional(draw, spec, "restartPolicy", f.pod_restart)
    optional(draw, spec, "nodeSelector", st.just({"kubernetes.io/os": "linux"}))
    optional(draw, spec, "subdomain", f.subdomains)
    spec.update(draw(f.extras))
    template: JSON = {"spec": spec}
    if draw(st.booleans()):
        template["metadata"] = {
            "labels": {draw(f.label_keys): "x"},
            "annotations": {"note": draw(f.texts)},
        }
    return template


@st.composite
def claim_templates(draw: st.DrawFn, f: Fields) -> list[JSON]:
    claim = {
        "metadata": {"name": draw(f.claim_names)},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": draw(f.quantities)}},
        },
    }
    return [claim]


@st.composite
def leader_worker_templates(draw: st.DrawFn, f: Fields) -> JSON:
    lwt: JSON = {}
    optional(draw, lwt, "workerTemplate", f.pod_templates)
    if draw(f.missing_worker):  # the worker template is required: mostly present
        lwt.pop("workerTemplate", None)
    else:
        lwt.setdefault("workerTemplate", draw(f.pod_templates))
    optional(draw, lwt, "leaderTemplate", f.pod_templates)
    optional(draw, lwt, "size", f.sizes)
    optional(draw, lwt, "restartPolicy", f.enum(c.RESTART_POLICIES))
    if draw(st.booleans()):
        policy: JSON = {}
        optional(draw, policy, "subGroupSize", f.subgroup_sizes)
        optional(draw, policy, f.subgroup_type_key, f.enum(c.SUBGROUP_POLICY_TYPES))
        lwt["subGroupPolicy"] = policy
    if draw(st.integers(0, 4)) == 0:
        lwt["volumeClaimTemplates"] = draw(f.claim_templates)
    if draw(st.integers(0, 4)) == 0:
        lwt["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": draw(f.retention),
            "whenScaled": draw(f.retention),
        }
    lwt.update(draw(f.extras))
    return lwt


@st.composite
def rollout_strategies(draw: st.DrawFn, f: Fields) -> JSON:
    strategy: JSON = {}
    optional(draw, strategy, "type", f.enum(c.ROLLOUT_STRATEGY_TYPES))
    if draw(st.booleans()):
        config: JSON = {}
        optional(draw, config, "partition", f.partitions)
        optional(draw, config, "maxUnavailable", f.int_or_percent)
        optional(draw, config, "maxSurge", f.int_or_percent)
        strategy["rollingUpdateConfiguration"] = config
    return strategy


@st.composite
def lws_specs(draw: st.DrawFn, f: Fields) -> JSON:
    spec: JSON = {"leaderWorkerTemplate": draw(f.leader_worker_templates)}
    optional(draw, spec, "replicas", f.counts)
    optional(draw, spec, "rolloutStrategy", f.rollout_strategies)
    optional(draw, spec, "startupPolicy", f.enum(c.STARTUP_POLICIES))
    if draw(st.booleans()):
        spec["networkConfig"] = {"subdomainPolicy": draw(f.enum(c.SUBDOMAIN_POLICIES))}
    optional(draw, spec, "groupIdentity", f.enum(c.GROUP_IDENTITIES))
    optional(draw, spec, "groupReplacementPolicy", f.enum(c.GROUP_REPLACEMENT_POLICIES))
    if f.breaks is not None and not draw(f.breaks):
        keep_group_identity_rules(spec)
    if f.breaks is not None and not draw(f.breaks):
        keep_some_unavailable(spec)
    spec.update(draw(f.extras))
    return spec


def keep_group_identity_rules(spec: JSON) -> None:
    """Immediate replacement needs groupIdentity Hash, and Hash no volumeClaimTemplates:
    drawn independently, one role in four broke one of them. (Hash forbids a partition
    too, which `Fields.partitions` keeps at 0 where it matters.)"""
    if spec.get("groupReplacementPolicy") == c.GROUP_REPLACEMENT_IMMEDIATE and spec.get(
        "groupIdentity"
    ) in (None, c.GROUP_IDENTITY_ORDINAL):
        spec["groupIdentity"] = c.GROUP_IDENTITY_HASH
    if spec.get("groupIdentity") == c.GROUP_IDENTITY_HASH:
        spec["leaderWorkerTemplate"].pop("volumeClaimTemplates", None)


def keep_some_unavailable(spec: JSON) -> None:
    """maxUnavailable and maxSurge must not both come to 0 groups (absent: 1 and 0, the
    schema's defaults): where both were drawn valid and may, maxUnavailable is made 1.
    A percentage of maxUnavailable rounds down, one of maxSurge up."""
    config = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")
    if not isinstance(config, dict):
        return
    unavailable, surge = config.get("maxUnavailable", 1), config.get("maxSurge", 0)
    if not (_int_or_percent_valid(unavailable) and _int_or_percent_valid(surge)):
        return
    if unavailable in (0, *(f"{v}%" for v in range(100))) and surge in (0, "0%"):
        config["maxUnavailable"] = 1


def _int_or_percent_valid(value: Any) -> bool:
    if isinstance(value, str):
        return value.endswith("%") and value[:-1].isdigit() and int(value[:-1]) <= 100
    return isinstance(value, int) and value >= 0


# --- LeaderWorkerSets -----------------------------------------------------------------------

LWS = Fields(mostly, missing_worker=st.integers(0, 4).map(lambda v: v == 0))
ANNOTATIONS = st.sampled_from(
    [
        c.ANNOTATION_EXCLUSIVE_TOPOLOGY,
        c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY,
        c.ANNOTATION_RECREATE_GROUP_AFTER_START,
    ]
)
TOPOLOGY_VALUES = mostly(st.just("topology.kubernetes.io/zone"), st.sampled_from(["", "Not A Key"]))
LWS_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)


@st.composite
def leaderworkersets(draw: st.DrawFn) -> JSON:
    metadata: JSON = {"name": draw(LWS_NAMES)}
    if draw(st.integers(0, 3)) == 0:
        key = draw(ANNOTATIONS)
        metadata["annotations"] = {key: draw(TOPOLOGY_VALUES)}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": metadata,
        "spec": draw(LWS.lws_specs),
    }


# --- DisaggregatedSets ----------------------------------------------------------------------

# A set has two or three roles of some fifteen drawn fields each, and rules across them:
# one field in FAULT_ODDS is drawn invalid, and one cross-field rule in FAULT_ODDS broken,
# so that about a fifth of the sets are valid throughout, for the CRD schema and the
# webhook (measured offline: 20 % of 10,000; with `mostly`, 0.1 %).
FAULT_ODDS = 9
DS_PICK = rarely(FAULT_ODDS)
DS_BREAKS = one_in(FAULT_ODDS)
DS = Fields(
    DS_PICK,
    missing_worker=one_in(FAULT_ODDS),
    breaks=DS_BREAKS,
    # A role is refused a size below 1, as its LeaderWorkerSets would be, and a
    # partition (a set rolls its roles out together).
    sizes=DS_PICK(st.integers(1, 3), st.sampled_from([0, -1, 2**31])),
    partitions=DS_PICK(st.just(0), st.sampled_from([-1, 1, 3])),
    subgroup_sizes=DS_PICK(st.integers(1, 4), st.integers(-2, 0)),
    subgroup_type_key="subGroupPolicyType",
    # Pruning is the LeaderWorkerSet fuzzer's to exercise: here one place in eight
    # carries unknown members, which were a third of the drawing time.
    extras=one_in(8).flatmap(lambda w: unknown_members if w else st.just({})),
)
ROLE_NAMES = [
    DS_PICK(
        st.just(name),
        # A bad name, or "prefill" twice.
        st.sampled_from(["", "Prefill", "-x", "a" * 64, "with space", "prefill"]),
    )
    for name in ("prefill", "decode", "encode")
]
ROLE_COUNTS = DS_PICK(st.integers(ds_c.MIN_ROLES, 3), st.sampled_from([0, 1, ds_c.MAX_ROLES + 1]))
SCALING_MODES = DS.enum(ds_c.SCALING_MODES)
PLACEMENT_TYPES = DS.enum(ds_c.PLACEMENT_TYPES)
TOPOLOGIES = DS_PICK(st.just("kubernetes.io/hostname"), BOGUS)
SLICES = DS_PICK(st.integers(1, 3), st.sampled_from([0, -1, 10**6]))
TIER_LABELS = DS_PICK(st.just("tier"), st.just("bad label"))
DS_NAMES = st.tuples(
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", max_size=10),
).map("".join)
SOMETIMES = one_in(4)
SELDOM = one_in(6)


@st.composite
def roles(draw: st.DrawFn, index: int = 0) -> JSON:
    role: JSON = {"name": draw(ROLE_NAMES[index]), "spec": draw(DS.lws_specs)}
    if draw(SOMETIMES):
        role["scaling"] = {"mode": draw(SCALING_MODES)}
    if draw(SELDOM):
        role["metadata"] = {"labels": {draw(TIER_LABELS): "x"}}
    role.update(draw(DS.extras))
    return role


ROLES = [roles(i) for i in range(3)]


def external(role: JSON) -> bool:
    return (role.get("scaling") or {}).get("mode") == ds_c.SCALING_EXTERNAL


def keep_replicas_rule(draw: st.DrawFn, listed: list[JSON]) -> None:
    """The CRD's CEL rule: the replicas of the roles not External all zero or all
    positive (absent is 1, the schema's default), as the first such role's. Values out
    of range are left as drawn."""
    static = [role["spec"] for role in listed if not external(role)]
    if not static:
        return
    positive = static[0].get("replicas", 1) != 0
    for spec in static[1:]:
        replicas = spec.get("replicas", 1)
        if positive and replicas == 0:
            spec["replicas"] = draw(st.integers(1, 3))
        elif not positive and replicas in (1, 2, 3):
            spec["replicas"] = 0


@st.composite
def disaggregatedsets(draw: st.DrawFn) -> JSON:
    """Mostly two or three roles (the schema asks for 2-10, distinct names), each with a
    LeaderWorkerSet spec drawn as for LeaderWorkerSets but far less often invalid; slices
    and a placement policy sometimes, some of either out of range; the rules across
    roles and fields mostly kept."""
    count = draw(ROLE_COUNTS)
    listed = [draw(ROLES[i]) for i in range(min(count, 3))]
    # Eleven roles are there to be refused: copies of the three drawn, renamed.
    for i in range(3, count):
        listed.append({**copy.deepcopy(listed[i % 3]), "name": f"role{i}"})
    if not draw(DS_BREAKS):
        keep_replicas_rule(draw, listed)
    spec: JSON = {"roles": listed}
    if draw(st.booleans()):
        # slices > 1 with an External role is refused: mostly 1 then.
        slices = draw(SLICES)
        if any(external(role) for role in listed) and not draw(DS_BREAKS):
            slices = 1 if slices in (2, 3) else slices
        spec["slices"] = slices
    if draw(SOMETIMES):
        policy: JSON = {"type": draw(PLACEMENT_TYPES)}
        # A topology is required unless the type is None: mostly given then.
        if policy["type"] != ds_c.PLACEMENT_NONE and not draw(DS_BREAKS):
            policy["topology"] = draw(TOPOLOGIES)
        else:
            optional(draw, policy, "topology", TOPOLOGIES)
        spec["placementPolicy"] = policy
    spec.update(draw(DS.extras))
    return {
        "apiVersion": ds_c.API_VERSION,
        "kind": ds_c.KIND,
        "metadata": {"name": draw(DS_NAMES)},
        "spec": spec,
    }
