"""Every validation rule: one rejected case with its field path, one accepted case."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from leaderworkerset.api.errors import ErrorType, FieldError
from leaderworkerset.api.leaderworkerset.validation import (
    validate_create,
    validate_update,
    warnings_for,
)
from tests.toolkit.lws import decoded, defaulted, lws_json, rolling, template

Mutation = Callable[[dict[str, Any]], object]

SIZE = "spec.leaderWorkerTemplate.size"
SGS = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
RU = "spec.rolloutStrategy.rollingUpdateConfiguration"


def errors_of(data: dict[str, Any]) -> list[FieldError]:
    return validate_create(defaulted(data))


def set_template(**values: Any) -> Mutation:
    return lambda d: template(d).update(values)


def set_spec(**values: Any) -> Mutation:
    return lambda d: d["spec"].update(values)


def set_name(name: str) -> Mutation:
    return lambda d: d["metadata"].update(name=name)


def set_rolling(**config: Any) -> Mutation:
    return lambda d: rolling(d, **config)


def subgroups(size: int, sgs: int, policy: str | None = None) -> Mutation:
    def apply(d: dict[str, Any]) -> None:
        sub: dict[str, Any] = {"subGroupSize": sgs}
        if policy:
            sub["subGroupPolicyType"] = policy
        template(d).update(size=size, subGroupPolicy=sub)

    return apply


def annotate(key: str, value: str) -> Mutation:
    return lambda d: d["metadata"].setdefault("annotations", {}).update({key: value})


def pod_template_annotation(field: str, key: str, value: str) -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        meta = template(d)[field].setdefault("metadata", {})
        meta.setdefault("annotations", {})[key] = value

    return mutate


def combine(*mutations: Mutation) -> Mutation:
    def apply(d: dict[str, Any]) -> None:
        for m in mutations:
            m(d)

    return apply


def drop_worker_containers(d: dict[str, Any]) -> None:
    del template(d)["workerTemplate"]["spec"]["containers"]


def hash_with_claims(d: dict[str, Any]) -> None:
    d["spec"]["groupIdentity"] = "Hash"
    template(d)["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {}}]


SUBGROUP_ANNOTATION = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
EXCLUSIVE_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
NOT_A_KEY = "name part must consist of alphanumeric characters"

REJECTED: list[tuple[str, Mutation, str, str]] = [
    (
        "budget-without-recreation",
        set_template(maxGroupRestarts=1, restartPolicy="None"),
        "spec.leaderWorkerTemplate.maxGroupRestarts",
        "only supported when restartPolicy is RecreateGroupOnPodRestart",
    ),
    (
        "budget-negative",
        set_template(maxGroupRestarts=-1),
        "spec.leaderWorkerTemplate.maxGroupRestarts",
        "greater than or equal to 0",
    ),
    # (id, mutation, field path, fragment of the message)
    # A topology that is not a label key: every pod would be refused its affinity.
    (
        "exclusive-topology-not-a-key",
        annotate(EXCLUSIVE_ANNOTATION, "Not A Key"),
        f"metadata.annotations.{EXCLUSIVE_ANNOTATION}",
        NOT_A_KEY,
    ),
    (
        "exclusive-topology-empty",
        annotate(EXCLUSIVE_ANNOTATION, ""),
        f"metadata.annotations.{EXCLUSIVE_ANNOTATION}",
        "name part must be non-empty",
    ),
    (
        "subgroup-exclusive-topology-not-a-key",
        combine(subgroups(4, 2), annotate(SUBGROUP_ANNOTATION, "zone/")),
        f"metadata.annotations.{SUBGROUP_ANNOTATION}",
        "name part must be non-empty",
    ),
    (
        # Go's `$` does not match before a trailing newline (a YAML `|` block), Python's does.
        "exclusive-topology-trailing-newline",
        annotate(EXCLUSIVE_ANNOTATION, "topology.kubernetes.io/zone\n"),
        f"metadata.annotations.{EXCLUSIVE_ANNOTATION}",
        NOT_A_KEY,
    ),
    (
        "exclusive-topology-on-the-worker-template",
        pod_template_annotation("workerTemplate", EXCLUSIVE_ANNOTATION, "Not A Key"),
        f"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations.{EXCLUSIVE_ANNOTATION}",
        NOT_A_KEY,
    ),
    (
        # Copied to the pods as it is: an empty topologyKey is refused too.
        "subgroup-topology-empty-on-the-leader-template",
        combine(
            set_template(leaderTemplate={"spec": {"containers": [{"name": "l"}]}}),
            pod_template_annotation("leaderTemplate", SUBGROUP_ANNOTATION, ""),
        ),
        f"spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations.{SUBGROUP_ANNOTATION}",
        "name part must be non-empty",
    ),
    ("name-not-dns1035", set_name("2cube"), "metadata.name", "DNS-1035 label"),
    ("name-too-long", set_name("a" * 64), "metadata.name", "no more than 63"),
    ("replicas-negative", set_spec(replicas=-1), "spec.replicas", "equal or greater than 0"),
    (
        "replicas-too-many",
        set_spec(replicas=1000001),
        "spec.replicas",
        "equal or less than 1000000",
    ),
    ("size-negative", set_template(size=-1), SIZE, "size must be equal or greater than 1"),
    ("size-zero", set_template(size=0), SIZE, "size must be equal or greater than 1"),
    (
        "replicas-times-size",
        combine(set_spec(replicas=100000), set_template(size=1000000)),
        "spec.replicas",
        "must not exceed 2147483647",
    ),
    (
        "max-unavailable-negative",
        set_rolling(maxUnavailable=-1, maxSurge=1),
        f"{RU}.maxUnavailable",
        "greater than or equal to 0",
    ),
    (
        "max-unavailable-not-percent",
        set_rolling(maxUnavailable="abc", maxSurge=1),
        f"{RU}.maxUnavailable",
        "valid percent string",
    ),
    (
        "max-unavailable-not-percent-scaling",
        set_rolling(maxUnavailable="abc", maxSurge=1),
        f"{RU}.maxUnavailable",
        "invalid value",
    ),
    (
        "max-unavailable-over-100",
        set_rolling(maxUnavailable="200%", maxSurge=1),
        f"{RU}.maxUnavailable",
        "must not be greater than 100%",
    ),
    (
        "max-surge-negative",
        set_rolling(maxUnavailable=1, maxSurge=-1),
        f"{RU}.maxSurge",
        "greater than or equal to 0",
    ),
    (
        "max-surge-over-100",
        set_rolling(maxUnavailable=1, maxSurge="200%"),
        f"{RU}.maxSurge",
        "must not be greater than 100%",
    ),
    (
        "max-surge-not-percent",
        set_rolling(maxUnavailable=1, maxSurge="5"),
        f"{RU}.maxSurge",
        "invalid value",
    ),
    (
        "partition-negative",
        set_rolling(maxUnavailable=1, maxSurge=0, partition=-1),
        f"{RU}.partition",
        "greater than or equal to 0",
    ),
    (
        "both-zero",
        set_rolling(maxUnavailable=0, maxSurge=0),
        f"{RU}.maxUnavailable",
        "must not be 0 when `maxSurge` is 0",
    ),
    (
        "percent-rounds-to-zero",
        set_rolling(maxUnavailable="25%", maxSurge=0),
        f"{RU}.maxUnavailable",
        "must not be 0 when `maxSurge` is 0",
    ),
    ("subgroup-size-negative", subgroups(2, -1), SGS, "equal or greater than 1"),
    ("subgroup-size-zero", subgroups(2, 0), SGS, "equal or greater than 1"),
    ("subgroup-not-divisible", subgroups(5, 3), SGS, "size or size - 1 must be divisible"),
    ("subgroup-larger-than-size", subgroups(2, 3), SGS, "cannot be larger than size"),
    (
        "leader-excluded-not-divisible",
        subgroups(4, 2, "LeaderExcluded"),
        SGS,
        "size-1 must be divisible by subGroupSize when using LeaderExcluded",
    ),
    (
        "subgroup-topology-without-policy",
        annotate(SUBGROUP_ANNOTATION, "zone"),
        f"metadata.annotations.{SUBGROUP_ANNOTATION}",
        "without subGroupSize",
    ),
    (
        "restart-policy-enum",
        set_template(restartPolicy="invalidValue"),
        "spec.leaderWorkerTemplate.restartPolicy",
        "supported values",
    ),
    (
        "startup-policy-enum",
        set_spec(startupPolicy="invalidValue"),
        "spec.startupPolicy",
        "supported values",
    ),
    (
        "rollout-type-enum",
        set_spec(rolloutStrategy={"type": "invalidValue"}),
        "spec.rolloutStrategy.type",
        "supported values",
    ),
    (
        "subdomain-policy-enum",
        set_spec(networkConfig={"subdomainPolicy": "Nope"}),
        "spec.networkConfig.subdomainPolicy",
        "supported values",
    ),
    (
        "subgroup-type-enum",
        subgroups(4, 2, "LeaderOnly"),
        "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType",
        "supported values",
    ),
    (
        "group-identity-enum",
        set_spec(groupIdentity="Random"),
        "spec.groupIdentity",
        '"Ordinal", "Hash"',
    ),
    (
        "group-replacement-enum",
        set_spec(groupIdentity="Hash", groupReplacementPolicy="Later"),
        "spec.groupReplacementPolicy",
        '"PostTermination", "Immediate"',
    ),
    (
        "worker-template-required",
        lambda d: template(d).pop("workerTemplate"),
        "spec.leaderWorkerTemplate.workerTemplate",
        "",
    ),
    (
        "leader-worker-template-required",
        lambda d: d["spec"].pop("leaderWorkerTemplate"),
        "spec.leaderWorkerTemplate",
        "",
    ),
    (
        "pod-spec-containers-required",
        drop_worker_containers,
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers",
        "",
    ),
    (
        "immediate-with-ordinal",
        set_spec(groupReplacementPolicy="Immediate"),
        "spec.groupReplacementPolicy",
        "requires groupIdentity Hash",
    ),
    (
        "immediate-with-default-identity",
        set_spec(groupIdentity="Ordinal", groupReplacementPolicy="Immediate"),
        "spec.groupReplacementPolicy",
        "requires groupIdentity Hash",
    ),
    (
        "hash-with-volume-claims",
        hash_with_claims,
        "spec.leaderWorkerTemplate.volumeClaimTemplates",
        "generic ephemeral volumes",
    ),
    (
        "hash-with-partition",
        combine(set_spec(groupIdentity="Hash"), set_rolling(maxUnavailable=1, partition=2)),
        f"{RU}.partition",
        "not supported with groupIdentity Hash",
    ),
]

ACCEPTED: list[tuple[str, Mutation]] = [
    ("name-dns1035", set_name("abc-123")),
    ("replicas-zero", set_spec(replicas=0)),
    ("replicas-max", combine(set_spec(replicas=1000000), set_template(size=1))),
    ("size-one", set_template(size=1)),
    ("product-at-limit", combine(set_spec(replicas=1000), set_template(size=1000))),
    ("max-unavailable-above-replicas", set_rolling(maxUnavailable=10)),
    ("max-surge-above-replicas", set_rolling(maxUnavailable=1, maxSurge=10)),
    ("max-unavailable-100-percent", set_rolling(maxUnavailable="100%")),
    ("surge-only", set_rolling(maxUnavailable=0, maxSurge=1)),
    ("zero-replicas-any-budget", combine(set_spec(replicas=0), set_rolling(maxUnavailable=0))),
    ("percent-rounds-up-surge", set_rolling(maxUnavailable=0, maxSurge="1%")),
    ("partition-zero", set_rolling(maxUnavailable=1, partition=0)),
    ("partition-equal-replicas", set_rolling(maxUnavailable=1, partition=2)),
    ("partition-above-replicas", set_rolling(maxUnavailable=1, partition=5)),
    ("subgroup-size-one", subgroups(3, 1)),
    ("subgroup-size-equals-size", subgroups(4, 4)),
    ("subgroup-size-minus-one-divisible", subgroups(5, 2)),
    ("leader-excluded-divisible", subgroups(5, 2, "LeaderExcluded")),
    (
        "subgroup-topology-with-policy",
        combine(subgroups(4, 2), annotate(SUBGROUP_ANNOTATION, "zone")),
    ),
    # Never copied to the pods: harmless, as upstream.
    (
        "subgroup-topology-empty-with-policy",
        combine(subgroups(4, 2), annotate(SUBGROUP_ANNOTATION, "")),
    ),
    (
        "exclusive-topology-on-a-template",
        pod_template_annotation(
            "workerTemplate", EXCLUSIVE_ANNOTATION, "cloud.google.com/gke-nodepool"
        ),
    ),
    ("restart-policy-deprecated-default", set_template(restartPolicy="Default")),
    ("budget", set_template(maxGroupRestarts=3)),
    ("budget-zero", set_template(maxGroupRestarts=0)),
    (
        "budget-after-start",
        set_template(maxGroupRestarts=2, restartPolicy="RecreateGroupAfterStart"),
    ),
    ("budget-hash", combine(set_spec(groupIdentity="Hash"), set_template(maxGroupRestarts=1))),
    ("startup-leader-ready", set_spec(startupPolicy="LeaderReady")),
    ("unique-per-replica", set_spec(networkConfig={"subdomainPolicy": "UniquePerReplica"})),
    ("hash", set_spec(groupIdentity="Hash")),
    ("hash-immediate", set_spec(groupIdentity="Hash", groupReplacementPolicy="Immediate")),
    ("hash-partition-zero", combine(set_spec(groupIdentity="Hash"), set_rolling(partition=0))),
    (
        "ordinal-with-volume-claims",
        set_template(volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {}}]),
    ),
    ("leader-template", set_template(leaderTemplate={"spec": {"containers": [{"name": "l"}]}})),
]


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [pytest.param(m, f, frag, id=i) for i, m, f, frag in REJECTED],
)
def test_rejected_with_field_path(mutate: Mutation, field: str, fragment: str) -> None:
    data = lws_json()
    mutate(data)
    errors = errors_of(data)
    matching = [e for e in errors if e.field == field and fragment in str(e)]
    assert matching, f"expected an error on {field} containing {fragment!r}, got {errors}"
    for error in matching:
        assert str(error).startswith(f"{field}: "), str(error)


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in ACCEPTED])
def test_accepted(mutate: Mutation) -> None:
    data = lws_json()
    mutate(data)
    assert errors_of(data) == []


def test_error_message_names_path_and_bad_value() -> None:
    data = lws_json()
    data["spec"]["replicas"] = -1
    (error,) = errors_of(data)
    assert (
        str(error) == "spec.replicas: Invalid value: -1: replicas must be equal or greater than 0"
    )
    data = lws_json()
    data["spec"]["startupPolicy"] = "Soon"
    (error,) = errors_of(data)
    assert error.type is ErrorType.NOT_SUPPORTED
    assert str(error) == (
        'spec.startupPolicy: Unsupported value: "Soon": supported values: '
        '"LeaderCreated", "LeaderReady"'
    )


def test_all_errors_reported_together() -> None:
    data = lws_json(name="2cube", replicas=-1, groupReplacementPolicy="Immediate")
    template(data)["size"] = 0
    fields = {e.field for e in errors_of(data)}
    assert {
        "metadata.name",
        "spec.replicas",
        SIZE,
        "spec.groupReplacementPolicy",
    } <= fields


def test_schema_bound_reported_once_in_webhook_wording() -> None:
    data = lws_json(replicas=-1)
    errors = [e for e in errors_of(data) if e.field == "spec.replicas"]
    assert len(errors) == 1
    assert "replicas must be equal or greater than 0" in errors[0].detail


def test_an_empty_subgroup_topology_without_policy_is_one_error() -> None:
    data = lws_json()
    annotate(SUBGROUP_ANNOTATION, "")(data)
    errors = errors_of(data)
    assert [e.field for e in errors] == [f"metadata.annotations.{SUBGROUP_ANNOTATION}"], errors
    assert "without subGroupSize" in str(errors[0])


def test_size_zero_subgroup_does_not_crash() -> None:
    data = lws_json()
    subgroups(0, 0)(data)
    fields = {e.field for e in errors_of(data)}
    assert {SIZE, SGS} <= fields


def test_decoding_type_errors_have_paths() -> None:
    data = lws_json()
    template(data)["size"] = "four"
    data["spec"]["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": []}
    from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet

    _, errors = LeaderWorkerSet.from_json(data)
    rendered = sorted(str(e) for e in errors)
    # The API server's schema validation words these the same way.
    assert rendered == [
        'spec.leaderWorkerTemplate.size: Invalid value: "string": '
        'spec.leaderWorkerTemplate.size in body must be of type integer: "string"',
        f'{RU}: Invalid value: "array": {RU} in body must be of type object: "array"',
    ]


def test_a_whole_number_written_as_a_float_is_an_integer() -> None:
    from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet

    data = lws_json()
    template(data)["size"] = 3.0
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == []
    assert lws.spec.leader_worker_template.size == 3


@pytest.mark.parametrize("size", [2**31, -(2**31) - 1, 2**40])
def test_an_integer_out_of_its_format_is_refused_with_the_field(size: int) -> None:
    from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet

    data = lws_json()
    template(data)["size"] = size
    _, errors = LeaderWorkerSet.from_json(data)
    assert [str(e) for e in errors] == [
        f"{SIZE}: Invalid value: {size}: {SIZE} in body must be of type integer with format int32"
    ]


# --- update rules -----------------------------------------------------------


def update_errors(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    return validate_update(defaulted(new), defaulted(old))


UPDATE_REJECTED: list[tuple[str, Mutation, Mutation, str, str]] = [
    (
        "exclusive-topology-changed-to-not-a-key",
        annotate(EXCLUSIVE_ANNOTATION, "topology.kubernetes.io/zone"),
        annotate(EXCLUSIVE_ANNOTATION, "Not A Key"),
        f"metadata.annotations.{EXCLUSIVE_ANNOTATION}",
        NOT_A_KEY,
    ),
    ("subgroup-size-changed", subgroups(4, 2), subgroups(4, 4), SGS, "field is immutable"),
    ("subgroup-enabled", lambda d: None, subgroups(4, 2), SGS, "cannot enable subGroupSize"),
    ("subgroup-removed", subgroups(4, 2), lambda d: None, SGS, "cannot remove subGroupSize"),
    (
        "identity-ordinal-to-hash",
        set_spec(groupIdentity="Ordinal"),
        set_spec(groupIdentity="Hash"),
        "spec.groupIdentity",
        "field is immutable",
    ),
    (
        "identity-hash-to-ordinal",
        set_spec(groupIdentity="Hash"),
        set_spec(groupIdentity="Ordinal"),
        "spec.groupIdentity",
        "field is immutable",
    ),
    (
        "identity-unset-to-hash",
        lambda d: None,
        set_spec(groupIdentity="Hash"),
        "spec.groupIdentity",
        "field is immutable",
    ),
    (
        "size-overflows-product",
        set_spec(replicas=100000),
        combine(set_spec(replicas=100000), set_template(size=1000000)),
        "spec.replicas",
        "must not exceed",
    ),
]

UPDATE_ACCEPTED: list[tuple[str, Mutation, Mutation]] = [
    # Ratcheting: an object upstream admitted can still be scaled.
    (
        "exclusive-topology-left-as-it-was",
        annotate(EXCLUSIVE_ANNOTATION, "Not A Key"),
        combine(annotate(EXCLUSIVE_ANNOTATION, "Not A Key"), set_spec(replicas=5)),
    ),
    ("size-changed", set_template(size=2), set_template(size=3)),
    (
        "template-changed",
        lambda d: None,
        lambda d: template(d)["workerTemplate"]["spec"]["containers"][0].update(image="x:2"),
    ),
    (
        "subdomain-switched",
        set_spec(networkConfig={"subdomainPolicy": "Shared"}),
        set_spec(networkConfig={"subdomainPolicy": "UniquePerReplica"}),
    ),
    ("subdomain-nulled-is-redefaulted", lambda d: None, set_spec(networkConfig={})),
    ("partition-changed", set_rolling(partition=0), set_rolling(partition=3)),
    ("identity-unset-to-ordinal", lambda d: None, set_spec(groupIdentity="Ordinal")),
    (
        "replacement-policy-changed-in-hash",
        set_spec(groupIdentity="Hash"),
        set_spec(groupIdentity="Hash", groupReplacementPolicy="Immediate"),
    ),
    ("subgroup-type-changed", subgroups(5, 2), subgroups(5, 2, "LeaderExcluded")),
]


@pytest.mark.parametrize(
    ("old_mut", "new_mut", "field", "fragment"),
    [pytest.param(o, n, f, frag, id=i) for i, o, n, f, frag in UPDATE_REJECTED],
)
def test_update_rejected(old_mut: Mutation, new_mut: Mutation, field: str, fragment: str) -> None:
    old, new = lws_json(), lws_json()
    old_mut(old)
    new_mut(new)
    errors = update_errors(old, new)
    assert any(e.field == field and fragment in str(e) for e in errors), errors


@pytest.mark.parametrize(
    ("old_mut", "new_mut"), [pytest.param(o, n, id=i) for i, o, n in UPDATE_ACCEPTED]
)
def test_update_accepted(old_mut: Mutation, new_mut: Mutation) -> None:
    old, new = lws_json(), lws_json()
    old_mut(old)
    new_mut(new)
    assert update_errors(old, new) == []


def test_null_subdomain_policy_rejected_when_not_redefaulted() -> None:
    old, new = lws_json(), lws_json(networkConfig={})
    errors = validate_update(decoded(new), defaulted(old))
    assert {e.field for e in errors} == {"spec.networkConfig.subdomainPolicy"}
    assert any("cannot set subdomainPolicy as null" in str(e) for e in errors)


# --- warnings ---------------------------------------------------------------


def test_warns_when_names_will_be_too_long() -> None:
    assert warnings_for(defaulted(lws_json(name="a" * 40))) == []
    assert warnings_for(defaulted(lws_json(name="a" * 51, replicas=10)))
    hashed = lws_json(name="a" * 40, groupIdentity="Hash")
    assert warnings_for(defaulted(hashed))
