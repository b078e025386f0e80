"""Hypothesis strategies for whole LeaderWorkerSets and DisaggregatedSets, every spec
field included, with values valid or not (so that both admission and rejection are
exercised) and members the API does not know (which the API server prunes)."""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import strategies as st

from leaderworkerset.api.disaggregatedset import constants as ds_c
from leaderworkerset.api.leaderworkerset import constants as c
from tests.toolkit.strategies import unknown_members

JSON = dict[str, Any]
BOGUS = st.sampled_from(["", "Bogus", "leaderready", "Hash "])
T = TypeVar("T")
U = TypeVar("U")


def mostly(valid: st.SearchStrategy[T], invalid: st.SearchStrategy[U]) -> st.SearchStrategy[T | U]:
    """Nineteen draws in twenty from ``valid``: with some thirty fields each able to
    be wrong, about a fifth of the objects are valid throughout."""
    return st.one_of(*[valid] * 19, invalid)


def enum(values: tuple[str, ...]) -> st.SearchStrategy[str]:
    return mostly(st.sampled_from(values), BOGUS)


small_ints = mostly(st.integers(0, 4), st.integers(-2, -1))
counts = mostly(st.integers(0, 3), st.sampled_from([-1, 2**31, 10**7]))
int_or_percent = mostly(
    st.integers(0, 4) | st.integers(0, 100).map(lambda v: f"{v}%"),
    st.integers(-2, -1) | st.sampled_from(["", "abc", "1.5", "%", "150%", "-5%"]),
)
quantities = mostly(st.sampled_from(["1m", "5m", "10m", "1Gi"]), st.sampled_from(["-1", "abc"]))
# Printable text, and now and then anything at all (control characters included).
texts = mostly(st.text(alphabet="abcxyz-_.:/ 019", max_size=6), st.text(max_size=4))


def optional(draw: st.DrawFn, out: JSON, key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        out[key] = draw(strategy)


@st.composite
def containers(draw: st.DrawFn) -> JSON:
    name = draw(mostly(st.sampled_from(["main", "side"]), st.sampled_from(["Bad_Name", ""])))
    image = draw(mostly(st.sampled_from(["pause", "img:1"]), st.just("")))
    container: JSON = {"name": name, "image": image}
    if draw(st.booleans()):
        container["resources"] = {"requests": {"cpu": draw(quantities)}}
    if draw(st.booleans()):
        container["env"] = [{"name": "X", "value": draw(texts)}]
    if draw(st.booleans()):
        port = mostly(st.integers(1, 65535), st.sampled_from([-1, 0, 70000]))
        container["ports"] = [{"containerPort": draw(port)}]
    container.update(draw(unknown_members))
    return container


@st.composite
def pod_templates(draw: st.DrawFn) -> JSON:
    listed = draw(mostly(st.lists(containers(), min_size=1, max_size=2), st.just([])))
    # Two containers of one name are invalid: mostly keep them apart.
    if len(listed) == 2 and draw(mostly(st.just(True), st.just(False))):
        listed[1]["name"] = listed[0]["name"] + "x"
    spec: JSON = {"containers": listed}
    optional(draw, spec, "terminationGracePeriodSeconds", mostly(st.integers(0, 30), st.just(-1)))
    optional(draw, spec, "restartPolicy", mostly(st.just("Always"), st.just("Sometimes")))
    optional(draw, spec, "nodeSelector", st.just({"kubernetes.io/os": "linux"}))
    optional(draw, spec, "subdomain", mostly(st.just("mine"), st.just("Not_A_Dns")))
    spec.update(draw(unknown_members))
    template: JSON = {"spec": spec}
    if draw(st.booleans()):
        template["metadata"] = {
            "labels": {draw(mostly(st.just("app"), st.just("bad label"))): "x"},
            "annotations": {"note": draw(texts)},
        }
    return template


@st.composite
def claim_templates(draw: st.DrawFn) -> list[JSON]:
    claim = {
        "metadata": {"name": draw(mostly(st.just("data"), st.just("Bad_Claim")))},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": draw(quantities)}},
        },
    }
    return [claim]


@st.composite
def leader_worker_templates(draw: st.DrawFn) -> JSON:
    lwt: JSON = {}
    optional(draw, lwt, "workerTemplate", pod_templates())
    if draw(st.integers(0, 4)) == 0:  # the worker template is required: mostly present
        lwt.pop("workerTemplate", None)
    else:
        lwt.setdefault("workerTemplate", draw(pod_templates()))
    optional(draw, lwt, "leaderTemplate", pod_templates())
    optional(draw, lwt, "size", counts)
    optional(draw, lwt, "restartPolicy", enum(c.RESTART_POLICIES))
    if draw(st.booleans()):
        policy: JSON = {}
        optional(draw, policy, "subGroupSize", small_ints)
        optional(draw, policy, "type", enum(c.SUBGROUP_POLICY_TYPES))
        lwt["subGroupPolicy"] = policy
    if draw(st.integers(0, 4)) == 0:
        lwt["volumeClaimTemplates"] = draw(claim_templates())
    if draw(st.integers(0, 4)) == 0:
        retention = enum((c.PVC_RETENTION_RETAIN, c.PVC_RETENTION_DELETE))
        lwt["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": draw(retention),
            "whenScaled": draw(retention),
        }
    lwt.update(draw(unknown_members))
    return lwt


