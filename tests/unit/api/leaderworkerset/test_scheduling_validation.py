"""spec.scheduling (upstream #982): each admission rule refused with its field path and
message as upstream words it, and the manifests #982 admits admitted."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.scheduling import (
    ANNOTATION_GROUP_TEMPLATE_NAME,
    ANNOTATION_PARENT_COMPOSITE_POD_GROUP,
    SchedulingSupport,
)
from leaderworkerset.api.leaderworkerset.scheduling_validation import (
    is_gang,
    validate_scheduling,
)
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import validate_create, validate_update
from leaderworkerset.api.schema_check import check_against_schema
from tests.toolkit.lws import decoded, defaulted, defaulted_json, leaderworkerset

JSON = dict[str, Any]

KUBERNETES = SchedulingSupport(provider="kubernetes", feature_gate=True, api_available=True)
VOLCANO = SchedulingSupport(provider="volcano", feature_gate=True)

# The KEP-666 example (keps/666-gang-scheduling-in-lws), with minCount written out: the
# CRD requires it in a `gang` block (upstream's defaulting webhook would write 0 for an
# omitted one, which its own minCount rule then refuses).
KEP_EXAMPLE = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: inference
  namespace: default
spec:
  replicas: 4
  scheduling:
    schedulingPolicy:
      gang:
        minCount: 2
    disruptionMode:
      all: {}
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        priorityClassName: inference-high
        containers:
        - name: leader
          image: example/leader:latest
    workerTemplate:
      spec:
        priorityClassName: inference-high
        containers:
        - name: worker
          image: example/worker:latest
"""


def kep_example() -> JSON:
    data: JSON = yaml.safe_load(KEP_EXAMPLE)
    return data


def scheduled(scheduling: JSON | None = None, *, size: int = 3, **spec: Any) -> JSON:
    """A LeaderWorkerSet of `size` pods per group with `spec.scheduling` (empty unless
    given), its worker template of one priority class, as upstream's test object."""
    return leaderworkerset(
        "test-lws",
        size=size,
        pod_spec={"priorityClassName": "high-priority"},
        scheduling={} if scheduling is None else scheduling,
        **spec,
    )


def errors(
    data: JSON, support: SchedulingSupport = KUBERNETES, old: JSON | None = None
) -> list[str]:
    previous = defaulted(old) if old is not None else None
    return [str(e) for e in validate_scheduling(defaulted(data), previous, support)]


def annotate(data: JSON, **annotations: str) -> JSON:
    data["metadata"].setdefault("annotations", {}).update(annotations)
    return data


