"""Hypothesis strategies for LeaderWorkerSet JSON, including members we do not know."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
unknown_members = st.dictionaries(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8).map(lambda s: "x" + s),
    json_values,
    max_size=2,
)
int_or_percent = st.integers(0, 12) | st.integers(0, 150).map(lambda v: f"{v}%")


def _optional(
    draw: st.DrawFn, key: str, strategy: st.SearchStrategy[Any], out: dict[str, Any]
) -> None:
    if draw(st.booleans()):
        out[key] = draw(strategy)


@st.composite
def pod_templates(draw: st.DrawFn) -> dict[str, Any]:
    container: dict[str, Any] = {"name": draw(st.sampled_from(["a", "b", "main"])), "image": "img"}
    container.update(draw(unknown_members))
    spec: dict[str, Any] = {"containers": [container]}
    spec.update(draw(unknown_members))
    template: dict[str, Any] = {"spec": spec}
    if draw(st.booleans()):
        template["metadata"] = {"labels": {"app": draw(st.sampled_from(["x", "y"]))}}
    template.update(draw(unknown_members))
    return template


@st.composite
def lws_specs(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(1, 10))
    lwt: dict[str, Any] = {"workerTemplate": draw(pod_templates())}
    _optional(draw, "size", st.just(size), lwt)
    _optional(draw, "leaderTemplate", pod_templates(), lwt)
    _optional(draw, "restartPolicy", st.sampled_from(c.RESTART_POLICIES), lwt)
    if draw(st.booleans()):
        policy: dict[str, Any] = {"subGroupSize": draw(st.integers(1, size))}
        _optional(draw, "subGroupPolicyType", st.sampled_from(c.SUBGROUP_POLICY_TYPES), policy)
        lwt["subGroupPolicy"] = policy
    lwt.update(draw(unknown_members))
    spec: dict[str, Any] = {"leaderWorkerTemplate": lwt}
    _optional(draw, "replicas", st.integers(0, 20), spec)
    _optional(draw, "startupPolicy", st.sampled_from(c.STARTUP_POLICIES), spec)
    _optional(draw, "groupIdentity", st.sampled_from(c.GROUP_IDENTITIES), spec)
    _optional(draw, "groupReplacementPolicy", st.sampled_from(c.GROUP_REPLACEMENT_POLICIES), spec)
    if draw(st.booleans()):
        spec["networkConfig"] = {"subdomainPolicy": draw(st.sampled_from(c.SUBDOMAIN_POLICIES))}
    if draw(st.booleans()):
        config: dict[str, Any] = {}
        _optional(draw, "maxUnavailable", int_or_percent, config)
        _optional(draw, "maxSurge", int_or_percent, config)
        _optional(draw, "partition", st.integers(0, 5), config)
        spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": config}
    spec.update(draw(unknown_members))
    return spec


@st.composite
def lws_objects(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": draw(st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True))},
        "spec": draw(lws_specs()),
    }
