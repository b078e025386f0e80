"""Validation of DisaggregatedSets. The tests named after upstream's webhook tests
(v0.10.0 disaggregatedset_webhook_test.go) take the same objects, completed with the
pod template the CRD schema requires and defaulted as the API server would."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from leaderworkerset.api.disaggregatedset.validation import (
    validate_create,
    validate_update,
    warnings_for,
)
from leaderworkerset.api.errors import ErrorType, FieldError
from tests.toolkit.disaggregatedset import decoded, disaggregatedset, role, worker_template

JSON = dict[str, Any]
WORKER = worker_template()
RACK = "cloud.google.com/gke-nodepool"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"


def rolling(**config: Any) -> JSON:
    return {"rollingUpdateConfiguration": config}


def errors_of(doc: JSON) -> list[FieldError]:
    return validate_create(decoded(doc))


def fields(errors: list[FieldError]) -> list[str]:
    return [e.field for e in errors]


def text(errors: list[FieldError]) -> str:
    return "; ".join(map(str, errors))


# --- TestValidateCreate ------------------------------------------------------------------

VALID = {
    "valid DisaggregatedSet with no rolloutStrategy": disaggregatedset(),
    "valid DisaggregatedSet with RollingUpdate type": disaggregatedset(
        role(
            "prefill",
            rolloutStrategy={"type": "RollingUpdate", **rolling(maxSurge=1, maxUnavailable=0)},
        ),
        role("decode"),
    ),
    "valid DisaggregatedSet with partition set to 0": disaggregatedset(
        role("prefill", rolloutStrategy=rolling(partition=0, maxUnavailable=1)), role("decode")
    ),
    "valid placement policy ExclusiveSlice with topology": disaggregatedset(
        placementPolicy={"type": "ExclusiveSlice", "topology": RACK}
    ),
    "valid: maxSurge=0 and maxUnavailable=1 (only one is zero)": disaggregatedset(
        role("prefill", rolloutStrategy=rolling(maxSurge=0, maxUnavailable=1)), role("decode")
    ),
    "valid: maxSurge=0 and maxUnavailable=0 but replicas=0 (zero-replica exemption)": (
        disaggregatedset(
            role("prefill", 0, rolloutStrategy=rolling(maxSurge=0, maxUnavailable=0)),
            role("decode", 0),
        )
    ),
}


@pytest.mark.parametrize("doc", VALID.values(), ids=VALID.keys())
def test_validate_create_valid(doc: JSON) -> None:
    assert errors_of(doc) == []


def _with_annotation(where: str, key: str) -> JSON:
    prefill = role("prefill")
    annotations = {"metadata": {"annotations": {key: "rack"}}}
    template = prefill["spec"]["leaderWorkerTemplate"]
    if where == "role":
        prefill.update(annotations)
    elif where == "worker":
        template["workerTemplate"] = {**WORKER, **annotations}
    else:
        template["leaderTemplate"] = {**WORKER, **annotations}
    return disaggregatedset(
        prefill, role("decode"), placementPolicy={"type": "ExclusiveSlice", "topology": RACK}
    )


INVALID = {
    "invalid DisaggregatedSet with partition set to non-zero": (
        disaggregatedset(role("prefill", rolloutStrategy=rolling(partition=1)), role("decode")),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition",
        "partition",
    ),
    "invalid DisaggregatedSet with unsupported rollout type": (
        disaggregatedset(
            role("prefill", rolloutStrategy={"type": "SomeOtherType"}), role("decode")
        ),
        "spec.roles[0].spec.rolloutStrategy.type",
        "type",
    ),
    "invalid DisaggregatedSet with multiple validation errors": (
        disaggregatedset(
            role("prefill", rolloutStrategy={"type": "InvalidType", **rolling(partition=5)}),
            role("decode"),
        ),
        "spec.roles[0].spec.rolloutStrategy.type",
        "type",
    ),
    "invalid placement policy missing topology": (
        disaggregatedset(placementPolicy={"type": "ExclusiveTopology"}),
        "spec.placementPolicy.topology",
        "topology",
    ),
    "invalid placement policy topology that is no label key": (
        disaggregatedset(placementPolicy={"type": "ExclusiveTopology", "topology": "rack zone"}),
        "spec.placementPolicy.topology",
        "name part must consist of alphanumeric characters",
    ),
    "invalid placement policy combined with LWS exclusive-topology annotation": (
        _with_annotation("role", EXCLUSIVE),
        "spec.roles[0]",
        "exclusive-topology",
    ),
    "invalid placement policy with exclusive-topology on the worker template": (
        _with_annotation("worker", EXCLUSIVE),
        "spec.roles[0]",
        "exclusive-topology",
    ),
    "invalid placement policy combined with LWS subgroup-exclusive-topology annotation": (
        _with_annotation("role", SUBGROUP_EXCLUSIVE),
        "spec.roles[0]",
        "subgroup-exclusive-topology",
    ),
    "invalid placement policy with subgroup-exclusive-topology on the leader template": (
        _with_annotation("leader", SUBGROUP_EXCLUSIVE),
        "spec.roles[0]",
        "subgroup-exclusive-topology",
    ),
    "invalid placement policy with subgroup-exclusive-topology on the worker template": (
        _with_annotation("worker", SUBGROUP_EXCLUSIVE),
        "spec.roles[0]",
        "subgroup-exclusive-topology",
    ),
    "invalid: maxSurge=0 and maxUnavailable=0 with replicas > 0 (int literal)": (
        disaggregatedset(
            role("prefill", rolloutStrategy=rolling(maxSurge=0, maxUnavailable=0)), role("decode")
        ),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
        "must not be 0 when `maxSurge` is 0",
    ),
    "invalid: maxSurge=0% and maxUnavailable=0% with replicas > 0 (percentage)": (
        disaggregatedset(
            role("prefill", rolloutStrategy=rolling(maxSurge="0%", maxUnavailable="0%")),
            role("decode"),
        ),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
        "must not be 0 when `maxSurge` is 0",
    ),
}


@pytest.mark.parametrize("doc,field,words", INVALID.values(), ids=INVALID.keys())
def test_validate_create_invalid(doc: JSON, field: str, words: str) -> None:
    errors = errors_of(doc)
    assert field in fields(errors)
    assert words in text([e for e in errors if e.field == field])


def test_unsupported_rollout_type_is_reported_once_in_the_webhooks_words() -> None:
    doc = disaggregatedset(
        role("prefill", rolloutStrategy={"type": "SomeOtherType"}), role("decode")
    )
    (error,) = errors_of(doc)
    assert str(error) == (
        'spec.roles[0].spec.rolloutStrategy.type: Unsupported value: "SomeOtherType": '
        'supported values: "RollingUpdate", ""'
    )


def test_exclusive_annotation_error_names_key_and_policy() -> None:
    (error,) = errors_of(_with_annotation("role", EXCLUSIVE))
    assert error.type is ErrorType.FORBIDDEN
    assert error.detail == (
        f'the "{EXCLUSIVE}" annotation must not be combined with a non-None '
        "spec.placementPolicy.type (ExclusiveSlice)"
    )


def test_exclusive_annotation_alone_is_allowed() -> None:
    prefill = role("prefill")
    prefill["metadata"] = {"annotations": {EXCLUSIVE: "rack"}}
    assert errors_of(disaggregatedset(prefill, role("decode"))) == []
    policy = {"type": "None", "topology": RACK}
    assert errors_of(disaggregatedset(prefill, role("decode"), placementPolicy=policy)) == []


# --- TestValidateUpdate --------------------------------------------------------------------


def test_validate_update_valid_update() -> None:
    valid = decoded(disaggregatedset())
    assert validate_update(valid, valid) == []


def test_validate_update_invalid_update_with_partition() -> None:
    new = decoded(
        disaggregatedset(role("prefill", rolloutStrategy=rolling(partition=1)), role("decode"))
    )
    assert "partition" in text(validate_update(new, decoded(disaggregatedset())))


def test_validate_update_max_surge_and_max_unavailable_zero() -> None:
    both_zero = rolling(maxSurge=0, maxUnavailable=0)
    new = decoded(disaggregatedset(role("prefill", rolloutStrategy=both_zero), role("decode")))
    assert "must not be 0 when `maxSurge` is 0" in text(
        validate_update(new, decoded(disaggregatedset()))
    )


# --- TestValidateExternalScalingRules ---------------------------------------------------

EXTERNAL = {"mode": "External"}


def test_validate_external_scaling_rules_warns_when_external_and_replicas_above_1() -> None:
    prefill = role("prefill", 3, scaling=EXTERNAL)
    ds = decoded(disaggregatedset(prefill, role("decode"), name="ds"))
    assert validate_create(ds) == []
    assert warnings_for(ds) == [
        'role "prefill" sets scaling.mode: External and spec.replicas: 3 — spec.replicas is '
        'ignored; drive replicas via DisaggregatedSetRoleScaler "ds-prefill" instead'
    ]


def test_validate_external_scaling_rules_rejects_external_with_slices_above_1() -> None:
    prefill = role("prefill", scaling=EXTERNAL)
    errors = errors_of(disaggregatedset(prefill, role("decode"), name="ds", slices=2))
    assert [str(e) for e in errors] == [
        "spec.slices: Forbidden: spec.slices > 1 is not supported while any role has "
        "scaling.mode: External (alpha restriction)"
    ]


def test_validate_external_scaling_rules_rejects_scaler_name_over_253() -> None:
    prefill = role("prefill", scaling=EXTERNAL)
    errors = errors_of(disaggregatedset(prefill, role("decode"), name="a" * 250))
    (error,) = [e for e in errors if e.field == "spec.roles[0].name"]
    assert "253 characters" in str(error)


def test_scaler_name_of_exactly_253_is_allowed() -> None:
    prefill = role("prefill", scaling=EXTERNAL)
    errors = errors_of(disaggregatedset(prefill, role("decode"), name="a" * 245))  # + "-prefill"
    assert "253" not in text(errors)


def test_static_roles_have_no_scaler_name_limit() -> None:
    errors = errors_of(disaggregatedset(name="a" * 250))
    assert "253" not in text(errors)


# --- What the CRD schema enforces -------------------------------------------------------


def test_spec_is_required() -> None:
    doc = disaggregatedset()
    del doc["spec"]
    assert [str(e) for e in errors_of(doc)] == ["spec: Required value"]


@pytest.mark.parametrize("count", [0, 1, 11])
def test_two_to_ten_roles(count: int) -> None:
    roles = [role(f"r{i}") for i in range(count)]
    doc = disaggregatedset()
    doc["spec"]["roles"] = roles
    errors = errors_of(doc)
    assert fields(errors) == ["spec.roles"]
    assert ("at least 2" if count < 2 else "at most 10") in str(errors[0])


def test_ten_roles_are_allowed() -> None:
    doc = disaggregatedset()
    doc["spec"]["roles"] = [role(f"r{i}") for i in range(10)]
    assert errors_of(doc) == []


def test_roles_are_required() -> None:
    doc = disaggregatedset()
    del doc["spec"]["roles"]
    assert [str(e) for e in errors_of(doc)] == ["spec.roles: Required value"]


def test_role_names_are_unique() -> None:
    (error,) = errors_of(disaggregatedset(role("prefill"), role("decode"), role("prefill")))
    assert error.type is ErrorType.DUPLICATE
    assert error.field == "spec.roles[2]"


@pytest.mark.parametrize(
    "name,words",
    [
        ("", "at least 1 chars long"),
        ("a" * 64, "must have at most 63 bytes"),
        ("Prefill", "should match"),
        ("pre_fill", "should match"),
        ("-prefill", "should match"),
        ("prefill-", "should match"),
        ("prefill\n", "should match"),
    ],
)
def test_role_name_rules(name: str, words: str) -> None:
    errors = errors_of(disaggregatedset(role(name), role("decode"), name="t"))
    assert "spec.roles[0].name" in fields(errors)
    assert words in text([e for e in errors if e.field == "spec.roles[0].name"])


def test_role_name_is_required() -> None:
    nameless = role("x")
    del nameless["name"]
    errors = errors_of(disaggregatedset(nameless, role("decode")))
    assert "spec.roles[0].name: Required value" in [str(e) for e in errors]


@pytest.mark.parametrize("slices,ok", [(0, False), (1, True), (100, True), (101, False)])
def test_slices_bounds(slices: int, ok: bool) -> None:
    errors = errors_of(disaggregatedset(name="t", slices=slices))
    assert (errors == []) is ok
    assert ok or fields(errors) == ["spec.slices"]


@pytest.mark.parametrize(
    "member,value,field",
    [
        ("placementPolicy", {"type": "Spread", "topology": RACK}, "spec.placementPolicy.type"),
    ],
)
def test_enums(member: str, value: Any, field: str) -> None:
    errors = errors_of(disaggregatedset(**{member: value}))
    assert fields(errors) == [field]
    assert errors[0].type is ErrorType.NOT_SUPPORTED


def test_scaling_mode_enum() -> None:
    errors = errors_of(disaggregatedset(role("prefill", scaling={"mode": "Auto"}), role("decode")))
    assert [(e.field, e.type) for e in errors] == [
        ("spec.roles[0].scaling.mode", ErrorType.NOT_SUPPORTED)
    ]


def test_role_spec_gets_the_leaderworkerset_schema_checks() -> None:
    bad = role("prefill")
    bad["spec"]["leaderWorkerTemplate"] = {"size": 0, "workerTemplate": {"spec": {}}}
    errors = errors_of(disaggregatedset(bad, role("decode")))
    assert set(fields(errors)) >= {
        "spec.roles[0].spec.leaderWorkerTemplate.workerTemplate.spec.containers"
    }
    missing = role("decode")
    del missing["spec"]["leaderWorkerTemplate"]
    errors = errors_of(disaggregatedset(role("prefill"), missing))
    assert "spec.roles[1].spec.leaderWorkerTemplate: Required value" in [str(e) for e in errors]


@pytest.mark.parametrize(
    "replicas,ok",
    [
        ((2, 3), True),
        ((0, 0), True),
        ((0, 3), False),
        ((3, 0), False),
    ],
    ids=str,
)
def test_replicas_all_zero_or_all_positive(replicas: tuple[int, int], ok: bool) -> None:
    errors = errors_of(disaggregatedset(role("prefill", replicas[0]), role("decode", replicas[1])))
    assert (errors == []) is ok
    assert ok or [str(e) for e in errors] == [
        'spec: Invalid value: "object": replicas must be zero for all non-External roles or '
        "non-zero for all non-External roles"
    ]


def test_absent_replicas_default_to_one_so_they_count_as_positive() -> None:
    assert errors_of(disaggregatedset(role("prefill", None), role("decode", 3))) == []


def test_external_roles_are_left_out_of_the_replicas_rule() -> None:
    external = role("prefill", 0, scaling=EXTERNAL)
    assert errors_of(disaggregatedset(external, role("decode", 3))) == []


# --- Ours: Group Identity per role (the LeaderWorkerSet's rules) ---------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {"groupIdentity": "Hash"},
        {"groupIdentity": "Hash", "groupReplacementPolicy": "Immediate"},
        {"groupIdentity": "Ordinal", "groupReplacementPolicy": "PostTermination"},
        {"groupIdentity": "Hash", "rolloutStrategy": rolling(maxSurge=1)},
    ],
)
def test_a_role_may_use_group_identity(spec: JSON) -> None:
    assert errors_of(disaggregatedset(role("prefill"), role("decode", **spec))) == []


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        (
            {"groupReplacementPolicy": "Immediate"},
            "spec.roles[1].spec.groupReplacementPolicy",
            "Immediate requires groupIdentity Hash",
        ),
        (
            {"groupIdentity": "Ordinal", "groupReplacementPolicy": "Immediate"},
            "spec.roles[1].spec.groupReplacementPolicy",
            "Immediate requires groupIdentity Hash",
        ),
        (
            {
                "groupIdentity": "Hash",
                "leaderWorkerTemplate": {
                    "workerTemplate": WORKER,
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
                },
            },
            "spec.roles[1].spec.leaderWorkerTemplate.volumeClaimTemplates",
            "not supported with groupIdentity Hash",
        ),
        (
            {"groupIdentity": "Sequential"},
            "spec.roles[1].spec.groupIdentity",
            '"Ordinal", "Hash"',
        ),
        (
            {"groupIdentity": "Hash", "groupReplacementPolicy": "Eventually"},
            "spec.roles[1].spec.groupReplacementPolicy",
            '"PostTermination", "Immediate"',
        ),
    ],
)
def test_a_roles_group_identity_follows_the_leaderworkerset_rules(
    spec: JSON, field: str, words: str
) -> None:
    (error,) = errors_of(disaggregatedset(role("prefill"), role("decode", **spec)))
    assert error.field == field
    assert words in str(error)


def test_a_hash_roles_partition_is_refused_once_in_the_sets_words() -> None:
    spec = {"groupIdentity": "Hash", "rolloutStrategy": rolling(partition=1, maxSurge=1)}
    (error,) = errors_of(disaggregatedset(role("prefill"), role("decode", **spec)))
    assert error.field == "spec.roles[1].spec.rolloutStrategy.rollingUpdateConfiguration.partition"
    assert "not supported by DisaggregatedSet" in error.detail


def test_group_identity_may_change_on_update() -> None:
    old = decoded(disaggregatedset(role("prefill"), role("decode")))
    new = decoded(disaggregatedset(role("prefill"), role("decode", groupIdentity="Hash")))
    assert validate_update(new, old) == []
    assert validate_update(old, new) == []


# --- Ours: the names of what the set owns ---------------------------------------------------


def test_set_name_must_begin_a_dns_1035_label() -> None:
    for name in ("1st", "my.set"):
        (error,) = errors_of(disaggregatedset(name=name))
        assert error.field == "metadata.name"
        assert "DNS-1035" in error.detail


def test_longest_service_name_fits_63_characters() -> None:
    # <set>-<slice>-<8 hex>-<role>-prv: with one slice, len(set) + len(role) + 16.
    assert errors_of(disaggregatedset(role("r" * 22), role("decode"), name="s" * 25)) == []
    errors = errors_of(disaggregatedset(role("r" * 23), role("decode"), name="s" * 25))
    assert fields(errors) == ["spec.roles[0].name"]
    assert f'"{"s" * 25}-0-xxxxxxxx-{"r" * 23}-prv"' in errors[0].detail


def test_more_slices_make_longer_names() -> None:
    assert (
        errors_of(disaggregatedset(role("r" * 22), role("decode"), name="s" * 25, slices=10)) == []
    )
    errors = errors_of(disaggregatedset(role("r" * 22), role("decode"), name="s" * 25, slices=11))
    assert fields(errors) == ["spec.roles[0].name"]
    assert "-10-xxxxxxxx-" in errors[0].detail


def test_update_keeps_a_name_error_the_object_already_had() -> None:
    old = decoded(disaggregatedset(role("r" * 30), role("decode"), name="s" * 25))
    assert validate_create(old) != []
    replicas_changed = copy.deepcopy(old)
    assert replicas_changed.spec is not None and replicas_changed.spec.roles
    role_spec = replicas_changed.spec.roles[0].spec
    assert role_spec is not None
    role_spec.replicas = 5
    replicas_changed.spec.roles[1].spec.replicas = 5  # type: ignore[union-attr]
    assert validate_update(replicas_changed, old) == []
    more_slices = decoded(
        disaggregatedset(role("r" * 30), role("decode"), name="s" * 25, slices=11)
    )
    assert fields(validate_update(more_slices, old)) == ["spec.roles[0].name"]


def test_update_keeps_a_topology_error_the_object_already_had() -> None:
    """A set stored under upstream with a topology no API server takes as a topologyKey
    can still be scaled; a new bad topology is refused."""
    placement = {"type": "ExclusiveTopology", "topology": "rack zone"}
    old = decoded(disaggregatedset(placementPolicy=placement))
    assert fields(validate_create(old)) == ["spec.placementPolicy.topology"]
    scaled = copy.deepcopy(old)
    scaled.spec.roles[0].spec.replicas = 5  # type: ignore[union-attr]
    scaled.spec.roles[1].spec.replicas = 5  # type: ignore[union-attr]
    assert validate_update(scaled, old) == []
    other = decoded(
        disaggregatedset(placementPolicy={"type": "ExclusiveTopology", "topology": "a b"})
    )
    assert fields(validate_update(other, old)) == ["spec.placementPolicy.topology"]


@pytest.mark.parametrize(
    "config,field,words",
    [
        ({"maxSurge": "150%"}, "maxSurge", "must not be greater than 100%"),
        ({"maxUnavailable": -1}, "maxUnavailable", "must be greater than or equal to 0"),
        ({"maxSurge": "abc"}, "maxSurge", "a valid percent string must be"),
    ],
    ids=["over 100%", "negative", "not a percentage"],
)
def test_max_surge_and_max_unavailable_must_be_valid(
    config: dict[str, Any], field: str, words: str
) -> None:
    errors = errors_of(
        disaggregatedset(role("prefill", rolloutStrategy=rolling(**config)), role("decode"))
    )
    path = f"spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.{field}"
    assert path in fields(errors)
    assert words in text([e for e in errors if e.field == path])


def test_invalid_surge_values_are_not_checked_on_zero_replicas() -> None:
    config = rolling(maxSurge="150%", maxUnavailable=0)
    doc = disaggregatedset(role("prefill", 0, rolloutStrategy=config), role("decode", 0))
    assert errors_of(doc) == []


@pytest.mark.parametrize("replicas", [-1, 1_000_001])
def test_role_replicas_bounds(replicas: int) -> None:
    errors = errors_of(disaggregatedset(role("prefill", replicas), role("decode", replicas)))
    assert {"spec.roles[0].spec.replicas", "spec.roles[1].spec.replicas"} <= set(fields(errors))


# --- Ours: warnings about names too long for worker pods ------------------------------------


def test_a_hash_role_warns_when_its_worker_pods_would_get_too_long_a_label() -> None:
    # <set>-0-<revision>-<role> plus a Deployment pod suffix and the StatefulSet's
    # revision-label suffix exceed 63 characters once set and role hold 24.
    hash_decode = role("decode", size=2, groupIdentity="Hash")
    (warning,) = warnings_for(
        decoded(disaggregatedset(role("prefill"), hash_decode, name="a" * 18))
    )
    assert warning.startswith(
        "spec.roles[1]: LeaderWorkerSet 'aaaaaaaaaaaaaaaaaa-0-xxxxxxxx-decode'"
    )
    assert "worker pods could not be created" in warning
    assert (
        warnings_for(decoded(disaggregatedset(role("prefill"), hash_decode, name="a" * 17))) == []
    )


def test_no_worker_name_warning_without_workers_or_for_a_short_ordinal_role() -> None:
    hash_single = role("decode", size=1, groupIdentity="Hash")
    ordinal = role("prefill", size=2)
    assert warnings_for(decoded(disaggregatedset(ordinal, hash_single, name="a" * 30))) == []


def test_an_ordinal_role_warns_too_near_the_service_name_limit() -> None:
    ordinal = role("prefill", size=2)
    (warning,) = warnings_for(decoded(disaggregatedset(ordinal, role("decode"), name="a" * 40)))
    assert warning.startswith("spec.roles[0]: LeaderWorkerSet ")
    assert "worker StatefulSet names would reach" in warning


def test_a_roles_restart_budget_needs_a_recreating_policy_with_the_roles_path() -> None:
    budgeted = role("prefill")
    budgeted["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 2
    assert errors_of(disaggregatedset(budgeted, role("decode"))) == []
    budgeted["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "None"
    errors = errors_of(disaggregatedset(role("decode"), budgeted))
    assert fields(errors) == ["spec.roles[1].spec.leaderWorkerTemplate.maxGroupRestarts"]