def leader_template(data: JSON, pod_spec: JSON) -> JSON:
    data["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {"spec": pod_spec}
    return data


def worker_spec(data: JSON) -> JSON:
    spec: JSON = data["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    return spec


# --- What #982 admits ---------------------------------------------------------------------


def test_the_kep_example_is_admitted() -> None:
    data = kep_example()
    assert check_against_schema(data).unknown == []
    assert validate_create(defaulted(data)) == []
    assert errors(data) == []


def test_empty_scheduling_is_a_replica_sized_gang() -> None:
    assert errors(scheduled()) == []
    lws = defaulted(scheduled())
    assert lws.spec is not None and lws.spec.scheduling is not None
    assert is_gang(lws.spec.scheduling)


def test_basic_with_every_block_the_kubernetes_provider_supports() -> None:
    data = scheduled(
        {
            "schedulingPolicy": {"basic": {}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "disruptionMode": {"single": {}},
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu.template"}],
        }
    )
    worker_spec(data)["resourceClaims"] = [
        {"name": "gpus", "resourceClaimTemplateName": "gpu.template"}
    ]
    assert errors(data) == []
    lws = defaulted(data)
    assert lws.spec is not None and lws.spec.scheduling is not None
    assert not is_gang(lws.spec.scheduling)


def test_validate_scheduling_takes_the_stored_json_too() -> None:
    bad = scheduled({"schedulingPolicy": {"gang": {"minCount": 2}}})
    typed = validate_scheduling(defaulted(bad), None, KUBERNETES)
    assert validate_scheduling(defaulted_json(bad), None, KUBERNETES) == typed != []


def test_an_object_that_never_had_scheduling_is_left_alone_whatever_the_support() -> None:
    plain = leaderworkerset("plain")
    for support in (SchedulingSupport(), KUBERNETES, VOLCANO):
        assert errors(plain, support) == []
        assert errors(plain, support, old=plain) == []


# --- The controller's support ---------------------------------------------------------------


def test_the_feature_gate_is_required() -> None:
    support = SchedulingSupport(provider="kubernetes", feature_gate=False)
    assert errors(scheduled(), support) == [
        "spec.scheduling: Forbidden: requires the WorkloadAwareScheduling feature gate"
    ]


def test_an_unconfigured_controller_refuses_scheduling() -> None:
    assert errors(scheduled(), SchedulingSupport()) == [
        "spec.scheduling: Forbidden: requires the WorkloadAwareScheduling feature gate",
        "spec.scheduling: Required value: requires a configured scheduler provider",
    ]


def test_an_unknown_provider_is_not_supported() -> None:
    support = SchedulingSupport(provider="kueue", feature_gate=True)
    assert errors(scheduled(), support) == [
        'spec.scheduling: Unsupported value: "kueue": supported values: "kubernetes", "volcano"'
    ]


def test_the_scheduling_api_must_be_served() -> None:
    support = SchedulingSupport(provider="kubernetes", feature_gate=True, api_available=False)
    found = errors(scheduled(), support)
    assert len(found) == 2
    for kind, error in zip(("Workload", "PodGroup"), found, strict=True):
        assert error.startswith(
            f"spec.scheduling: Forbidden: scheduling.k8s.io/v1beta1 {kind} API is not available"
        )
        assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in error
        assert "GenericWorkload" in error
    # Only the kubernetes provider needs it.
    volcano = SchedulingSupport(provider="volcano", feature_gate=True, api_available=False)
    assert errors(scheduled(), volcano) == []


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (
            {"schedulingPolicy": {"basic": {}}},
            "spec.scheduling.schedulingPolicy: Forbidden: "
            "the Volcano provider does not support Basic policy",
        ),
        (
            {"schedulingConstraints": {"topology": [{"key": "rack"}]}},
            "spec.scheduling.schedulingConstraints: Forbidden: "
            "the Volcano provider does not support typed scheduling constraints",
        ),
        (
            {"disruptionMode": {"all": {}}},
            "spec.scheduling.disruptionMode: Forbidden: "
            "the Volcano provider does not support typed disruption mode",
        ),
        (
            {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]},
            "spec.scheduling.resourceClaims: Forbidden: "
            "the Volcano provider does not support shared resource claims",
        ),
    ],
    ids=["basic", "constraints", "disruption", "claims"],
)
def test_the_volcano_provider_refuses_what_it_cannot_express(block: JSON, error: str) -> None:
    data = scheduled(block)
    if "resourceClaims" in block:
        worker_spec(data)["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    assert errors(data, VOLCANO) == [error]
    assert error not in errors(data, KUBERNETES)


def test_volcano_admits_a_replica_sized_gang_and_skips_kubernetes_block_checks() -> None:
    assert errors(scheduled({"schedulingPolicy": {"gang": {"minCount": 3}}}), VOLCANO) == []
    # Upstream runs Kubernetes' declarative checks for its own provider only.
    assert errors(scheduled({"schedulingPolicy": {}}), VOLCANO) == []


# --- Creation only --------------------------------------------------------------------------


def test_scheduling_cannot_be_removed() -> None:
    old = scheduled()
    new = copy.deepcopy(old)
    del new["spec"]["scheduling"]
    expected = ["spec.scheduling: Forbidden: cannot remove scheduling after creation"]
    assert errors(new, old=old) == expected
    # Whatever the support: the removal is what is refused.
    assert errors(new, SchedulingSupport(), old=old) == expected


def test_scheduling_cannot_be_added() -> None:
    old = leaderworkerset("test-lws", size=3, pod_spec={"priorityClassName": "high-priority"})
    assert errors(scheduled(), old=old) == [
        "spec.scheduling: Forbidden: cannot add scheduling after creation"
    ]


def test_an_unchanged_update_is_admitted() -> None:
    data = kep_example()
    assert errors(data, old=data) == []


def test_a_size_change_must_keep_an_explicit_min_count_equal() -> None:
    old = scheduled({"schedulingPolicy": {"gang": {"minCount": 3}}})
    bigger = copy.deepcopy(old)
    bigger["spec"]["leaderWorkerTemplate"]["size"] = 4
    assert errors(bigger, old=old) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 3: "
        "must equal leaderWorkerTemplate.size"
    ]
    bigger["spec"]["scheduling"]["schedulingPolicy"]["gang"]["minCount"] = 4
    assert errors(bigger, old=old) == []
    # An omitted minCount follows the size.
    implicit = scheduled()
    grown = copy.deepcopy(implicit)
    grown["spec"]["leaderWorkerTemplate"]["size"] = 5
    assert errors(grown, old=implicit) == []


