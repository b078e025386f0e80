"""The pod admission mutation in Ordinal and Hash mode."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.group import names as naming
from leaderworkerset.group.names import (
    hash_worker_hostname,
    subgroup_index,
)
from leaderworkerset.webhooks.pods import Denied, PodAdmissionContext, mutate_pod
from tests.toolkit import pods

NS = "default"
KEY = "0123456789abcdef0123456789abcdef01234567"
KEY2 = "fedcba9876543210fedcba9876543210fedcba98"
ORDINAL = PodAdmissionContext()


def keys(*values: str) -> tuple[PodAdmissionContext, list[str]]:
    """A Hash context whose key function hands out `values` and records its calls."""
    calls: list[str] = []
    remaining = list(values)

    def new_key(namespace: str) -> str:
        calls.append(namespace)
        return remaining.pop(0)

    return PodAdmissionContext(group_identity=c.GROUP_IDENTITY_HASH, new_group_key=new_key), calls


HASH, _ = keys(*[KEY] * 100)


def pod(
    name: str = "test-1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    containers: int = 1,
    init_containers: int = 0,
    **spec: Any,
) -> dict[str, Any]:
    inits = [pods.container(f"i{i}", "img") for i in range(init_containers)]
    return pods.pod(
        name,
        NS,
        labels={c.LABEL_SET_NAME: "test", **(labels or {})},
        annotations={c.ANNOTATION_SIZE: "3", **(annotations or {})},
        containers=[pods.container(f"c{i}", "img") for i in range(containers)],
        init_containers=inits or None,
        spec=spec,
    )


def leader(name: str = "test-1", **kwargs: Any) -> dict[str, Any]:
    kwargs["labels"] = {c.LABEL_WORKER_INDEX: "0", **kwargs.get("labels", {})}
    kwargs.setdefault("subdomain", "test")
    return pod(name, **kwargs)


def hash_leader(**kwargs: Any) -> dict[str, Any]:
    body = leader("", **kwargs)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "test-5d8f9c7b4-"
    del body["spec"]["subdomain"]
    return body


def worker(name: str = "test-1-1", **kwargs: Any) -> dict[str, Any]:
    kwargs["labels"] = {
        c.LABEL_GROUP_INDEX: "1",
        c.LABEL_GROUP_KEY: naming.ordinal_group_key(NS, "test-1"),
        **kwargs.get("labels", {}),
    }
    kwargs["annotations"] = {c.ANNOTATION_LEADER_NAME: "test-1", **kwargs.get("annotations", {})}
    kwargs.setdefault("subdomain", "test")
    return pod(name, **kwargs)


def hash_worker(ordinal: int = 1, key: str = KEY, **kwargs: Any) -> dict[str, Any]:
    kwargs["labels"] = {
        c.LABEL_GROUP_INDEX: key,
        c.LABEL_GROUP_KEY: key,
        **kwargs.get("labels", {}),
    }
    kwargs["annotations"] = {
        c.ANNOTATION_LEADER_NAME: "test-5d8f9c7b4-x7k2p",
        **kwargs.get("annotations", {}),
    }
    return pod(f"test-5d8f9c7b4-x7k2p-{ordinal}", **kwargs)


MODES = [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH]
K8 = KEY[:8]


def leader_in(mode: str, **kwargs: Any) -> dict[str, Any]:
    """A leader as its mode's workload makes it: group 1's, named by the leader
    StatefulSet (Ordinal), or one the leader Deployment generates (Hash)."""
    return hash_leader(**kwargs) if mode == c.GROUP_IDENTITY_HASH else leader("test-1", **kwargs)


def worker_in(mode: str, ordinal: int, **kwargs: Any) -> dict[str, Any]:
    """A worker of that leader's group, as its worker StatefulSet makes it."""
    if mode == c.GROUP_IDENTITY_HASH:
        return hash_worker(ordinal, subdomain="test", **kwargs)
    return worker(f"test-1-{ordinal}", **kwargs)


