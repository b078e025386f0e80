"""The pod webhook's patch, made by mutating the request's pod in place and diffing
against `snapshot_for_patch`, is the patch against a deep copy of the pod as it came,
for any pod the mutation sees, and the mutation writes nothing the snapshot shares."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.runtime.webhook import json_patch
from leaderworkerset.webhooks.pods import (
    Denied,
    PodAdmissionContext,
    mutate_pod,
    mutate_pod_in_place,
    snapshot_for_patch,
)
from tests.toolkit.strategies import unknown_members

KEY = "0123456789abcdef0123456789abcdef01234567"
LWS_ENV = (c.ENV_LEADER_ADDRESS, c.ENV_GROUP_SIZE, c.ENV_WORKER_INDEX)
TPU_ENV = (c.ENV_TPU_WORKER_HOSTNAMES, c.ENV_TPU_WORKER_ID, c.ENV_TPU_PROCESS_PORT)


def maybe(draw: st.DrawFn, out: dict[str, Any], key: str, values: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        out[key] = draw(values)


@st.composite
def containers(draw: st.DrawFn, prefix: str) -> list[Any]:
    out: list[Any] = []
    for i in range(draw(st.integers(0, 2))):
        container: dict[str, Any] = {"name": f"{prefix}{i}", "image": "img"}
        maybe(
            draw,
            container,
            "env",
            st.none()
            | st.lists(
                st.builds(
                    lambda name, value: {"name": name, "value": value},
                    st.sampled_from([*LWS_ENV, *TPU_ENV, "OTHER"]),
                    st.sampled_from(["1", "8476"]),
                ),
                max_size=3,
            ),
        )
        maybe(
            draw,
            container,
            "resources",
            st.sampled_from(
                [
                    {},
                    {"requests": {"cpu": "1"}},
                    {"limits": {c.TPU_RESOURCE_NAME: "4"}},
                    {"requests": {c.TPU_RESOURCE_NAME: "1"}, "limits": {"cpu": "2"}},
                ]
            ),
        )
        container.update(draw(unknown_members))
        out.append(container)
    return out


AFFINITY = st.sampled_from(
    [
        None,
        {},
        {"nodeAffinity": {"x": 1}},
        {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]
            },
        },
        {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}},
    ]
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    leader = draw(st.booleans())
    group = draw(st.integers(0, 3))
    labels: dict[str, Any] = {c.LABEL_SET_NAME: "test"}
    if leader:
        labels[c.LABEL_WORKER_INDEX] = "0"
    for label, values in (
        (c.LABEL_GROUP_INDEX, st.sampled_from([str(group), KEY])),
        (c.LABEL_GROUP_KEY, st.sampled_from([KEY, ""])),
        (c.LABEL_SUBGROUP_INDEX, st.sampled_from(["0", "1", ""])),
        (c.LABEL_TEMPLATE_REVISION_HASH, st.just("rev")),
    ):
        maybe(draw, labels, label, values)
    annotations: dict[str, Any] = {}
    for annotation, values in (
        (c.ANNOTATION_SIZE, st.sampled_from(["1", "3", "4", "x"])),
        (c.ANNOTATION_SUBGROUP_SIZE, st.sampled_from(["1", "2", "0"])),
        (c.ANNOTATION_SUBGROUP_POLICY_TYPE, st.sampled_from(c.SUBGROUP_POLICY_TYPES)),
        (c.ANNOTATION_EXCLUSIVE_TOPOLOGY, st.sampled_from(["zone", "rack"])),
        (c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY, st.sampled_from(["zone", "rack"])),
        (c.ANNOTATION_SUBDOMAIN_POLICY, st.sampled_from(c.SUBDOMAIN_POLICIES)),
        (c.ANNOTATION_LEADER_REQUESTS_TPUS, st.just("true")),
        (c.ANNOTATION_LEADER_NAME, st.just(f"test-{group}")),
    ):
        maybe(draw, annotations, annotation, values)
    meta: dict[str, Any] = {"namespace": "default", "labels": labels}
    if draw(st.booleans()):
        meta["annotations"] = annotations
    if leader and draw(st.booleans()):
        meta["generateName"] = "test-5d8f9c7b4-"
    else:
        meta["name"] = f"test-{group}" if leader else f"test-{group}-{draw(st.integers(1, 3))}"
    meta.update(draw(unknown_members))
    spec: dict[str, Any] = {"containers": draw(containers("c"))}
    maybe(draw, spec, "initContainers", containers("i"))
    maybe(draw, spec, "affinity", AFFINITY)
    maybe(draw, spec, "subdomain", st.sampled_from(["test", "other"]))
    maybe(draw, spec, "hostname", st.sampled_from(["test-1", "01234567"]))
    maybe(draw, spec, "readinessGates", st.sampled_from([None, [], [{"conditionType": "x"}]]))
    maybe(draw, spec, "schedulingGates", st.sampled_from([None, [], [{"name": "x"}]]))
    spec.update(draw(unknown_members))
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    pod.update(draw(unknown_members))
    return pod


contexts = st.builds(
    PodAdmissionContext,
    group_identity=st.sampled_from([c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH]),
    group_replacement_policy=st.sampled_from(c.GROUP_REPLACEMENT_POLICIES),
    gang_scheduling=st.booleans(),
    new_group_key=st.just(lambda namespace: KEY),
)


def deep_copy_patch(pod: dict[str, Any], ctx: PodAdmissionContext) -> Any:
    try:
        return json_patch(pod, mutate_pod(pod, ctx))
    except Denied as exc:
        return exc.message


def snapshot_patch(pod: dict[str, Any], ctx: PodAdmissionContext) -> tuple[Any, Any]:
    snapshot = snapshot_for_patch(pod)
    try:
        mutate_pod_in_place(pod, ctx)
    except Denied as exc:
        return exc.message, snapshot
    return json_patch(snapshot, pod), snapshot


@settings(max_examples=400)
@given(pods(), contexts)
def test_snapshot_patch_is_the_deep_copy_patch(pod: dict[str, Any], ctx: Any) -> None:
    expected = deep_copy_patch(pod, ctx)
    work = copy.deepcopy(pod)
    got, snapshot = snapshot_patch(work, ctx)
    assert got == expected
    # The snapshot still is the pod as it came: the mutation wrote nothing it shares.
    assert snapshot == pod


def test_the_snapshot_shares_what_the_mutation_leaves_alone() -> None:
    pod = {
        "metadata": {"name": "test-1-1", "labels": {"a": "1"}, "managedFields": [{"m": 1}]},
        "spec": {
            "volumes": [{"name": "v"}],
            "containers": [{"name": "c", "resources": {"requests": {}}, "env": []}],
        },
        "status": {"phase": "Pending"},
    }
    snapshot = snapshot_for_patch(pod)
    for shared in (
        lambda p: p["status"],
        lambda p: p["metadata"]["managedFields"],
        lambda p: p["spec"]["volumes"],
        lambda p: p["spec"]["containers"][0]["resources"],
    ):
        assert shared(snapshot) is shared(pod)
    for copied in (
        lambda p: p["metadata"]["labels"],
        lambda p: p["spec"]["containers"][0],
        lambda p: p["spec"]["containers"][0]["env"],
    ):
        assert copied(snapshot) is not copied(pod) and copied(snapshot) == copied(pod)