def test_basic_cannot_be_unset_once_stored() -> None:
    """The CRD's CEL rule, which the API server checks before the webhooks."""
    old = scheduled({"schedulingPolicy": {"basic": {}}})
    new = scheduled({"schedulingPolicy": {"gang": {"minCount": 3}}})
    refused = [str(e) for e in validate_update(defaulted(new), defaulted(old))]
    assert refused == [
        'spec.scheduling.schedulingPolicy: Invalid value: "object": '
        "field basic is immutable once set"
    ]
    # The rule binds basic only, as upstream's CRD: gang may become basic.
    assert validate_update(defaulted(old), defaulted(new)) == []


# --- Kubernetes' checks of its building blocks ---------------------------------------------


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (
            {"schedulingPolicy": {}},
            'spec.scheduling.schedulingPolicy: Invalid value: "": '
            "must specify one of: `basic`, `gang`",
        ),
        (
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 3}}},
            'spec.scheduling.schedulingPolicy: Invalid value: "{basic, gang}": '
            "must specify exactly one of: `basic`, `gang`",
        ),
        (
            {"disruptionMode": {}},
            'spec.scheduling.disruptionMode: Invalid value: "": '
            "must specify one of: `single`, `all`",
        ),
        (
            {"disruptionMode": {"single": {}, "all": {}}},
            'spec.scheduling.disruptionMode: Invalid value: "{single, all}": '
            "must specify exactly one of: `single`, `all`",
        ),
    ],
    ids=["empty-policy", "two-policies", "empty-disruption", "two-disruptions"],
)
def test_unions_hold_exactly_one_member(block: JSON, error: str) -> None:
    assert errors(scheduled(block)) == [error]


def test_claims_name_exactly_one_source() -> None:
    data = scheduled(
        {
            "resourceClaims": [
                {"name": "none"},
                {"name": "both", "resourceClaimName": "a", "resourceClaimTemplateName": "b"},
            ]
        }
    )
    worker_spec(data)["resourceClaims"] = [
        {"name": "none"},
        {"name": "both", "resourceClaimName": "a", "resourceClaimTemplateName": "b"},
    ]
    assert errors(data) == [
        'spec.scheduling.resourceClaims[0]: Invalid value: "": '
        "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
        'spec.scheduling.resourceClaims[1]: Invalid value: "{resourceClaimName, '
        'resourceClaimTemplateName}": must specify exactly one of: `resourceClaimName`, '
        "`resourceClaimTemplateName`",
    ]


