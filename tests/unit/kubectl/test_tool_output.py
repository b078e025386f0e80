"""What the tools print is true and readable: one table layout for every command, READY
counts only pods that stay, and a terminating leader's grace period read the right way
round."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from lws_localcluster.cli import nodes_table
from lws_localcluster.demo import summary_line
from lws_localcluster.groups import GroupRow, group_rows
from lws_localcluster.groups import render as story_table
from prometheus_client import CollectorRegistry

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.group.state import GroupState
from leaderworkerset.kubectl.describe import describe, find_group
from leaderworkerset.kubectl.render import group_table
from leaderworkerset.kubectl.rows import rows_of
from leaderworkerset.kubectl.snapshot import Snapshot
from leaderworkerset.tables import table
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.pods import container, lws_labels
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.statefulsets import controller_ref, statefulset

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
KEY = "aaaaaaaa" + "1" * 32


def column_starts(header: str, names: Sequence[str]) -> list[int]:
    return [header.index(name) for name in names]


def assert_aligned(text: str, columns: Sequence[str]) -> None:
    """Every cell of a column starts where its header does, and is preceded by blanks."""
    header, *lines = text.splitlines()
    starts = column_starts(header, columns)
    for line in lines:
        for start in starts[1:]:
            assert line[start - 1] == " " and line[start] != " ", (line, start)


def node(name: str, ready: str) -> JSON:
    return {
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "zone-a"}},
        "status": {
            "conditions": [{"type": "Ready", "status": ready}],
            "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
        },
    }


# --- one table layout (#22 item 5) ---------------------------------------------------


def test_columns_are_as_wide_as_their_widest_cell() -> None:
    text = table(["A", "LONGER"], [["a-much-longer-cell", "x"], ["b", ""]], indent="  ")
    assert text.splitlines() == [
        "  A                    LONGER",
        "  a-much-longer-cell   x",
        "  b",
    ]


def test_dev_status_nodes_line_up_when_one_is_not_ready() -> None:
    text = nodes_table([node("lws-node-0", "True"), node("lws-node-1", "False")])
    assert "NotReady(False)" in text
    assert_aligned(text, ["NAME", "READY", "CPU", "MEMORY", "GPU", "ZONE"])
    assert all(line.startswith("  ") for line in text.splitlines())


def test_story_table_lines_up_for_long_cells() -> None:
    rows = [
        GroupRow("0", "Ready", 2, 2, "story-node-0"),
        GroupRow("a-very-long-group", "TearingDown", 0, 2, "n"),
    ]
    assert_aligned(story_table(rows), ["GROUP", "STATE", "READY", "LEADER NODE"])


# --- a Hash group of two, the API's objects -----------------------------------------


def stamp(seconds_from_now: float) -> str:
    return (NOW + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, worker: int, *, grace_ends_in: float | None = None) -> JSON:
    """A Running, Ready pod of group KEY; with `grace_ends_in`, terminating, its
    deletionTimestamp (the end of its grace period) that many seconds from NOW."""
    terminating = grace_ends_in is not None
    return a_pod(
        name,
        "ns",
        uid=f"uid-{name}",
        created=stamp(-300),
        deleted=stamp(grace_ends_in) if grace_ends_in is not None else None,
        grace=30 if terminating else None,
        labels=lws_labels("web", group_index=KEY, group_key=KEY, worker=str(worker), revision="r1"),
        annotations={c.ANNOTATION_SIZE: "2"},
        node="n1",
        containers=[container("main")],
        phase="Running",
        ready=True,
        ready_since=stamp(-290),
        container_statuses=[{"name": "main", "ready": True, "restartCount": 0}],
    )


def worker_sts() -> JSON:
    """web-x1's worker StatefulSet; its status counts a terminating worker as
    available, as the StatefulSet controller does."""
    return statefulset(
        "web-x1",
        "ns",
        labels={c.LABEL_SET_NAME: "web", c.LABEL_TEMPLATE_REVISION_HASH: "r1"},
        owners=[controller_ref("Pod", "web-x1", "uid-web-x1")],
        replicas=1,
        status={
            "replicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "currentRevision": "s1",
            "updateRevision": "s1",
        },
    )


def hash_lws() -> JSON:
    return leaderworkerset(
        "web",
        "ns",
        metadata={"uid": "uid-web"},
        replicas=1,
        groupIdentity=c.GROUP_IDENTITY_HASH,
        leaderWorkerTemplate={"size": 2},
    )


def snapshot(pods: list[JSON]) -> Snapshot:
    deployment = {
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"template": {"metadata": {"labels": {c.LABEL_TEMPLATE_REVISION_HASH: "r1"}}}},
    }
    return Snapshot(hash_lws(), pods, [worker_sts()], deployment)


def tearing_down(grace_ends_in: float) -> list[JSON]:
    """The leader and its worker deleted, both still Running and Ready in their grace
    period."""
    return [
        pod("web-x1", 0, grace_ends_in=grace_ends_in),
        pod("web-x1-1", 1, grace_ends_in=grace_ends_in),
    ]


# --- the grace period read the right way round (#22 item 3) ---------------------------


def test_describe_says_when_the_grace_period_ends() -> None:
    shot = snapshot(tearing_down(grace_ends_in=25))
    text = describe(shot, find_group(shot, "aaaa"), NOW)
    assert "its leader web-x1 is terminating (grace period ends in 25s)" in text
    assert "<invalid>" not in text


def test_describe_says_how_long_ago_an_overrun_grace_period_ended() -> None:
    shot = snapshot(tearing_down(grace_ends_in=-3))
    text = describe(shot, find_group(shot, "aaaa"), NOW)
    assert "its leader web-x1 is terminating (grace period ended 3s ago)" in text


# --- READY counts no terminating pod (#22 item 4) ------------------------------------


def test_a_tearing_down_group_shows_no_ready_pod() -> None:
    shot = snapshot(tearing_down(grace_ends_in=25))
    (row,) = rows_of(shot, NOW)
    assert (row.state, row.ready, row.size) == (GroupState.TEARING_DOWN, 0, 2)
    assert group_table([row], hash_mode=True).splitlines()[1].split()[:3] == [
        "aaaaaaaa",
        "TearingDown",
        "0/2",
    ]
    text = describe(shot, find_group(shot, "aaaa"), NOW)
    assert "Ready:           0/2 pods" in text
    (story_row,) = group_rows(hash_lws(), shot.pods, shot.statefulsets)
    assert (story_row.state, story_row.ready) == ("TearingDown", 0)


def test_a_terminating_worker_makes_its_group_not_ready_everywhere() -> None:
    pods = [pod("web-x1", 0), pod("web-x1-1", 1, grace_ends_in=25)]
    shot = snapshot(pods)
    (row,) = rows_of(shot, NOW)
    assert (row.state, row.ready) == (GroupState.NOT_READY, 1)
    text = describe(shot, find_group(shot, "aaaa"), NOW)
    assert "not ready: 1 worker(s) not ready: web-x1-1 (terminating)." in text
    (story_row,) = group_rows(hash_lws(), shot.pods, shot.statefulsets)
    assert (story_row.state, story_row.ready) == ("NotReady", 1)
    registry = CollectorRegistry()
    GroupMetrics(registry, clock=lambda: NOW.timestamp()).count(
        "ns", "web", "Hash", "r1", pods, [worker_sts()]
    )
    labels = {"namespace": "ns", "leaderworkerset": "web", "group_identity": "Hash"}
    gauge = {
        state: registry.get_sample_value("lws_groups", {**labels, "state": state})
        for state in ("ready", "not_ready")
    }
    assert gauge == {"ready": 0.0, "not_ready": 1.0}


def test_the_demo_counts_no_terminating_pod_as_running() -> None:
    lws = {"spec": {"replicas": 1}, "status": {"readyReplicas": 0}}
    line = summary_line(lws, [*tearing_down(grace_ends_in=25), pod("web-x2", 0)])
    assert "pods running 1/3 (2 terminating)" in line
