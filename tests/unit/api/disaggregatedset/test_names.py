"""Names, labels, selectors and revisions of what a DisaggregatedSet owns, as upstream's
v0.10.0 computes them. Expected values come from upstream's tests where they give any,
else from upstream's code: the revisions below were computed by its ComputeRevision
(module sigs.k8s.io/lws v0.9.0, the same function in v0.10.0) on the same roles."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.disaggregatedset.names import (
    compute_revision,
    has_slice_label,
    initial_replicas,
    legacy_lws_name,
    lws_labels,
    lws_name,
    scaler_labels,
    scaler_name,
    scaler_selector,
    service_name,
    service_selector,
    slice_label_matches,
    slice_of,
)
from leaderworkerset.api.disaggregatedset.types import DisaggregatedRoleSpec, DisaggregatedSet

SLICE = "disaggregatedset.x-k8s.io/slice"
INITIAL = "disaggregatedset.x-k8s.io/initial-replicas"


def roles(*docs: dict[str, Any]) -> list[DisaggregatedRoleSpec]:
    ds, errors = DisaggregatedSet.from_json({"spec": {"roles": list(docs)}})
    assert errors == []
    return ds.roles


def sized(name: str, size: int, replicas: int) -> dict[str, Any]:
    return {"name": name, "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size}}}


VLLM = [
    {
        "name": "prefill",
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {
                    "metadata": {"labels": {"model": "llama"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:latest",
                                "args": ["--model=meta-llama/Llama-3.1-8B"],
                                "ports": [{"containerPort": 8000, "protocol": "TCP"}],
                                "resources": {
                                    "limits": {"nvidia.com/gpu": "1", "memory": "16Gi"},
                                    "requests": {"cpu": "4000m"},
                                },
                                "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                            }
                        ]
                    },
                },
            },
        },
    },
    {
        "name": "decode",
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 1,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:latest",
                                "env": [{"name": "ROLE", "value": "decode <&>"}],
                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                            }
                        ],
                        "tolerations": [
                            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                        ],
                    }
                },
            },
        },
    },
]


# --- TestComputeRevision (lws_manager_test.go), with upstream's values -------------------


def test_compute_revision_returns_consistent_revision_for_same_inputs() -> None:
    same = roles(sized("prefill", 1, 2), sized("decode", 1, 3))
    assert compute_revision(same) == compute_revision(same) == "2fc6cb1d"


def test_compute_revision_returns_different_revision_for_different_size() -> None:
    assert compute_revision(roles(sized("prefill", 2, 2), sized("decode", 1, 3))) == "d1606978"


def test_compute_revision_returns_different_revision_for_different_role_names() -> None:
    renamed = roles(sized("prefill-v2", 1, 2), sized("decode", 1, 3))
    assert compute_revision(renamed) == "5ccb4e05"


def test_compute_revision_handles_empty_roles_slice() -> None:
    assert compute_revision([]) == "4f53cda1"


def test_replicas_and_rollout_settings_are_not_part_of_the_revision() -> None:
    prefill = sized("prefill", 1, 9)
    prefill["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": 3}}
    prefill["scaling"] = {"mode": "External"}
    assert compute_revision(roles(prefill, sized("decode", 1, 1))) == "2fc6cb1d"


def test_a_realistic_template_hashes_as_upstream() -> None:
    assert compute_revision(roles(*VLLM)) == "e17b7fec"


# --- Ours: Group Identity per role ---------------------------------------------------------


def identity(role: dict[str, Any], **members: str) -> dict[str, Any]:
    role["spec"].update(members)
    return role


def test_ordinal_spelled_out_keeps_upstreams_revision() -> None:
    prefill = identity(sized("prefill", 1, 2), groupIdentity="Ordinal")
    decode = identity(sized("decode", 1, 3), groupReplacementPolicy="PostTermination")
    assert compute_revision(roles(prefill, decode)) == "2fc6cb1d"


def test_a_hash_role_makes_another_revision() -> None:
    hashed = roles(sized("prefill", 1, 2), identity(sized("decode", 1, 3), groupIdentity="Hash"))
    explicit = roles(
        sized("prefill", 1, 2),
        identity(
            sized("decode", 1, 3), groupIdentity="Hash", groupReplacementPolicy="PostTermination"
        ),
    )
    assert compute_revision(hashed) not in ("2fc6cb1d", "")
    assert compute_revision(hashed) == compute_revision(explicit)


def test_which_role_is_hash_and_its_replacement_policy_matter() -> None:
    decode_hash = roles(
        sized("prefill", 1, 2), identity(sized("decode", 1, 3), groupIdentity="Hash")
    )
    prefill_hash = roles(
        identity(sized("prefill", 1, 2), groupIdentity="Hash"), sized("decode", 1, 3)
    )
    immediate = roles(
        sized("prefill", 1, 2),
        identity(sized("decode", 1, 3), groupIdentity="Hash", groupReplacementPolicy="Immediate"),
    )
    revisions = {compute_revision(r) for r in (decode_hash, prefill_hash, immediate)}
    assert len(revisions) == 3


# --- names --------------------------------------------------------------------------------


def test_names() -> None:
    assert lws_name("test-deploy", 1, "abc123", "prefill") == "test-deploy-1-abc123-prefill"
    assert legacy_lws_name("test-deploy", "abc123", "prefill") == "test-deploy-abc123-prefill"
    assert service_name("test-0-abc123-prefill") == "test-0-abc123-prefill-prv"
    assert scaler_name("ds", "prefill") == "ds-prefill"


def test_labels() -> None:
    assert lws_labels("test", 2, "rev1", "decode") == {
        "app": "test-2-decode",
        "disaggregatedset.x-k8s.io/role": "decode",
        "disaggregatedset.x-k8s.io/slice": "2",
        "disaggregatedset.x-k8s.io/name": "test",
        "disaggregatedset.x-k8s.io/revision": "rev1",
    }
    assert scaler_labels("ds", "prefill") == {
        "disaggregatedset.x-k8s.io/name": "ds",
        "disaggregatedset.x-k8s.io/role": "prefill",
    }


def test_service_selector_matches_the_pods_of_one_leaderworkerset() -> None:
    labels = lws_labels("test", 1, "rev1", "prefill")
    assert service_selector("test", labels) == {
        "disaggregatedset.x-k8s.io/name": "test",
        "disaggregatedset.x-k8s.io/role": "prefill",
        "disaggregatedset.x-k8s.io/revision": "rev1",
        "disaggregatedset.x-k8s.io/slice": "1",
    }


def test_legacy_service_selector_has_no_slice() -> None:
    legacy = {k: v for k, v in lws_labels("test", 0, "rev1", "prefill").items() if k != SLICE}
    assert SLICE not in service_selector("test", legacy)


def test_scaler_selector_picks_leaders() -> None:
    assert scaler_selector("ds", "decode") == (
        "disaggregatedset.x-k8s.io/name=ds,disaggregatedset.x-k8s.io/role=decode,"
        "leaderworkerset.sigs.k8s.io/worker-index=0"
    )


# --- TestSliceLabelMatches (utils_test.go) -------------------------------------------------


@pytest.mark.parametrize(
    "labels,slice_index,want",
    [
        pytest.param({}, -1, True, id="all slices matches label-less"),
        pytest.param({SLICE: "3"}, -1, True, id="all slices matches labeled"),
        pytest.param({}, 0, True, id="slice 0 matches legacy label-less"),
        pytest.param({SLICE: ""}, 0, True, id="slice 0 matches empty label"),
        pytest.param({SLICE: "0"}, 0, True, id="slice 0 matches slice 0"),
        pytest.param({SLICE: "1"}, 0, False, id="slice 0 does not match slice 1"),
        pytest.param({}, 1, False, id="slice 1 does not match legacy label-less"),
        pytest.param({SLICE: "1"}, 1, True, id="slice 1 matches slice 1"),
    ],
)
def test_slice_label_matches(labels: dict[str, str], slice_index: int, want: bool) -> None:
    assert slice_label_matches(labels, slice_index) is want


def test_has_slice_label() -> None:
    assert has_slice_label({SLICE: "0"})
    assert not has_slice_label({SLICE: ""})
    assert not has_slice_label({})


# --- TestGetInitialReplicas (utils_test.go), TestParseInitialReplicasAnnotation ----------


@pytest.mark.parametrize(
    "annotations,expected",
    [
        pytest.param({INITIAL: "5"}, 5, id="returns parsed int from valid annotation"),
        pytest.param({}, None, id="returns zero and false for missing annotation"),
        pytest.param(None, None, id="returns zero and false for nil annotations"),
        pytest.param({INITIAL: "not-a-number"}, None, id="returns zero and false for invalid"),
        pytest.param({INITIAL: ""}, None, id="returns zero and false for empty annotation value"),
        pytest.param({INITIAL: "0"}, 0, id="handles zero value annotation"),
        pytest.param({"other-key": "value"}, None, id="missing annotation returns nil"),
        pytest.param({INITIAL: "+7"}, 7, id="a sign is allowed"),
        pytest.param({INITIAL: "2147483648"}, None, id="beyond int32"),
        pytest.param({INITIAL: " 5"}, None, id="no spaces"),
    ],
)
def test_get_initial_replicas(annotations: dict[str, str] | None, expected: int | None) -> None:
    assert initial_replicas(annotations) == expected


@pytest.mark.parametrize(
    ("label", "index"),
    [
        ("0", 0),
        ("12", 12),
        ("+1", 1),
        ("-1", -1),
        (None, None),
        ("", None),
        ("1_0", None),
        ("+-1", None),
        (" 1", None),
        ("\u0663", None),
    ],
)
def test_a_slice_label_is_read_as_go_atoi_reads_it(label: str | None, index: int | None) -> None:
    # Python's int() takes "1_0", " 1" and non-ASCII digits; Go's Atoi does not.
    assert slice_of(label) == index