def test_min_count_must_be_positive_and_the_size() -> None:
    assert errors(scheduled({"schedulingPolicy": {"gang": {"minCount": 0}}})) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 0: "
        "must be greater than or equal to 1",
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 0: "
        "must equal leaderWorkerTemplate.size",
    ]
    assert errors(scheduled({"schedulingPolicy": {"gang": {"minCount": 2}}})) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 2: "
        "must equal leaderWorkerTemplate.size"
    ]
    assert errors(scheduled({"schedulingPolicy": {"gang": {"minCount": 3}}})) == []


def test_a_gang_without_min_count_is_refused_by_the_schema() -> None:
    found = [
        str(e) for e in validate_create(defaulted(scheduled({"schedulingPolicy": {"gang": {}}})))
    ]
    assert found == ["spec.scheduling.schedulingPolicy.gang.minCount: Required value"]


def test_at_most_one_topology_constraint() -> None:
    block = {"schedulingConstraints": {"topology": [{"key": "rack"}, {"key": "zone"}]}}
    assert errors(scheduled(block)) == [
        "spec.scheduling.schedulingConstraints.topology: Too many: 2: must have at most 1 item"
    ]


def test_a_topology_key_is_a_label_key() -> None:
    bad = scheduled({"schedulingConstraints": {"topology": [{"key": "not a/label/key"}]}})
    (error,) = errors(bad)
    assert error.startswith(
        'spec.scheduling.schedulingConstraints.topology[0].key: Invalid value: "not a/label/key": '
        "a valid label key must consist of alphanumeric characters"
    )
    empty = scheduled({"schedulingConstraints": {"topology": [{"key": ""}]}})
    assert errors(empty) == [
        "spec.scheduling.schedulingConstraints.topology[0].key: Required value"
    ]
    spaced = scheduled({"schedulingConstraints": {"topology": [{"key": "example.com/my key"}]}})
    (error,) = errors(spaced)
    assert 'Invalid value: "example.com/my key": name part must consist of' in error
    no_key = scheduled({"schedulingConstraints": {"topology": [{}]}})
    assert [str(e) for e in validate_create(defaulted(no_key))] == [
        "spec.scheduling.schedulingConstraints.topology[0].key: Required value"
    ]


def test_claim_names_are_dns_labels_and_sources_dns_subdomains() -> None:
    claims = [
        {"name": "gpu.a", "resourceClaimName": "ok"},
        {"name": "GPU", "resourceClaimTemplateName": "Bad_Template"},
    ]
    data = scheduled({"resourceClaims": claims})
    worker_spec(data)["resourceClaims"] = copy.deepcopy(claims)
    found = errors(data)
    assert (
        found[0]
        == 'spec.scheduling.resourceClaims[0].name: Invalid value: "gpu.a": must not contain dots'
    )
    assert found[1].startswith(
        'spec.scheduling.resourceClaims[1].name: Invalid value: "GPU": '
        "a lowercase RFC 1123 label must consist of"
    )
    assert found[2].startswith(
        "spec.scheduling.resourceClaims[1].resourceClaimTemplateName: "
        'Invalid value: "Bad_Template": a lowercase RFC 1123 subdomain must consist of'
    )
    assert len(found) == 3


def test_basic_cannot_be_disrupted_all_together() -> None:
    block = {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}
    assert errors(scheduled(block)) == [
        'spec.scheduling.disruptionMode: Invalid value: "": '
        "the disruptionMode `all` is not supported with the Basic scheduling policy"
    ]
    assert errors(scheduled({**block, "disruptionMode": {"single": {}}})) == []
    # A gang may: the KEP example.
    assert errors(scheduled({"disruptionMode": {"all": {}}})) == []