@st.composite
def rollout_strategies(draw: st.DrawFn) -> JSON:
    strategy: JSON = {}
    optional(draw, strategy, "type", enum(c.ROLLOUT_STRATEGY_TYPES))
    if draw(st.booleans()):
        config: JSON = {}
        optional(draw, config, "partition", small_ints)
        optional(draw, config, "maxUnavailable", int_or_percent)
        optional(draw, config, "maxSurge", int_or_percent)
        strategy["rollingUpdateConfiguration"] = config
    return strategy


@st.composite
def lws_specs(draw: st.DrawFn) -> JSON:
    spec: JSON = {"leaderWorkerTemplate": draw(leader_worker_templates())}
    optional(draw, spec, "replicas", counts)
    optional(draw, spec, "rolloutStrategy", rollout_strategies())
    optional(draw, spec, "startupPolicy", enum(c.STARTUP_POLICIES))
    if draw(st.booleans()):
        spec["networkConfig"] = {"subdomainPolicy": draw(enum(c.SUBDOMAIN_POLICIES))}
    optional(draw, spec, "groupIdentity", enum(c.GROUP_IDENTITIES))
    optional(draw, spec, "groupReplacementPolicy", enum(c.GROUP_REPLACEMENT_POLICIES))
    spec.update(draw(unknown_members))
    return spec


ANNOTATIONS = st.sampled_from(
    [
        c.ANNOTATION_EXCLUSIVE_TOPOLOGY,
        c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY,
        c.ANNOTATION_RECREATE_GROUP_AFTER_START,
    ]
)


@st.composite
def leaderworkersets(draw: st.DrawFn) -> JSON:
    metadata: JSON = {"name": draw(st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True))}
    if draw(st.integers(0, 3)) == 0:
        key = draw(ANNOTATIONS)
        value = mostly(st.just("topology.kubernetes.io/zone"), st.sampled_from(["", "Not A Key"]))
        metadata["annotations"] = {key: draw(value)}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": metadata,
        "spec": draw(lws_specs()),
    }


# --- DisaggregatedSets ----------------------------------------------------------------------

bad_role_names = st.sampled_from(["", "Prefill", "-x", "a" * 64, "with space", "prefill"])


@st.composite
def roles(draw: st.DrawFn, index: int = 0) -> JSON:
    # Distinct names but now and then (a bad name, or "prefill" twice).
    name = draw(
        mostly(
            st.just(("prefill", "decode", "encode")[index % 3] + str(index // 3 or "")),
            bad_role_names,
        )
    )
    role: JSON = {"name": name, "spec": draw(lws_specs())}
    if draw(st.integers(0, 3)) == 0:
        role["scaling"] = {"mode": draw(enum(ds_c.SCALING_MODES))}
    if draw(st.integers(0, 5)) == 0:
        role["metadata"] = {"labels": {draw(mostly(st.just("tier"), st.just("bad label"))): "x"}}
    role.update(draw(unknown_members))
    return role


@st.composite
def disaggregatedsets(draw: st.DrawFn) -> JSON:
    """Mostly two or three roles (the schema asks for 2-10, distinct names), each with a
    LeaderWorkerSet spec drawn as for LeaderWorkerSets; slices and a placement policy
    sometimes, some of either out of range."""
    count = draw(mostly(st.integers(ds_c.MIN_ROLES, 3), st.sampled_from([0, 1, 11])))
    spec: JSON = {"roles": [draw(roles(i)) for i in range(count)]}
    optional(draw, spec, "slices", mostly(st.integers(1, 3), st.sampled_from([0, -1, 10**6])))
    if draw(st.integers(0, 3)) == 0:
        policy: JSON = {"type": draw(enum(ds_c.PLACEMENT_TYPES))}
        optional(draw, policy, "topology", mostly(st.just("kubernetes.io/hostname"), BOGUS))
        spec["placementPolicy"] = policy
    spec.update(draw(unknown_members))
    return {
        "apiVersion": ds_c.API_VERSION,
        "kind": ds_c.KIND,
        "metadata": {"name": draw(st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True))},
        "spec": spec,
    }