def labels_of(body: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = body["metadata"]["labels"]
    return result


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {var["name"]: var.get("value", "") for var in container.get("env", [])}


def denial(body: dict[str, Any], ctx: PodAdmissionContext = ORDINAL) -> str:
    with pytest.raises(Denied) as info:
        mutate_pod(body, ctx)
    return info.value.message


# --- Hash keys ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "digest"),
    [
        ("default/test-sample", "95e88034e460983f51a9952fe128729fbc0663b5"),
        ("default/podName", "390b34ab671d29e9997d7d4252b8bbf8da02f5b7"),
        ("leaderworkerset/test-sample", "39f5d7e9122b9d94d3932e3720b43fd3b56347e8"),
    ],
)
def test_sha1_vectors(text: str, digest: str) -> None:
    assert naming.sha1_hex(text) == digest


def test_leader_group_key_is_sha1_of_namespace_and_name() -> None:
    body = leader("test-sample", labels={c.LABEL_GROUP_INDEX: "0"})
    out = mutate_pod(body)
    assert labels_of(out)[c.LABEL_GROUP_KEY] == "95e88034e460983f51a9952fe128729fbc0663b5"


# --- The basic labels --------------------------------------------------------


def test_pod_without_name_label_is_returned_unchanged() -> None:
    body = pod()
    del body["metadata"]["labels"][c.LABEL_SET_NAME]
    del body["metadata"]["annotations"]
    out = mutate_pod(body)
    assert out == body
    assert out is not body


def test_pod_without_labels_or_metadata_is_unchanged() -> None:
    assert mutate_pod({"spec": {}}) == {"spec": {}}


def test_worker_gets_worker_index_from_its_name() -> None:
    out = mutate_pod(worker("test-1-1"))
    assert labels_of(out)[c.LABEL_WORKER_INDEX] == "1"


def test_worker_index_is_always_overwritten() -> None:
    out = mutate_pod(worker("test-1-2", labels={c.LABEL_WORKER_INDEX: "7"}))
    assert labels_of(out)[c.LABEL_WORKER_INDEX] == "2"


def test_pod_without_worker_index_is_a_worker() -> None:
    body = pod("test-0-4", labels={c.LABEL_GROUP_INDEX: "0"})
    out = mutate_pod(body)
    assert labels_of(out)[c.LABEL_WORKER_INDEX] == "4"
    assert c.LABEL_GROUP_KEY not in labels_of(out)


def test_leader_gets_group_index_and_group_key() -> None:
    out = mutate_pod(leader("test-1"))
    assert labels_of(out)[c.LABEL_GROUP_INDEX] == "1"
    assert labels_of(out)[c.LABEL_GROUP_KEY] == naming.sha1_hex("default/test-1")


def test_leader_keeps_existing_group_index_and_key() -> None:
    body = leader("test-1", labels={c.LABEL_GROUP_INDEX: "9", c.LABEL_GROUP_KEY: "k"})
    out = mutate_pod(body)
    assert labels_of(out)[c.LABEL_GROUP_INDEX] == "9"
    assert labels_of(out)[c.LABEL_GROUP_KEY] == "k"