def test_unchanged_blocks_are_not_checked_again_on_update() -> None:
    """An object stored while another provider served it (Volcano skips these checks)
    can still be updated as long as the offending block is left as it was."""
    old = scheduled({"schedulingPolicy": {}, "disruptionMode": {}})
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    assert errors(new, old=old) == []
    assert errors(new) != []  # on create they are refused
    new["spec"]["scheduling"]["disruptionMode"] = {"single": {}, "all": {}}
    assert errors(new, old=old) == [
        'spec.scheduling.disruptionMode: Invalid value: "{single, all}": '
        "must specify exactly one of: `single`, `all`"
    ]


def test_resource_claims_at_most_four_and_unique() -> None:
    claims = [{"name": f"c{i}", "resourceClaimName": f"c{i}"} for i in range(5)]
    found = [str(e) for e in validate_create(defaulted(scheduled({"resourceClaims": claims})))]
    assert found == ["spec.scheduling.resourceClaims: Too many: 5: must have at most 4 items"]
    twice = [{"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"}]
    found = [str(e) for e in validate_create(defaulted(scheduled({"resourceClaims": twice})))]
    assert found == ['spec.scheduling.resourceClaims[1]: Duplicate value: {"name": "gpu"}']


# --- LeaderWorkerSet rules ----------------------------------------------------------------


def test_a_gang_cannot_wait_for_its_leader() -> None:
    data = scheduled(startupPolicy=c.STARTUP_POLICY_LEADER_READY)
    assert errors(data) == [
        "spec.scheduling.schedulingPolicy.gang: Forbidden: "
        "gang scheduling is incompatible with startupPolicy LeaderReady"
    ]
    basic = scheduled({"schedulingPolicy": {"basic": {}}}, startupPolicy="LeaderReady")
    assert errors(basic) == []


