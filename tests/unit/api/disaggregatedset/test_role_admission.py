"""Each role judged as the LeaderWorkerSet the controller makes of it: what the
LeaderWorkerSet webhooks would refuse is refused under the role's path, once, and an
update refuses only what it changes or newly breaks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.objects import leaderworkerset
from leaderworkerset.api.disaggregatedset.role_admission import (
    SLICE,
    configured_errors,
    creation_replicas,
    role_leaderworkersets,
    role_lws_errors,
    under_role,
)
from leaderworkerset.api.disaggregatedset.validation import validate_create
from leaderworkerset.api.errors import invalid, required
from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from tests.toolkit.disaggregatedset import (
    EXTERNAL,
    MAX_SURGE_ONE,
    cached_role,
    decoded,
    ds_object,
    role,
    worker_template,
)

JSON = dict[str, Any]
SIZE = "spec.leaderWorkerTemplate.size"
SUBGROUP_EXCLUSIVE = lws_c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY


def subgrouped(name: str, size: int, subgroup: int) -> JSON:
    template = {
        "size": size,
        "subGroupPolicy": {"subGroupSize": subgroup},
        "workerTemplate": worker_template(),
    }
    return role(name, 1, rollout=MAX_SURGE_ONE, leaderWorkerTemplate=template)


def judged(doc: JSON, old: JSON | None = None, **kwargs: Any) -> list[str]:
    ds = decoded(doc)
    return [str(e) for e in role_lws_errors(ds, decoded(old) if old else None, **kwargs)]


def all_errors(doc: JSON, **kwargs: Any) -> list[str]:
    """What the webhook reports: the set's rules, then the configured ones."""
    ds = decoded(doc)
    return [str(e) for e in [*validate_create(ds), *configured_errors(ds, None, **kwargs)]]


def test_a_valid_set_has_no_role_errors() -> None:
    assert judged(ds_object(cached_role("a", 1), cached_role("b", 2))) == []
    assert judged(ds_object(role("a", 0), role("b", 0, size=3))) == []


def test_size_zero_is_refused_under_the_role() -> None:
    errors = judged(ds_object(cached_role("a", 1), role("b", 1, size=0)))
    assert errors == [
        f"spec.roles[1].{SIZE}: Invalid value: 0: size must be equal or greater than 1"
    ]


def test_a_subgroup_size_dividing_neither_size_nor_size_minus_one_is_refused() -> None:
    errors = judged(ds_object(subgrouped("a", 5, 3), cached_role("b", 1)))
    assert errors == [
        "spec.roles[0].spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize: Invalid value: "
        "3: size or size - 1 must be divisible by subGroupSize"
    ]
    # size - 1 divisible is enough, as for a LeaderWorkerSet.
    assert judged(ds_object(subgrouped("a", 4, 3), cached_role("b", 1))) == []


def test_the_roles_annotations_and_labels_are_its_metadatas() -> None:
    doc = ds_object(cached_role("a", 1), cached_role("b", 1))
    doc["spec"]["roles"][1]["metadata"] = {
        "labels": {"bad label": "x"},
        "annotations": {SUBGROUP_EXCLUSIVE: "rack"},
    }
    errors = judged(doc)
    assert errors[0].startswith('spec.roles[1].metadata.labels: Invalid value: "bad label": ')
    assert errors[1:] == [
        f"spec.roles[1].metadata.annotations.{SUBGROUP_EXCLUSIVE}: Invalid value: "
        '"rack": cannot have subgroup-exclusive-topology without subGroupSize set'
    ]


