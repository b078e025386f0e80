"""TPU environment variables, the excluded TPU leader that upstream denies, and
Hash-mode host names."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.group.names import hash_worker_hostname
from leaderworkerset.group.tpu import container_requests_tpus, pod_requests_tpus, tpu_containers
from leaderworkerset.webhooks.pods import Denied, PodAdmissionContext, mutate_pod
from leaderworkerset.webhooks.tpu import add_tpu_env
from tests.toolkit.pods import container
from tests.toolkit.pods import pod as a_pod

KEY = "0123456789abcdef0123456789abcdef01234567"
TPU = {"limits": {c.TPU_RESOURCE_NAME: "4"}}
TPU_NAMES = (
    c.ENV_TPU_WORKER_HOSTNAMES,
    c.ENV_TPU_WORKER_ID,
    c.ENV_TPU_NAME,
    c.ENV_TPU_PROCESS_ADDRESSES,
    c.ENV_TPU_PROCESS_PORT,
)


def tpu_pod(
    name: str,
    *,
    worker_index: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    tpus: int = 1,
    subdomain: str = "default",
) -> dict[str, Any]:
    """A pod as the TPU step sees it: after the webhook set its labels."""
    index = worker_index if worker_index is not None else name.rsplit("-", 1)[-1]
    return a_pod(
        name,
        "default",
        labels={c.LABEL_WORKER_INDEX: index, **(labels or {})},
        annotations=annotations or {},
        containers=[container(f"tpu{k}", "img", resources=TPU) for k in range(tpus)],
        spec={"subdomain": subdomain},
    )


def env(container: dict[str, Any]) -> dict[str, str]:
    return {var["name"]: var.get("value", "") for var in container.get("env", [])}


def first_env(pod: dict[str, Any]) -> dict[str, str]:
    return env(pod["spec"]["containers"][0])


def hosts(*names: str, sub: str = "default") -> str:
    return ",".join(f"{n}.{sub}" for n in names)


def addresses(*pairs: tuple[str, str], sub: str = "default") -> str:
    return ",".join(f"{n}.{sub}:{port}" for n, port in pairs)


LRT = {c.ANNOTATION_LEADER_REQUESTS_TPUS: "true"}


# --- which containers request TPUs -------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "requests_tpus"),
    [
        ({"limits": {c.TPU_RESOURCE_NAME: "4"}}, True),
        ({"requests": {c.TPU_RESOURCE_NAME: "1"}}, True),
        ({"limits": {c.TPU_RESOURCE_NAME: "0"}, "requests": {c.TPU_RESOURCE_NAME: "2"}}, True),
        ({"limits": {c.TPU_RESOURCE_NAME: "0"}, "requests": {c.TPU_RESOURCE_NAME: "0"}}, False),
        ({"limits": {c.TPU_RESOURCE_NAME: "1k"}}, True),
        ({"limits": {c.TPU_RESOURCE_NAME: "500m"}}, True),
        ({"limits": {c.TPU_RESOURCE_NAME: "0.0"}}, False),
        ({"limits": {c.TPU_RESOURCE_NAME: "0e3"}}, False),
        ({"limits": {c.TPU_RESOURCE_NAME: 8}}, True),
        ({"limits": {c.TPU_RESOURCE_NAME: 0}}, False),
        ({"limits": {"nvidia.com/gpu": "1"}}, False),
        ({"limits": {c.TPU_RESOURCE_NAME: "junk"}}, False),
        ({}, False),
        (None, False),
    ],
)
def test_container_requests_tpus(resources: dict[str, Any] | None, requests_tpus: bool) -> None:
    assert container_requests_tpus({"name": "c", "resources": resources}) is requests_tpus


def test_tpu_containers_are_containers_then_init_containers() -> None:
    pod = {
        "spec": {
            "initContainers": [{"name": "i0", "resources": TPU}, {"name": "i1"}],
            "containers": [{"name": "c0"}, {"name": "c1", "resources": TPU}],
        }
    }
    assert [x["name"] for x in tpu_containers(pod)] == ["c1", "i0"]
    assert pod_requests_tpus(pod)
    assert not pod_requests_tpus({"spec": {"containers": [{"name": "c"}]}})


# --- A. without subgroups -------------------------------------------------------------------


def test_leader_size_2() -> None:
    pod = tpu_pod("test-sample-0")
    add_tpu_env(pod, 2)
    assert first_env(pod) == {
        c.ENV_TPU_WORKER_HOSTNAMES: hosts("test-sample-0", "test-sample-0-1"),
        c.ENV_TPU_WORKER_ID: "0",
        c.ENV_TPU_NAME: "test-sample-0",
        c.ENV_TPU_PROCESS_ADDRESSES: addresses(
            ("test-sample-0", "8476"), ("test-sample-0-1", "8476")
        ),
        c.ENV_TPU_PROCESS_PORT: "8476",
    }
    assert [v["name"] for v in pod["spec"]["containers"][0]["env"]] == list(TPU_NAMES)


def test_worker_without_leader_tpus_size_2() -> None:
    pod = tpu_pod("test-sample-0-1")
    add_tpu_env(pod, 2)
    assert first_env(pod)[c.ENV_TPU_WORKER_HOSTNAMES] == hosts("test-sample-0-1")
    assert first_env(pod)[c.ENV_TPU_WORKER_ID] == "0"
    assert first_env(pod)[c.ENV_TPU_NAME] == "test-sample-0"


def test_worker_with_leader_tpus_counts_the_leader() -> None:
    pod = tpu_pod("test-sample-0-2", annotations=LRT)
    add_tpu_env(pod, 3)
    assert first_env(pod)[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(
        "test-sample-0", "test-sample-0-1", "test-sample-0-2"
    )
    assert first_env(pod)[c.ENV_TPU_WORKER_ID] == "2"


def test_two_tpu_containers_in_the_leader() -> None:
    pod = tpu_pod("test-sample-0", tpus=2)
    add_tpu_env(pod, 2)
    first, second = (env(x) for x in pod["spec"]["containers"])
    expected_hosts = hosts("test-sample-0", "test-sample-0", "test-sample-0-1", "test-sample-0-1")
    expected_addresses = addresses(
        ("test-sample-0", "8476"),
        ("test-sample-0", "8477"),
        ("test-sample-0-1", "8476"),
        ("test-sample-0-1", "8477"),
    )
    for container_env in (first, second):
        assert container_env[c.ENV_TPU_WORKER_HOSTNAMES] == expected_hosts
        assert container_env[c.ENV_TPU_PROCESS_ADDRESSES] == expected_addresses
    assert (first[c.ENV_TPU_WORKER_ID], second[c.ENV_TPU_WORKER_ID]) == ("0", "1")
    assert (first[c.ENV_TPU_PROCESS_PORT], second[c.ENV_TPU_PROCESS_PORT]) == ("8476", "8477")


def test_two_tpu_containers_in_a_worker_rank_after_the_leader() -> None:
    pod = tpu_pod("test-sample-0-1", tpus=2, annotations=LRT)
    add_tpu_env(pod, 2)
    ids = [env(x)[c.ENV_TPU_WORKER_ID] for x in pod["spec"]["containers"]]
    assert ids == ["2", "3"]


def test_user_process_port_is_used_and_not_repeated() -> None:
    pod = tpu_pod("test-sample-0", tpus=2)
    pod["spec"]["containers"][1]["env"] = [{"name": c.ENV_TPU_PROCESS_PORT, "value": "9000"}]
    add_tpu_env(pod, 2)
    second = pod["spec"]["containers"][1]["env"]
    assert [v["name"] for v in second].count(c.ENV_TPU_PROCESS_PORT) == 1
    assert env(pod["spec"]["containers"][0])[c.ENV_TPU_PROCESS_ADDRESSES] == addresses(
        ("test-sample-0", "8476"),
        ("test-sample-0", "9000"),
        ("test-sample-0-1", "8476"),
        ("test-sample-0-1", "9000"),
    )


@pytest.mark.parametrize("present", [c.ENV_TPU_WORKER_HOSTNAMES, c.ENV_TPU_WORKER_ID])
def test_nothing_added_when_first_tpu_container_already_has_them(present: str) -> None:
    pod = tpu_pod("test-sample-0", tpus=2)
    pod["spec"]["containers"][0]["env"] = [{"name": present, "value": "x"}]
    add_tpu_env(pod, 2)
    assert pod["spec"]["containers"][0]["env"] == [{"name": present, "value": "x"}]
    assert "env" not in pod["spec"]["containers"][1]


def test_init_containers_rank_after_containers_and_others_get_nothing() -> None:
    pod = tpu_pod("test-sample-0")
    pod["spec"]["containers"].append({"name": "sidecar", "image": "img"})
    pod["spec"]["initContainers"] = [{"name": "init", "image": "img", "resources": TPU}]
    add_tpu_env(pod, 2)
    init = env(pod["spec"]["initContainers"][0])
    assert init[c.ENV_TPU_WORKER_ID] == "1"
    assert init[c.ENV_TPU_PROCESS_PORT] == "8477"
    assert "env" not in pod["spec"]["containers"][1]


def test_pod_without_tpus_is_untouched() -> None:
    pod = tpu_pod("test-sample-0")
    pod["spec"]["containers"][0]["resources"] = {}
    add_tpu_env(pod, 2)
    assert "env" not in pod["spec"]["containers"][0]


def test_worker_without_parent_name_is_denied() -> None:
    pod = tpu_pod("nosuffix", worker_index="1")
    with pytest.raises(Denied) as info:
        add_tpu_env(pod, 2)
    assert info.value.message == "parsing parent name from pod nosuffix"


# --- B. with subgroups ------------------------------------------------------------------------


def subgroup_pod(name: str, sgs: int, subgroup: str | None, **annotations: str) -> dict[str, Any]:
    labels = {c.LABEL_SUBGROUP_INDEX: subgroup} if subgroup is not None else {}
    return tpu_pod(
        name,
        labels=labels,
        annotations={c.ANNOTATION_SUBGROUP_SIZE: str(sgs), **annotations},
    )


@pytest.mark.parametrize(
    ("name", "sgs", "subgroup", "annotations", "worker_id", "members"),
    [
        ("test-sample-1-7", 4, "1", LRT, "3", ["test-sample-1-4", "-5", "-6", "-7"]),
        ("test-sample-1-5", 4, "1", {}, "0", ["test-sample-1-5", "-6", "-7", "-8"]),
        (
            "test-sample-0-2",
            2,
            "0",
            {c.ANNOTATION_SUBGROUP_POLICY_TYPE: c.SUBGROUP_POLICY_LEADER_EXCLUDED},
            "1",
            ["test-sample-0-1", "-2"],
        ),
        ("test-sample-0", 2, "0", {}, "0", ["test-sample-0", "test-sample-0-1"]),
        ("test-sample-0-1", 2, "0", LRT, "1", ["test-sample-0", "test-sample-0-1"]),
        ("test-sample-0-3", 2, "1", LRT, "1", ["test-sample-0-2", "-3"]),
    ],
)
def test_subgroup_examples(
    name: str,
    sgs: int,
    subgroup: str,
    annotations: dict[str, str],
    worker_id: str,
    members: list[str],
) -> None:
    # Short "-N" entries continue the preceding full name's prefix.
    full: list[str] = []
    for member in members:
        full.append(full[-1].rsplit("-", 1)[0] + member if member.startswith("-") else member)
    pod = subgroup_pod(name, sgs, subgroup, **annotations)
    add_tpu_env(pod, 0)
    got = first_env(pod)
    assert got[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(*full)
    assert got[c.ENV_TPU_WORKER_ID] == worker_id
    assert got[c.ENV_TPU_PROCESS_ADDRESSES] == addresses(*((m, "8476") for m in full))
    is_leader = pod["metadata"]["labels"][c.LABEL_WORKER_INDEX] == "0"
    leader = name if is_leader else name.rsplit("-", 1)[0]
    assert got[c.ENV_TPU_NAME] == leader


def test_subgroup_leader_example_with_named_subdomain() -> None:
    pod = subgroup_pod("test-sample-0", 2, "0")
    pod["spec"]["subdomain"] = "sub"
    add_tpu_env(pod, 4)
    assert first_env(pod)[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(
        "test-sample-0", "test-sample-0-1", sub="sub"
    )


def test_subgroup_env_goes_to_the_first_tpu_container_only() -> None:
    pod = subgroup_pod("test-sample-1-5", 4, "1")
    pod["spec"]["containers"].append({"name": "second", "resources": TPU})
    pod["spec"]["containers"][0]["env"] = [{"name": c.ENV_TPU_PROCESS_PORT, "value": "1234"}]
    add_tpu_env(pod, 9)
    assert "env" not in pod["spec"]["containers"][1]
    got = pod["spec"]["containers"][0]["env"]
    assert [v["name"] for v in got].count(c.ENV_TPU_PROCESS_PORT) == 1
    assert first_env(pod)[c.ENV_TPU_PROCESS_ADDRESSES].endswith("test-sample-1-8.default:1234")


def test_subgroup_worker_without_subgroup_label_is_denied() -> None:
    pod = subgroup_pod("test-sample-1-5", 4, None)
    with pytest.raises(Denied) as info:
        add_tpu_env(pod, 9)
    assert info.value.message == 'strconv.Atoi: parsing "": invalid syntax'


def test_subgroup_already_set_is_left_alone() -> None:
    pod = subgroup_pod("test-sample-1-5", 4, None)
    pod["spec"]["containers"][0]["env"] = [{"name": c.ENV_TPU_WORKER_ID, "value": "7"}]
    add_tpu_env(pod, 9)
    assert first_env(pod) == {c.ENV_TPU_WORKER_ID: "7"}


# --- LeaderExcluded with a TPU-requesting leader ---------------------------------------------
# Upstream denies this leader: docs/upstream-deviations.md#tpu-leader-under-leaderexcluded

EXCLUDED = {
    c.ANNOTATION_SIZE: "5",
    c.ANNOTATION_SUBGROUP_SIZE: "2",
    c.ANNOTATION_SUBGROUP_POLICY_TYPE: c.SUBGROUP_POLICY_LEADER_EXCLUDED,
}


def lws_pod(name: str, annotations: dict[str, str], **labels: str) -> dict[str, Any]:
    pod = tpu_pod(name, annotations=annotations, subdomain="test")
    pod["metadata"]["labels"] = {c.LABEL_SET_NAME: "test-sample", **labels}
    return pod


def test_excluded_tpu_leader_is_admitted_without_tpu_env() -> None:
    pod = lws_pod("test-sample-0", EXCLUDED, **{c.LABEL_WORKER_INDEX: "0"})
    out = mutate_pod(pod)
    assert c.LABEL_SUBGROUP_INDEX not in out["metadata"]["labels"]
    assert set(first_env(out)) == set(c.LWS_ENV_NAMES)


@pytest.mark.parametrize(
    ("ordinal", "worker_id", "members"),
    [(1, "0", ["1", "2"]), (2, "1", ["1", "2"]), (3, "0", ["3", "4"]), (4, "1", ["3", "4"])],
)
def test_excluded_workers_ignore_the_leaders_tpus(
    ordinal: int, worker_id: str, members: list[str]
) -> None:
    labels = {c.LABEL_GROUP_INDEX: "0", c.LABEL_GROUP_KEY: "k"}
    annotations = {**EXCLUDED, **LRT, c.ANNOTATION_LEADER_NAME: "test-sample-0"}
    out = mutate_pod(lws_pod(f"test-sample-0-{ordinal}", annotations, **labels))
    got = first_env(out)
    assert got[c.ENV_TPU_WORKER_ID] == worker_id
    assert got[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(
        *(f"test-sample-0-{m}" for m in members), sub="test"
    )


def test_tpu_env_follows_the_lws_env() -> None:
    out = mutate_pod(
        lws_pod("test-sample-0", {c.ANNOTATION_SIZE: "2"}, **{c.LABEL_WORKER_INDEX: "0"})
    )
    names = [v["name"] for v in out["spec"]["containers"][0]["env"]]
    assert names == [*c.LWS_ENV_NAMES, *TPU_NAMES]


# --- Hash mode ----------------------------------------------------------------------------------

HASH = PodAdmissionContext(group_identity=c.GROUP_IDENTITY_HASH, new_group_key=lambda _: KEY)
K8 = KEY[:8]


def hash_leader(annotations: dict[str, str]) -> dict[str, Any]:
    pod = lws_pod("", annotations, **{c.LABEL_WORKER_INDEX: "0"})
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "test-sample-6b7f9d-"
    return pod


def hash_worker(ordinal: int, annotations: dict[str, str]) -> dict[str, Any]:
    labels = {c.LABEL_GROUP_INDEX: KEY, c.LABEL_GROUP_KEY: KEY}
    annotations = {**annotations, c.ANNOTATION_LEADER_NAME: "test-sample-6b7f9d-x7k2p"}
    pod = lws_pod(f"test-sample-6b7f9d-x7k2p-{ordinal}", annotations, **labels)
    pod["spec"]["subdomain"] = "test-sample"
    return pod


def test_hash_group_names_hosts_by_key_prefix() -> None:
    leader = first_env(mutate_pod(hash_leader({c.ANNOTATION_SIZE: "3"}), HASH))
    assert leader[c.ENV_TPU_NAME] == K8
    expected = hosts(K8, f"{K8}-1", f"{K8}-2", sub="test-sample")
    assert leader[c.ENV_TPU_WORKER_HOSTNAMES] == expected
    worker_out = mutate_pod(hash_worker(2, {c.ANNOTATION_SIZE: "3", **LRT}), HASH)
    worker = first_env(worker_out)
    assert worker[c.ENV_TPU_WORKER_HOSTNAMES] == expected
    assert worker[c.ENV_TPU_WORKER_ID] == "2"
    assert worker[c.ENV_TPU_NAME] == K8
    # Every listed name must be a real pod DNS name: the worker's own hostname is in the list.
    assert f"{worker_out['spec']['hostname']}.test-sample" in expected.split(",")
    assert worker_out["spec"]["hostname"] == hash_worker_hostname(KEY, 2)


def test_hash_subgroups_name_hosts_by_key_prefix() -> None:
    annotations = {
        c.ANNOTATION_SIZE: "4",
        c.ANNOTATION_SUBGROUP_SIZE: "2",
        c.ANNOTATION_SUBGROUP_POLICY_TYPE: c.SUBGROUP_POLICY_LEADER_WORKER,
        **LRT,
    }
    leader = first_env(mutate_pod(hash_leader(annotations), HASH))
    assert leader[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(K8, f"{K8}-1", sub="test-sample")
    worker = first_env(mutate_pod(hash_worker(3, annotations), HASH))
    assert worker[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(f"{K8}-2", f"{K8}-3", sub="test-sample")
    assert worker[c.ENV_TPU_WORKER_ID] == "1"
    assert worker[c.ENV_TPU_NAME] == K8


# --- subGroupSize 1: every pod is a slice of its own (upstream lws#917) ----------------------


@pytest.mark.parametrize("leader_tpus", [True, False], ids=["leader-tpus", "no-leader-tpus"])
def test_subgroups_of_one_pod_each_list_only_that_pod(leader_tpus: bool) -> None:
    """Size 3 in subgroups of 1: the leader and each worker form their own slice, so each
    lists only its own host, as rank 0, and the subgroup indexes do not collide (a worker
    counted into the leader's subgroup would list the leader instead of itself)."""
    group = {
        c.ANNOTATION_SIZE: "3",
        c.ANNOTATION_SUBGROUP_SIZE: "1",
        c.ANNOTATION_SUBGROUP_POLICY_TYPE: c.SUBGROUP_POLICY_LEADER_WORKER,
    }
    leader = mutate_pod(lws_pod("test-sample-0", group, **{c.LABEL_WORKER_INDEX: "0"}))
    workers = [
        mutate_pod(
            lws_pod(
                f"test-sample-0-{ordinal}",
                {
                    **group,
                    **(LRT if leader_tpus else {}),
                    c.ANNOTATION_LEADER_NAME: "test-sample-0",
                },
                **{c.LABEL_GROUP_INDEX: "0", c.LABEL_GROUP_KEY: "k"},
            )
        )
        for ordinal in (1, 2)
    ]
    pods = [leader, *workers]
    assert [p["metadata"]["labels"][c.LABEL_SUBGROUP_INDEX] for p in pods] == ["0", "1", "2"]
    for pod in pods:
        got = first_env(pod)
        own = pod["metadata"]["name"]
        assert got[c.ENV_TPU_WORKER_HOSTNAMES] == hosts(own, sub="test")
        assert got[c.ENV_TPU_PROCESS_ADDRESSES] == addresses((own, "8476"), sub="test")
        assert got[c.ENV_TPU_WORKER_ID] == "0"
        assert got[c.ENV_TPU_NAME] == "test-sample-0"