def test_a_gang_or_topology_constraints_exclude_exclusive_placement() -> None:
    exclusive = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "topology.kubernetes.io/zone"}
    assert errors(annotate(scheduled(), **exclusive)) == [
        "spec.scheduling: Forbidden: "
        "gang scheduling cannot be combined with exclusive topology in alpha"
    ]
    constrained = scheduled(
        {
            "schedulingPolicy": {"basic": {}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
        }
    )
    assert errors(annotate(constrained, **exclusive)) == [
        "spec.scheduling.schedulingConstraints: Forbidden: "
        "workload topology constraints cannot be combined with exclusive topology in alpha"
    ]
    basic = scheduled({"schedulingPolicy": {"basic": {}}})
    assert errors(annotate(basic, **exclusive)) == []


def test_leader_and_workers_share_one_priority() -> None:
    data = leader_template(scheduled(), {"priorityClassName": "other-priority", "containers": []})
    assert errors(data) == [
        "spec.scheduling: Invalid value: null: "
        "leader and worker templates must use the same priorityClassName"
    ]
    # Without a leaderTemplate, the leaders are the workers' template.
    assert errors(scheduled()) == []
    unset = leaderworkerset("x", scheduling={})
    assert errors(leader_template(unset, {"containers": []})) == []


def test_templates_must_not_name_their_own_scheduling_group() -> None:
    data = scheduled()
    worker_spec(data)["schedulingGroup"] = {"podGroupName": "mine"}
    assert errors(data) == [
        "spec.scheduling: Forbidden: managed pod templates must not set spec.schedulingGroup"
    ]


def test_each_shared_claim_is_referenced_by_both_templates() -> None:
    claim = {"name": "gpu", "resourceClaimTemplateName": "gpus"}
    data = scheduled({"resourceClaims": [claim]})
    worker_spec(data)["resourceClaims"] = [dict(claim)]
    leader_template(
        data, {"priorityClassName": "high-priority", "containers": [], "resourceClaims": []}
    )
    assert errors(data) == [
        'spec.scheduling.resourceClaims[0]: Invalid value: "gpu": '
        "must have a matching reference in leaderTemplate.spec.resourceClaims"
    ]
    # The same name from another source is no match.
    data["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimName": "gpus"}
    ]
    assert len(errors(data)) == 1
    data["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["resourceClaims"] = [dict(claim)]
    assert errors(data) == []
    worker_spec(data)["resourceClaims"] = []
    assert errors(data) == [
        'spec.scheduling.resourceClaims[0]: Invalid value: "gpu": '
        "must have a matching reference in workerTemplate.spec.resourceClaims"
    ]


# --- Delegation to a parent Workload (KEP-6089) ----------------------------------------------

TEMPLATE = f"metadata.annotations[{ANNOTATION_GROUP_TEMPLATE_NAME}]"
PARENT = f"metadata.annotations[{ANNOTATION_PARENT_COMPOSITE_POD_GROUP}]"
CONTROLLER = {
    "apiVersion": "apps.example.com/v1",
    "kind": "Job",
    "name": "parent",
    "uid": "u",
    "controller": True,
}


def delegated(**annotations: str) -> JSON:
    data = scheduled()
    data["metadata"]["ownerReferences"] = [CONTROLLER]
    return annotate(data, **annotations)


def test_a_delegated_lws_names_its_parent_and_has_a_controller() -> None:
    ok = delegated(
        **{ANNOTATION_GROUP_TEMPLATE_NAME: "workers", ANNOTATION_PARENT_COMPOSITE_POD_GROUP: "all"}
    )
    assert errors(ok) == []
    assert errors(delegated(**{ANNOTATION_PARENT_COMPOSITE_POD_GROUP: "all"})) == [
        f"{PARENT}: Forbidden: requires the group-template-name delegation annotation"
    ]
    assert errors(
        delegated(**{ANNOTATION_GROUP_TEMPLATE_NAME: "", ANNOTATION_PARENT_COMPOSITE_POD_GROUP: ""})
    ) == [
        f"{TEMPLATE}: Required value: must name a parent Workload template",
        f"{PARENT}: Required value: must name a parent CompositePodGroup",
    ]
    orphan = delegated(**{ANNOTATION_GROUP_TEMPLATE_NAME: "workers"})
    orphan["metadata"]["ownerReferences"] = [{**CONTROLLER, "controller": False}]
    assert errors(orphan) == [
        f"{TEMPLATE}: Forbidden: delegated scheduling requires a controller owner"
    ]
    # Delegation is the kubernetes provider's.
    assert errors(orphan, VOLCANO) == []


# --- The model ------------------------------------------------------------------------------


def test_the_model_round_trips_and_keeps_unknown_members() -> None:
    data = kep_example()
    data["spec"]["scheduling"]["futureBlock"] = {"x": 1}
    data["spec"]["scheduling"]["disruptionMode"]["all"] = {"reason": "kept"}
    data["spec"]["scheduling"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimName": "gpus", "future": True}
    ]
    lws = decoded(data)
    assert lws.to_json() == data
    config = lws.spec.scheduling if lws.spec else None
    assert config is not None and config.scheduling_policy is not None
    assert config.scheduling_policy.gang is not None
    assert config.scheduling_policy.gang.min_count == 2
    assert config.disruption_mode is not None and config.disruption_mode.all_ is not None
    assert config.resource_claims is not None
    assert config.resource_claims[0].resource_claim_name == "gpus"


def test_defaulting_writes_nothing_into_scheduling() -> None:
    for block in ({}, {"schedulingPolicy": {"gang": {}}}, kep_example()["spec"]["scheduling"]):
        data = scheduled(copy.deepcopy(block))
        assert defaulted_json(data)["spec"]["scheduling"] == block
    assert "scheduling" not in defaulted_json(leaderworkerset("plain"))["spec"]


def test_scheduling_members_of_the_wrong_type_are_decoding_errors() -> None:
    data = scheduled({"schedulingPolicy": {"gang": {"minCount": "three"}}, "resourceClaims": {}})
    _, found = LeaderWorkerSet.from_json(data)
    assert [e.field for e in found] == [
        "spec.scheduling.schedulingPolicy.gang.minCount",
        "spec.scheduling.resourceClaims",
    ]
