"""What the scale benchmark creates with gang scheduling: the LeaderWorkerSet asking for
gangs, and the gang floor's Workload, PodGroups and StatefulSets, in the shape the API
server and kube-scheduler take them (docs/gang-scheduling.md)."""

from __future__ import annotations

from bench import processes, workload
from bench.timeline import Timeline

from tests.toolkit.pods import pod


def test_the_lws_asks_for_gangs_only_when_told() -> None:
    assert "scheduling" not in workload.leaderworkerset(3, 4, "Ordinal")["spec"]
    assert workload.leaderworkerset(3, 4, "Hash", scheduling=True)["spec"]["scheduling"] == {}


def test_the_gang_floor_is_a_pod_group_and_a_statefulset_per_group_naming_it() -> None:
    pod_groups, sets = workload.gang_floor(3, 4)

    assert [g["metadata"]["name"] for g in pod_groups] == ["bench-0", "bench-1", "bench-2"]
    assert [s["metadata"]["name"] for s in sets] == ["bench-0", "bench-1", "bench-2"]
    for group, sts in zip(pod_groups, sets, strict=True):
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
        assert group["spec"]["workloadRef"] == {"workloadName": "bench", "templateName": "group"}
        # The whole group in one StatefulSet: a gang of `size` pods.
        assert sts["spec"]["replicas"] == 4
        template = sts["spec"]["template"]
        assert template["spec"]["schedulingGroup"] == {"podGroupName": group["metadata"]["name"]}
        assert template["metadata"]["labels"][workload.POD_LABEL] == "1"
    (template,) = workload.gang_workload(4)["spec"]["podGroupTemplates"]
    assert template == {"name": "group", "schedulingPolicy": {"gang": {"minCount": 4}}}


def test_the_timeline_finds_the_gang_floor_s_leaders_and_counts_pods_in_gangs() -> None:
    timeline = Timeline(start=0.0)
    sts = workload.gang_statefulset(7, 3)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    group = sts["spec"]["template"]["spec"]["schedulingGroup"]
    for i in range(3):
        member = pod(f"bench-7-{i}", uid=f"u{i}", labels=labels, spec={"schedulingGroup": group})
        timeline.observe(member, 1.0 + i, ready=False)
    timeline.observe(pod("bench-0", uid="plain", labels={workload.SET_LABEL: "bench"}), 1.0, False)

    assert timeline.groups == {
        "u0": ("7", True),
        "u1": ("7", False),
        "u2": ("7", False),
        "plain": ("0", True),
    }
    assert timeline.in_gangs == {"u0", "u1", "u2"}
    assert "3 pods in PodGroups" in timeline.summary()


def test_metrics_split_the_writes_by_method() -> None:
    text = "\n".join(
        [
            'rest_client_requests_total{code="201",host="h",method="POST"} 7.0',
            'rest_client_requests_total{code="409",host="h",method="POST"} 1.0',
            'rest_client_requests_total{code="200",host="h",method="PATCH"} 3.0',
            'rest_client_requests_total{code="200",host="h",method="GET"} 50.0',
        ]
    )

    metrics = processes.Metrics.parse(text)

    assert metrics.writes == 11
    assert metrics.writes_by_method == {"POST": 8, "PATCH": 3}
