"""Hypothesis strategies for whole LeaderWorkerSets, every spec field included, with
values valid or not (so that both admission and rejection are exercised) and members
the API does not know (which the API server prunes)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from leaderworkerset.api import constants as c
from tests.unit.strategies import unknown_members

JSON = dict[str, Any]
BOGUS = st.sampled_from(["", "Bogus", "leaderready", "Hash "])


def enum(values: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Mostly a valid value, sometimes not."""
    return st.sampled_from(values) | BOGUS


small_ints = st.integers(-1, 6)
counts = small_ints | st.sampled_from([0, 2**31, 10**7])
int_or_percent = (
    st.integers(-2, 8)
    | st.integers(-10, 150).map(lambda v: f"{v}%")
    | st.sampled_from(["", "abc", "1.5", "%"])
)
quantities = st.sampled_from(["1m", "5m", "10m", "0", "-1", "abc", "1Gi"])


def optional(draw: st.DrawFn, out: JSON, key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        out[key] = draw(strategy)


@st.composite
def containers(draw: st.DrawFn) -> JSON:
    name = draw(st.sampled_from(["main", "side", "Bad_Name", ""]))
    container: JSON = {"name": name, "image": draw(st.sampled_from(["pause", "img:1", ""]))}
    if draw(st.booleans()):
        container["resources"] = {"requests": {"cpu": draw(quantities)}}
    if draw(st.booleans()):
        container["env"] = [{"name": "X", "value": draw(st.text(max_size=4))}]
    if draw(st.booleans()):
        container["ports"] = [{"containerPort": draw(st.integers(-1, 70000))}]
    container.update(draw(unknown_members))
    return container


@st.composite
def pod_templates(draw: st.DrawFn) -> JSON:
    spec: JSON = {"containers": draw(st.lists(containers(), min_size=0, max_size=2))}
    optional(draw, spec, "terminationGracePeriodSeconds", st.integers(-1, 30))
    optional(draw, spec, "restartPolicy", st.sampled_from(["Always", "Never", "Sometimes"]))
    optional(draw, spec, "nodeSelector", st.just({"kubernetes.io/os": "linux"}))
    optional(draw, spec, "subdomain", st.sampled_from(["mine", "Not_A_Dns"]))
    spec.update(draw(unknown_members))
    template: JSON = {"spec": spec}
    if draw(st.booleans()):
        template["metadata"] = {
            "labels": {draw(st.sampled_from(["app", "bad label"])): "x"},
            "annotations": {"note": draw(st.text(max_size=6))},
        }
    return template


@st.composite
def claim_templates(draw: st.DrawFn) -> list[JSON]:
    claim = {
        "metadata": {"name": draw(st.sampled_from(["data", "Bad_Claim"]))},
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
        retention = [c.PVC_RETENTION_RETAIN, c.PVC_RETENTION_DELETE, "Keep"]
        lwt["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": draw(st.sampled_from(retention)),
            "whenScaled": draw(st.sampled_from(retention)),
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
        metadata["annotations"] = {key: draw(st.sampled_from(["topology.kubernetes.io/zone", ""]))}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": metadata,
        "spec": draw(lws_specs()),
    }