def test_input_is_not_modified() -> None:
    body = leader("test-1", annotations={c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone"})
    before = copy.deepcopy(body)
    mutate_pod(body)
    assert body == before


def test_leader_address_is_first_env_of_every_container_and_init_container() -> None:
    body = worker("test-1-2", containers=2, init_containers=2)
    body["spec"]["containers"][0]["env"] = [{"name": "A", "value": "a"}]
    body["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "img"}]
    out = mutate_pod(body)
    spec = out["spec"]
    for container in spec["containers"] + spec["initContainers"]:
        assert container["env"][0] == {"name": c.ENV_LEADER_ADDRESS, "value": "test-1.test.default"}
        assert env_of(container)[c.ENV_GROUP_SIZE] == "3"
        assert env_of(container)[c.ENV_WORKER_INDEX] == "2"
    assert "env" not in spec["ephemeralContainers"][0]


def test_no_tpu_variables_without_tpu_requests() -> None:
    out = mutate_pod(leader("test-1"))
    assert set(env_of(out["spec"]["containers"][0])) == set(c.LWS_ENV_NAMES)


def test_tpu_variables_only_for_lws_pods() -> None:
    body = leader("test-1")
    body["spec"]["containers"][0]["resources"] = {"limits": {c.TPU_RESOURCE_NAME: "4"}}
    assert c.ENV_TPU_WORKER_ID in env_of(mutate_pod(body)["spec"]["containers"][0])
    del body["metadata"]["labels"][c.LABEL_SET_NAME]
    assert mutate_pod(body) == body


# --- denials -------------------------------------------------------------------------------


def test_missing_size_annotation_is_denied() -> None:
    body = leader("test-1")
    del body["metadata"]["annotations"][c.ANNOTATION_SIZE]
    assert denial(body) == "size annotation is unexpectedly missing for pod test-1"


def test_no_annotations_at_all_is_denied() -> None:
    body = worker("test-1-1")
    body["metadata"]["annotations"] = None
    assert denial(body) == "size annotation is unexpectedly missing for pod test-1-1"


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("abc", 'strconv.Atoi: parsing "abc": invalid syntax'),
        ("", 'strconv.Atoi: parsing "": invalid syntax'),
        (" 3", 'strconv.Atoi: parsing " 3": invalid syntax'),
        (
            "99999999999999999999",
            'strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
    ],
)
def test_unparseable_size_is_denied_with_the_parse_error(size: str, message: str) -> None:
    assert denial(leader("test-1", annotations={c.ANNOTATION_SIZE: size})) == message


def test_leader_without_ordinal_is_denied() -> None:
    assert denial(leader("test")) == "parsing pod ordinal for pod test"


def test_leader_with_group_index_needs_no_ordinal() -> None:
    out = mutate_pod(leader("test", labels={c.LABEL_GROUP_INDEX: "0"}))
    assert labels_of(out)[c.LABEL_GROUP_KEY] == naming.sha1_hex("default/test")


def test_worker_without_ordinal_is_denied() -> None:
    assert denial(worker("test-x")) == "parsing pod ordinal for pod test-x"


def test_worker_with_int32_overflowing_ordinal_is_denied() -> None:
    assert denial(worker("test-1-2147483648")) == "parsing pod ordinal for pod test-1-2147483648"


def test_worker_without_group_index_is_denied_by_env_construction() -> None:
    body = worker("test-1-1")
    del body["metadata"]["labels"][c.LABEL_GROUP_INDEX]
    assert denial(body) == (
        "Failure constructing environment variables, "
        "no group index label found for pod default/test-1-1"
    )


@pytest.mark.parametrize(("value", "bad"), [("x", '"x": invalid syntax'), ("0", None)])
def test_worker_with_bad_subgroup_size_is_denied(value: str, bad: str | None) -> None:
    message = denial(worker("test-1-1", annotations={c.ANNOTATION_SUBGROUP_SIZE: value}))
    if bad is None:
        assert message == "subgroup size must be a positive integer for pod test-1-1"
    else:
        assert message == f"strconv.Atoi: parsing {bad}"


# --- UniquePerReplica ------------------------------------------------------------------

UNIQUE = {c.ANNOTATION_SUBDOMAIN_POLICY: c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA}


@pytest.mark.parametrize(
    ("mode", "ctx", "subdomain", "address"),
    [
        (c.GROUP_IDENTITY_ORDINAL, ORDINAL, "test-1", "test-1.test-1.default"),
        (c.GROUP_IDENTITY_HASH, HASH, f"test-{K8}", f"{K8}.test-{K8}.default"),
    ],
    ids=MODES,
)
def test_unique_per_replica_leader_subdomain_is_its_groups_service(
    mode: str, ctx: PodAdmissionContext, subdomain: str, address: str
) -> None:
    """The group's Service is named after the leader (Ordinal) or `<lws>-<key8>` (Hash)."""
    out = mutate_pod(leader_in(mode, annotations=UNIQUE), ctx)
    assert out["spec"]["subdomain"] == subdomain
    assert env_of(out["spec"]["containers"][0])[c.ENV_LEADER_ADDRESS] == address


@pytest.mark.parametrize(
    ("mode", "ctx", "hostname", "address"),
    [
        (c.GROUP_IDENTITY_ORDINAL, ORDINAL, None, "test-1.test.default"),
        (c.GROUP_IDENTITY_HASH, HASH, K8, f"{K8}.test.default"),
    ],
    ids=MODES,
)
def test_shared_leader_subdomain_is_the_lws(
    mode: str, ctx: PodAdmissionContext, hostname: str | None, address: str
) -> None:
    """An Ordinal leader keeps the subdomain and hostname its StatefulSet gave it; a Hash
    leader is given both, the hostname being its group key's first 8 characters."""
    out = mutate_pod(leader_in(mode), ctx)
    assert out["spec"].get("hostname") == hostname
    assert out["spec"]["subdomain"] == "test"
    assert env_of(out["spec"]["containers"][0])[c.ENV_LEADER_ADDRESS] == address


def test_unique_per_replica_worker_keeps_its_statefulset_subdomain() -> None:
    out = mutate_pod(worker("test-1-1", annotations=UNIQUE, subdomain="test-1"))
    assert out["spec"]["subdomain"] == "test-1"
    assert env_of(out["spec"]["containers"][0])[c.ENV_LEADER_ADDRESS] == "test-1.test-1.default"


# --- Gang scheduling ----------------------------------------------------------------

GANG = PodAdmissionContext(gang_scheduling=True)
HASH_GANG = PodAdmissionContext(
    group_identity=c.GROUP_IDENTITY_HASH, gang_scheduling=True, new_group_key=lambda _: KEY
)


@pytest.mark.parametrize(
    ("mode", "ctx", "group_index"),
    [(c.GROUP_IDENTITY_ORDINAL, GANG, "1"), (c.GROUP_IDENTITY_HASH, HASH_GANG, KEY)],
    ids=MODES,
)
def test_gang_scheduling_names_the_pod_group(
    mode: str, ctx: PodAdmissionContext, group_index: str
) -> None:
    """`<lws>-<group index>-<revision>`, the group index being the key in Hash mode."""
    rev = {c.LABEL_TEMPLATE_REVISION_HASH: "abc123"}
    leader_out = mutate_pod(leader_in(mode, labels=rev), ctx)
    worker_out = mutate_pod(worker_in(mode, 2, labels=rev), ctx)
    for out in (leader_out, worker_out):
        name = out["metadata"]["annotations"][c.ANNOTATION_POD_GROUP_NAME]
        assert name == f"test-{group_index}-abc123"


def test_gang_scheduling_leaves_missing_segments_empty() -> None:
    out = mutate_pod(leader("test-2"), GANG)
    assert out["metadata"]["annotations"][c.ANNOTATION_POD_GROUP_NAME] == "test-2-"


def test_no_pod_group_without_gang_scheduling() -> None:
    assert (
        c.ANNOTATION_POD_GROUP_NAME not in mutate_pod(leader("test-1"))["metadata"]["annotations"]
    )


# --- Workload-Aware Scheduling (the Kubernetes provider) ------------------------------

MARKED = {s.ANNOTATION_WORKLOAD_AWARE_SCHEDULING: "true"}
WAS = PodAdmissionContext(workload_scheduling=True)
HASH_WAS = PodAdmissionContext(
    group_identity=c.GROUP_IDENTITY_HASH, workload_scheduling=True, new_group_key=lambda _: KEY
)


@pytest.mark.parametrize(
    ("mode", "ctx", "group_index"),
    [(c.GROUP_IDENTITY_ORDINAL, WAS, "1"), (c.GROUP_IDENTITY_HASH, HASH_WAS, KEY)],
    ids=MODES,
)
def test_workload_scheduling_stamps_the_group_pod_group_on_leader_and_workers(
    mode: str, ctx: PodAdmissionContext, group_index: str
) -> None:
    rev = {c.LABEL_TEMPLATE_REVISION_HASH: "abc123"}
    leader_out = mutate_pod(leader_in(mode, labels=rev, annotations=MARKED), ctx)
    worker_out = mutate_pod(worker_in(mode, 2, labels=rev, annotations=MARKED), ctx)
    for out in (leader_out, worker_out):
        assert out["spec"]["schedulingGroup"] == {"podGroupName": f"test-{group_index}-abc123"}
        # Not Volcano's annotation: the two providers do not mix.
        assert c.ANNOTATION_POD_GROUP_NAME not in out["metadata"]["annotations"]


def test_no_scheduling_group_without_the_mark_or_without_the_provider() -> None:
    rev = {c.LABEL_TEMPLATE_REVISION_HASH: "abc123"}
    unmarked = mutate_pod(leader("test-1", labels=rev), WAS)
    assert "schedulingGroup" not in unmarked["spec"]
    off = mutate_pod(leader("test-1", labels=rev, annotations=MARKED))
    assert "schedulingGroup" not in off["spec"]


# --- Subgroups ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "sgs", "expected"),
    [
        (4, 2, {1: "0", 2: "1", 3: "1"}),
        (5, 2, {1: "0", 2: "0", 3: "1", 4: "1"}),
        (3, 1, {1: "1", 2: "2"}),
        (9, 4, {1: "0", 4: "0", 5: "1", 8: "1"}),
        (8, 4, {1: "0", 3: "0", 4: "1", 7: "1"}),
    ],
)
def test_subgroup_index_table(size: int, sgs: int, expected: dict[int, str]) -> None:
    assert {w: subgroup_index(size, sgs, w) for w in expected} == expected


def test_subgroup_index_truncates_like_go_for_ordinal_zero() -> None:
    assert subgroup_index(5, 2, 0) == "0"
    assert subgroup_index(3, 1, 0) == "0"


def subgroups(policy: str, sgs: int = 2, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        c.ANNOTATION_SUBGROUP_SIZE: str(sgs),
        c.ANNOTATION_SUBGROUP_POLICY_TYPE: policy,
        **(extra or {}),
    }


@pytest.mark.parametrize(
    ("size", "policy", "leader_index", "workers"),
    [
        (4, c.SUBGROUP_POLICY_LEADER_WORKER, "0", {1: "0", 2: "1", 3: "1"}),
        (5, c.SUBGROUP_POLICY_LEADER_WORKER, "0", {1: "0", 2: "0", 3: "1", 4: "1"}),
        (5, c.SUBGROUP_POLICY_LEADER_EXCLUDED, None, {1: "0", 2: "0", 3: "1", 4: "1"}),
    ],
)
def test_subgroup_layouts(
    size: int, policy: str, leader_index: str | None, workers: dict[int, str]
) -> None:
    annotations = {**subgroups(policy), c.ANNOTATION_SIZE: str(size)}
    leader_labels = labels_of(mutate_pod(leader("test-1", annotations=annotations)))
    assert leader_labels.get(c.LABEL_SUBGROUP_INDEX) == leader_index
    if leader_index is not None:
        assert leader_labels[c.LABEL_SUBGROUP_KEY] == naming.sha1_hex("test-1/0")
    else:
        assert c.LABEL_SUBGROUP_KEY not in leader_labels
    for ordinal, index in workers.items():
        out = labels_of(mutate_pod(worker(f"test-1-{ordinal}", annotations=annotations)))
        assert out[c.LABEL_SUBGROUP_INDEX] == index
        assert out[c.LABEL_SUBGROUP_KEY] == naming.sha1_hex(f"test-1/{index}")


def test_size_3_subgroup_size_1_layouts() -> None:
    for policy, leader_index in (
        (c.SUBGROUP_POLICY_LEADER_WORKER, "0"),
        (c.SUBGROUP_POLICY_LEADER_EXCLUDED, None),
    ):
        annotations = subgroups(policy, sgs=1)
        out = labels_of(mutate_pod(leader("test-0", annotations=annotations)))
        assert out.get(c.LABEL_SUBGROUP_INDEX) == leader_index
        for ordinal in (1, 2):
            out = labels_of(mutate_pod(worker(f"test-0-{ordinal}", annotations=annotations)))
            assert out[c.LABEL_SUBGROUP_INDEX] == str(ordinal)


def test_existing_subgroup_index_is_kept_and_empty_one_is_assigned() -> None:
    annotations = subgroups(c.SUBGROUP_POLICY_LEADER_WORKER, sgs=1)
    kept = mutate_pod(
        worker("test-1-2", annotations=annotations, labels={c.LABEL_SUBGROUP_INDEX: "7"})
    )
    assert labels_of(kept)[c.LABEL_SUBGROUP_INDEX] == "7"
    assert c.LABEL_SUBGROUP_KEY not in labels_of(kept)
    empty = mutate_pod(
        worker("test-1-2", annotations=annotations, labels={c.LABEL_SUBGROUP_INDEX: ""})
    )
    assert labels_of(empty)[c.LABEL_SUBGROUP_INDEX] == "2"


def test_worker_subgroup_key_uses_leader_name_annotation() -> None:
    body = worker("test-1-1", annotations=subgroups(c.SUBGROUP_POLICY_LEADER_WORKER))
    del body["metadata"]["annotations"][c.ANNOTATION_LEADER_NAME]
    assert labels_of(mutate_pod(body))[c.LABEL_SUBGROUP_KEY] == naming.sha1_hex("/0")


# --- Exclusive placement through the mutation -----------------------------------


def required(out: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = out["spec"]["affinity"][kind][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    return terms


def selector_values(term: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [
        (e["key"], e["operator"], tuple(e.get("values", [])))
        for e in term["labelSelector"]["matchExpressions"]
    ]


@pytest.mark.parametrize(
    ("mode", "ctx", "key"),
    [
        (c.GROUP_IDENTITY_ORDINAL, ORDINAL, naming.sha1_hex("default/test-1")),
        (c.GROUP_IDENTITY_HASH, HASH, KEY),
    ],
    ids=MODES,
)
def test_leader_exclusive_topology_keys_on_group_key(
    mode: str, ctx: PodAdmissionContext, key: str
) -> None:
    out = mutate_pod(leader_in(mode, annotations={c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone"}), ctx)
    assert labels_of(out)[c.LABEL_GROUP_KEY] == key
    (affinity,) = required(out, "podAffinity")
    (anti,) = required(out, "podAntiAffinity")
    assert affinity["topologyKey"] == anti["topologyKey"] == "zone"
    assert selector_values(affinity) == [(c.LABEL_GROUP_KEY, "In", (key,))]
    assert selector_values(anti) == [
        (c.LABEL_GROUP_KEY, "Exists", ()),
        (c.LABEL_GROUP_KEY, "NotIn", (key,)),
    ]


def test_workers_never_get_group_level_terms() -> None:
    out = mutate_pod(worker("test-1-1", annotations={c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone"}))
    assert "affinity" not in out["spec"]


def test_exclusive_terms_are_not_duplicated_and_existing_terms_kept() -> None:
    foreign = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "host"}
    body = leader("test-1", annotations={c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone"})
    body["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [foreign]}
    }
    once = mutate_pod(body)
    assert required(once, "podAffinity")[0] == foreign
    assert len(required(once, "podAffinity")) == 2
    assert mutate_pod(once) == once


def test_subgroup_exclusive_topology_for_leader_and_worker() -> None:
    annotations = subgroups(
        c.SUBGROUP_POLICY_LEADER_WORKER,
        extra={c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: "rack"},
    )
    for body in (
        leader("test-1", annotations=annotations),
        worker("test-1-1", annotations=annotations),
    ):
        out = mutate_pod(body)
        key = labels_of(out)[c.LABEL_SUBGROUP_KEY]
        (affinity,) = required(out, "podAffinity")
        assert affinity["topologyKey"] == "rack"
        assert selector_values(affinity) == [(c.LABEL_SUBGROUP_KEY, "In", (key,))]


def test_identical_topology_keys_suppress_leader_subgroup_terms() -> None:
    # Kept as upstream: docs/upstream-deviations.md#equal-group-and-subgroup-topology-keys.
    annotations = subgroups(
        c.SUBGROUP_POLICY_LEADER_WORKER,
        extra={
            c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone",
            c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: "zone",
        },
    )
    out = mutate_pod(leader("test-1", annotations=annotations))
    (affinity,) = required(out, "podAffinity")
    assert selector_values(affinity)[0][0] == c.LABEL_GROUP_KEY
    assert labels_of(out)[c.LABEL_SUBGROUP_INDEX] == "0"


def test_empty_exclusive_topology_still_adds_terms() -> None:
    out = mutate_pod(leader("test-1", annotations={c.ANNOTATION_EXCLUSIVE_TOPOLOGY: ""}))
    assert required(out, "podAffinity")[0]["topologyKey"] == ""


# --- Hash mode: leaders --------------------------------------------------------------------


def test_hash_leader_gets_a_key_from_the_injected_function() -> None:
    ctx, calls = keys(KEY)
    out = mutate_pod(hash_leader(), ctx)
    assert calls == [NS]
    assert labels_of(out)[c.LABEL_GROUP_KEY] == KEY
    assert labels_of(out)[c.LABEL_GROUP_INDEX] == KEY


def test_hash_leader_keys_differ_per_leader() -> None:
    ctx, _ = keys(KEY, KEY2)
    first, second = mutate_pod(hash_leader(), ctx), mutate_pod(hash_leader(), ctx)
    assert labels_of(first)[c.LABEL_GROUP_KEY] != labels_of(second)[c.LABEL_GROUP_KEY]


def test_default_hash_keys_are_random_40_hex() -> None:
    ctx = PodAdmissionContext(group_identity=c.GROUP_IDENTITY_HASH)
    drawn = {labels_of(mutate_pod(hash_leader(), ctx))[c.LABEL_GROUP_KEY] for _ in range(5)}
    assert len(drawn) == 5
    assert all(len(k) == 40 and set(k) <= set("0123456789abcdef") for k in drawn)


def test_hash_leader_readiness_gate_only_for_groups_larger_than_one() -> None:
    gated = mutate_pod(hash_leader(), HASH)
    assert gated["spec"]["readinessGates"] == [{"conditionType": c.CONDITION_GROUP_READY}]
    single = mutate_pod(hash_leader(annotations={c.ANNOTATION_SIZE: "1"}), HASH)
    assert "readinessGates" not in single["spec"]


def test_hash_leader_scheduling_gate_only_under_post_termination() -> None:
    gated = mutate_pod(hash_leader(), HASH)
    assert gated["spec"]["schedulingGates"] == [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    ctx = PodAdmissionContext(
        group_identity=c.GROUP_IDENTITY_HASH,
        group_replacement_policy=c.GROUP_REPLACEMENT_IMMEDIATE,
        new_group_key=lambda _: KEY,
    )
    assert "schedulingGates" not in mutate_pod(hash_leader(), ctx)["spec"]


def test_hash_leader_gates_are_appended_once_and_others_kept() -> None:
    body = hash_leader(
        readinessGates=[{"conditionType": "other"}, {"conditionType": c.CONDITION_GROUP_READY}],
        schedulingGates=[{"name": "user"}],
    )
    out = mutate_pod(body, HASH)
    assert out["spec"]["readinessGates"] == body["spec"]["readinessGates"]
    assert out["spec"]["schedulingGates"] == [
        {"name": "user"},
        {"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT},
    ]


def test_ordinal_leader_gets_no_gates() -> None:
    out = mutate_pod(leader("test-1"))
    assert "readinessGates" not in out["spec"]
    assert "schedulingGates" not in out["spec"]


def test_hash_leader_keeps_an_existing_key() -> None:
    ctx, calls = keys()
    out = mutate_pod(hash_leader(labels={c.LABEL_GROUP_KEY: KEY2}), ctx)
    assert calls == []
    assert labels_of(out)[c.LABEL_GROUP_INDEX] == KEY2
    assert out["spec"]["hostname"] == KEY2[:8]


def test_hash_leader_subgroup_key_hashes_the_group_key() -> None:
    out = mutate_pod(hash_leader(annotations=subgroups(c.SUBGROUP_POLICY_LEADER_WORKER)), HASH)
    assert labels_of(out)[c.LABEL_SUBGROUP_INDEX] == "0"
    assert labels_of(out)[c.LABEL_SUBGROUP_KEY] == naming.sha1_hex(f"{KEY}/0")
    assert naming.subgroup_key(KEY, 0) == naming.sha1_hex(f"{KEY}/0")


def test_hash_denials_name_the_generate_name() -> None:
    body = hash_leader()
    del body["metadata"]["annotations"][c.ANNOTATION_SIZE]
    assert denial(body, HASH) == "size annotation is unexpectedly missing for pod test-5d8f9c7b4-"


# --- Hash mode: workers ----------------------------------------------------------------------


def test_hash_worker_hostname_and_leader_address() -> None:
    out = mutate_pod(hash_worker(2, subdomain="test"), HASH)
    assert labels_of(out)[c.LABEL_WORKER_INDEX] == "2"
    assert out["spec"]["hostname"] == hash_worker_hostname(KEY, 2) == f"{KEY[:8]}-2"
    assert out["spec"]["subdomain"] == "test"
    env = env_of(out["spec"]["containers"][0])
    assert env[c.ENV_LEADER_ADDRESS] == f"{KEY[:8]}.test.default"


def test_hash_worker_address_matches_leader_under_unique_per_replica() -> None:
    leader_out = mutate_pod(hash_leader(annotations=UNIQUE), HASH)
    service = leader_out["spec"]["subdomain"]
    worker_out = mutate_pod(hash_worker(1, subdomain=service), HASH)
    address = env_of(worker_out["spec"]["containers"][0])[c.ENV_LEADER_ADDRESS]
    assert address == env_of(leader_out["spec"]["containers"][0])[c.ENV_LEADER_ADDRESS]


def test_hash_worker_without_group_key_is_denied() -> None:
    body = hash_worker(1, subdomain="test")
    del body["metadata"]["labels"][c.LABEL_GROUP_KEY]
    assert denial(body, HASH) == (
        "Failure constructing environment variables, no group key label found for pod "
        "default/test-5d8f9c7b4-x7k2p-1"
    )


def test_hash_subgroup_keys_agree_between_leader_and_workers() -> None:
    annotations = {**subgroups(c.SUBGROUP_POLICY_LEADER_WORKER), c.ANNOTATION_SIZE: "4"}
    leader_out = mutate_pod(hash_leader(annotations=annotations), HASH)
    first = mutate_pod(hash_worker(1, annotations=annotations, subdomain="test"), HASH)
    second = mutate_pod(hash_worker(2, annotations=annotations, subdomain="test"), HASH)
    assert labels_of(first)[c.LABEL_SUBGROUP_KEY] == labels_of(leader_out)[c.LABEL_SUBGROUP_KEY]
    assert labels_of(second)[c.LABEL_SUBGROUP_KEY] == naming.subgroup_key(KEY, "1")


def test_hash_workers_get_no_gates() -> None:
    out = mutate_pod(hash_worker(1, subdomain="test"), HASH)
    assert "readinessGates" not in out["spec"]
    assert "schedulingGates" not in out["spec"]


# --- idempotence -------------------------------------------------------------------------------


@st.composite
def lws_pods(draw: st.DrawFn) -> tuple[dict[str, Any], PodAdmissionContext]:
    hash_mode = draw(st.booleans())
    size = draw(st.integers(1, 6))
    annotations: dict[str, str] = {c.ANNOTATION_SIZE: str(size)}
    if draw(st.booleans()):
        annotations[c.ANNOTATION_EXCLUSIVE_TOPOLOGY] = draw(st.sampled_from(["zone", "rack"]))
    if draw(st.booleans()):
        annotations.update(UNIQUE)
    if size > 1 and draw(st.booleans()):
        annotations.update(
            subgroups(
                draw(st.sampled_from(c.SUBGROUP_POLICY_TYPES)), sgs=draw(st.integers(1, size))
            )
        )
        if draw(st.booleans()):
            annotations[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] = draw(
                st.sampled_from(["zone", "rack"])
            )
    if draw(st.booleans()):
        annotations[c.ANNOTATION_LEADER_REQUESTS_TPUS] = "true"
    ordinal = draw(st.integers(0, size - 1))
    if hash_mode:
        body = (
            hash_leader(annotations=annotations)
            if ordinal == 0
            else hash_worker(ordinal, annotations=annotations, subdomain="test")
        )
    else:
        body = (
            leader("test-1", annotations=annotations)
            if ordinal == 0
            else worker(f"test-1-{ordinal}", annotations=annotations)
        )
    for container in body["spec"]["containers"]:
        if draw(st.booleans()):
            container["resources"] = {"limits": {c.TPU_RESOURCE_NAME: "4"}}
        if draw(st.booleans()):
            container["env"] = [{"name": c.ENV_WORKER_INDEX, "value": "9"}, {"name": "X"}]
    ctx = PodAdmissionContext(
        group_identity=c.GROUP_IDENTITY_HASH if hash_mode else c.GROUP_IDENTITY_ORDINAL,
        gang_scheduling=draw(st.booleans()),
        new_group_key=lambda _: KEY,
    )
    return body, ctx


@given(lws_pods())
def test_mutating_a_mutated_pod_changes_nothing(
    case: tuple[dict[str, Any], PodAdmissionContext],
) -> None:
    body, ctx = case
    once = mutate_pod(body, ctx)
    assert mutate_pod(once, ctx) == once