def test_what_the_sets_rules_report_is_reported_once_in_their_words() -> None:
    doc = ds_object(
        role("a", -1, size=2, rollout=MAX_SURGE_ONE),
        role("b", 1, rollout={"rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 0}}),
    )
    errors = all_errors(doc)
    replicas = [e for e in errors if e.startswith("spec.roles[0].spec.replicas")]
    assert replicas == [
        "spec.roles[0].spec.replicas: Invalid value: -1: should be greater than or equal to 0"
    ]
    surge = "spec.roles[1].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable"
    assert len([e for e in errors if e.startswith(surge)]) == 1
    # Group Identity: the same rule, reported by the set's own check only.
    doc = ds_object(
        cached_role("a", 1, groupReplacementPolicy=lws_c.GROUP_REPLACEMENT_IMMEDIATE),
        cached_role("b", 1),
    )
    assert [e for e in all_errors(doc) if "groupReplacementPolicy" in e] == [
        e for e in map(str, validate_create(decoded(doc))) if "groupReplacementPolicy" in e
    ]
    assert judged(doc) == []


def test_names_are_left_to_the_sets_name_rules() -> None:
    long_name = "a" * 40
    doc = ds_object(cached_role("prefill", 1), cached_role(long_name[:20], 1), name=long_name)
    errors = all_errors(doc)
    assert errors and all(e.startswith("spec.roles[1].name: ") for e in errors), errors
    assert judged(doc) == []


def test_the_clusters_limits_and_scheduling_support_are_the_lws_webhooks() -> None:
    doc = ds_object(role("a", 3, size=4, rollout=MAX_SURGE_ONE), cached_role("b", 1))
    assert judged(doc) == []
    limited = judged(doc, limits=SizeLimits(max_size=3, max_pods=10))
    assert [e.split(": ")[0] for e in limited] == [
        f"spec.roles[0].{SIZE}",
        "spec.roles[0].spec.replicas",
    ]
    # An External role's LeaderWorkerSet starts at its RoleScaler's seed.
    external = ds_object(
        role("a", 5, size=4, rollout=MAX_SURGE_ONE, scaling=EXTERNAL), cached_role("b", 1)
    )
    assert judged(external, limits=SizeLimits(max_pods=4)) == []


def test_the_body_judged_is_the_controllers() -> None:
    ds = decoded(ds_object(cached_role("a", 2), role("b", 1, size=2, scaling=EXTERNAL)))
    (first, second) = role_leaderworkersets(ds, None)
    sent = leaderworkerset(ds, ds.roles[0], SLICE, compute_revision(ds.roles), 2)
    assert first.lws.name == sent["metadata"]["name"]
    assert first.lws.spec is not None and first.lws.spec.replicas == 2
    assert (first.lws.metadata or {})["ownerReferences"] == sent["metadata"]["ownerReferences"]
    # Defaulted as the mutating webhook does.
    assert first.lws.spec.startup_policy == lws_c.STARTUP_POLICY_LEADER_CREATED
    assert second.lws.spec is not None and second.lws.spec.replicas == 1
    assert [creation_replicas(r) for r in ds.roles] == [2, 1]


def test_an_error_about_what_only_the_controller_writes_names_the_role() -> None:
    ds = decoded(ds_object(cached_role("a", 1), cached_role("b", 1)))
    odd = invalid("metadata.generateName", "x", "must not be set")
    mapped = under_role(odd, 1, ds.roles[1])
    assert mapped is not None and mapped.field == "spec.roles[1]"
    assert str(mapped) == (
        'spec.roles[1]: Invalid value: "x": in the role\'s LeaderWorkerSets, '
        "metadata.generateName: must not be set"
    )
    # Left to the name rules when they speak for the role.
    assert under_role(odd, 1, ds.roles[1], {"spec.roles[1].name"}) is None
    assert under_role(invalid("metadata.name", "x", "bad"), 0, ds.roles[0]) is None
    # A set's error on a member covers the LeaderWorkerSet's below it.
    template = required("spec.leaderWorkerTemplate.workerTemplate.spec.containers")
    covered = {"spec.roles[0].spec.leaderWorkerTemplate"}
    assert under_role(template, 0, ds.roles[0], covered) is None
    assert under_role(template, 0, ds.roles[0], {"spec.roles[0]"}) is not None


# --- updates -----------------------------------------------------------------------------


def stored_with_size_zero() -> JSON:
    """A set stored before these checks: its role b's LeaderWorkerSets are all refused."""
    return ds_object(cached_role("a", 1), role("b", 1, size=0, rollout=MAX_SURGE_ONE))


def changed(doc: JSON, edit: Any) -> JSON:
    out = copy.deepcopy(doc)
    edit(out)
    return out


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: d["spec"]["roles"][1]["spec"].update(replicas=3), id="scale"),
        pytest.param(
            lambda d: d["metadata"].update(finalizers=["x/y"], labels={"a": "b"}), id="metadata"
        ),
        pytest.param(
            lambda d: d["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"][
                "spec"
            ]["containers"][0].update(image="pause:2"),
            id="another role's template",
        ),
        pytest.param(lambda d: d["spec"].update(slices=2), id="slices"),
    ],
)
def test_an_update_that_leaves_a_stored_error_as_it_was_is_admitted(edit: Any) -> None:
    old = stored_with_size_zero()
    assert judged(old) != []
    assert judged(changed(old, edit), old) == []


def test_an_update_of_the_broken_role_is_judged_afresh() -> None:
    old = stored_with_size_zero()
    image = changed(
        old,
        lambda d: d["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
            "containers"
        ][0].update(image="pause:2"),
    )
    assert judged(image, old) == [
        f"spec.roles[1].{SIZE}: Invalid value: 0: size must be equal or greater than 1"
    ]
    # As is a role added broken, or one renamed.
    added = changed(old, lambda d: d["spec"]["roles"].append(role("c", 1, size=0)))
    assert [e.split(":")[0] for e in judged(added, old)] == [f"spec.roles[2].{SIZE}"]


def test_scaling_past_a_limit_is_refused_and_back_towards_it_admitted() -> None:
    limits = SizeLimits(max_pods=8)
    old = ds_object(role("a", 3, size=4, rollout=MAX_SURGE_ONE), cached_role("b", 1))
    assert judged(old, limits=limits) != []  # stored before the limit was set
    up = changed(old, lambda d: d["spec"]["roles"][0]["spec"].update(replicas=4))
    assert [e.split(":")[0] for e in judged(up, old, limits=limits)] == [
        "spec.roles[0].spec.replicas"
    ]
    down = changed(old, lambda d: d["spec"]["roles"][0]["spec"].update(replicas=2))
    assert judged(down, old, limits=limits) == []


def test_an_error_in_the_new_object_only_is_reported() -> None:
    old = ds_object(cached_role("a", 1), cached_role("b", 1))
    broken = changed(
        old, lambda d: d["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"].update(size=0)
    )
    assert [e.split(":")[0] for e in judged(broken, old)] == [f"spec.roles[1].{SIZE}"]
