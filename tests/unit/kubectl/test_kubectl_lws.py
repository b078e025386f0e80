"""`kubectl lws` on hand-made objects: ages, the scale-down order, the pairing of
gated leaders with tearing-down groups, the rows and their rendering, describe, the
kubeconfig merge, and a start that imports nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.group.state import GroupState
from leaderworkerset.kubectl.ages import human_age
from leaderworkerset.kubectl.connection import merge_kubeconfigs, target
from leaderworkerset.kubectl.describe import UnknownGroup, describe, find_group
from leaderworkerset.kubectl.pairing import pair
from leaderworkerset.kubectl.ranking import deletion_cost, victim_order
from leaderworkerset.kubectl.render import group_objects, group_table
from leaderworkerset.kubectl.rows import ADMITTING, rows_of
from leaderworkerset.kubectl.snapshot import Snapshot
from tests.toolkit.lws import web_hash_lws as hash_lws
from tests.toolkit.pods import WEB_NOW as NOW
from tests.toolkit.pods import web_pod as pod
from tests.toolkit.pods import web_stamp as stamp
from tests.toolkit.statefulsets import controller_ref, statefulset

JSON = dict[str, Any]


def names(pods: list[JSON]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# --- ages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (190, "3m10s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 120, "3h2m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (4 * 86400, "4d"),
        (4 * 86400 + 3600, "4d1h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 86400, "3y1d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_ages_as_kubectl_prints_them(seconds: float, shown: str) -> None:
    assert human_age(seconds) == shown


# --- the scale-down order --------------------------------------------------------------


def test_victim_order_rules_in_turn() -> None:
    unscheduled = pod("unscheduled", node="", phase="Pending", ready=False)
    pending = pod("pending", phase="Pending", ready=False)
    unknown = pod("unknown", phase="Unknown", ready=False)
    not_ready = pod("not-ready", ready=False)
    ready = pod("ready")
    order = victim_order([ready, not_ready, unknown, pending, unscheduled], [], NOW)
    assert names(order) == ["unscheduled", "pending", "unknown", "not-ready", "ready"]


def test_deletion_cost_then_doubled_up() -> None:
    cheap = pod("cheap", node="a", cost="-5")
    dear = pod("dear", node="b", cost="10")
    crowded = pod("crowded", node="c")
    alone = pod("alone", node="d")
    neighbour = pod("neighbour", node="c", cost="100")
    related = [cheap, dear, crowded, alone, neighbour]
    order = victim_order([alone, crowded, dear, cheap], related, NOW)
    # Cost first (dear's 10 above the others' 0), then two pods on node c before one on d.
    assert names(order) == ["cheap", "crowded", "alone", "dear"]


def test_deletion_cost_parsed_as_the_api_server_does() -> None:
    def cost(value: str) -> int:
        return deletion_cost(
            {
                "metadata": {
                    "annotations": {c.ANNOTATION_SIZE: "1"}
                    | {"controller.kubernetes.io/pod-deletion-cost": value}
                }
            }
        )

    assert [cost(v) for v in ("7", "-3", "0", "+4", "007", "x", "99999999999")] == [
        7,
        -3,
        0,
        0,
        0,
        0,
        0,
    ]


def test_ready_time_on_a_log_scale_then_restarts_then_newest() -> None:
    # Ready for 10 s and for 1000 s: different log2 buckets, the shorter goes first.
    fresh = pod("fresh", node="a", ready_for=10)
    seasoned = pod("seasoned", node="b", ready_for=1000)
    assert names(victim_order([seasoned, fresh], [], NOW)) == ["fresh", "seasoned"]
    # Same ready time: more restarts first; then the newer one.
    crashy = pod("crashy", node="a", created=500, ready_for=400, restarts=3)
    calm = pod("calm", node="b", created=500, ready_for=400)
    assert names(victim_order([calm, crashy], [], NOW)) == ["crashy", "calm"]
    young = pod("young", node="a", created=10, ready_for=5)
    old = pod("old", node="b", created=5000, ready_for=5)
    assert names(victim_order([old, young], [], NOW)) == ["young", "old"]


def test_times_in_one_log_bucket_tie_and_go_by_uid() -> None:
    # 1000 s and 1050 s ago are both in the 2^39..2^40 ns bucket.
    b = pod("b", node="x", created=1000, ready_for=1)
    a = pod("a", node="y", created=1050, ready_for=1)
    assert names(victim_order([b, a], [], NOW)) == ["a", "b"]
    # Without a reference time, plain comparison: the newer one first.
    assert names(victim_order([a, b], [], None)) == ["b", "a"]


def test_only_active_pods_are_ranked() -> None:
    going = pod("going", deleting=5)
    failed = pod("failed", phase="Failed", ready=False)
    assert victim_order([going, failed, pod("live")], [], NOW) == [pod("live")]


# --- pairing gated leaders with tearing-down groups -------------------------------------


def test_pairing_oldest_with_first_due_after_the_admitted() -> None:
    old_a = [
        pod("a", key="a" * 40, deleting=30),
        pod("a-1", key="a" * 40, worker=1, deleting=30),
    ]
    old_b = [pod("b-1", key="b" * 40, worker=1, deleting=10)]  # leader already gone
    gated = [
        pod(f"g{i}", key=f"{i}" * 40, gated=True, created=age)
        for i, age in ((1, 50), (2, 40), (3, 20))
    ]
    pairing = pair(old_a + old_b + gated, now=NOW.timestamp())
    assert (pairing.gated, pairing.tearing_down) == (3, 2)
    assert pairing.admitting == {"g1"}
    assert pairing.waits_for == {"g2": "a" * 40, "g3": "b" * 40}


def test_pairing_puts_a_group_with_a_pod_not_yet_deleted_last() -> None:
    """Where kubectl and the controller used to differ: kubectl lined groups up by
    their leader's deletion, the controller by when the group's last pod stops
    counting. Group a's worker has no deletion yet, so nothing bounds its wait."""
    old_a = [pod("a", key="a" * 40, deleting=30), pod("a-1", key="a" * 40, worker=1)]
    old_b = [pod("b-1", key="b" * 40, worker=1, deleting=10)]  # leader already gone
    gated = [
        pod(f"g{i}", key=f"{i}" * 40, gated=True, created=age)
        for i, age in ((1, 50), (2, 40), (3, 20))
    ]
    pairing = pair(old_a + old_b + gated, now=NOW.timestamp())
    assert (pairing.gated, pairing.tearing_down) == (3, 2)
    assert pairing.admitting == {"g1"}
    assert pairing.waits_for == {"g2": "b" * 40, "g3": "a" * 40}


def test_pairing_more_tearing_down_than_waiting() -> None:
    old = [pod("o1", key="1" * 40, deleting=9), pod("o2", key="2" * 40, deleting=3)]
    pairing = pair([*old, pod("g", key="9" * 40, gated=True)], now=NOW.timestamp())
    assert pairing.admitting == set()
    assert pairing.waits_for == {"g": "1" * 40}


def test_pairing_under_immediate_admits_all() -> None:
    pods = [pod("o", key="1" * 40, deleting=9), pod("g", key="9" * 40, gated=True)]
    assert pair(pods, now=NOW.timestamp(), immediate=True).admitting == {"g"}


# --- rows and rendering ------------------------------------------------------------------


def deployment(revision: str) -> JSON:
    return {
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"template": {"metadata": {"labels": {c.LABEL_TEMPLATE_REVISION_HASH: revision}}}},
    }


def worker_sts(leader: JSON, *, revision: str = "r1", ready: bool = True) -> JSON:
    name = leader["metadata"]["name"]
    return statefulset(
        name,
        labels={c.LABEL_TEMPLATE_REVISION_HASH: revision},
        owners=[controller_ref("Pod", name, f"uid-{name}")],
        replicas=1,
        status={
            "replicas": 1,
            "readyReplicas": int(ready),
            "availableReplicas": int(ready),
            "currentRevision": "s1",
            "updateRevision": "s1",
        },
    )


KEY_READY = "aaaaaaaa" + "1" * 32
KEY_OLD = "bbbbbbbb" + "2" * 32
KEY_GATED = "cccccccc" + "3" * 32
KEY_UPDATING = "dddddddd" + "4" * 32


def gated_snapshot() -> Snapshot:
    ready_leader = pod("web-x1", key=KEY_READY, node="n1", created=300)
    ready_worker = pod("web-x1-1", key=KEY_READY, worker=1, node="n2", created=300, restarts=2)
    old_leader = pod("web-x2", key=KEY_OLD, node="n3", created=400, deleting=12)
    old_worker = pod("web-x2-1", key=KEY_OLD, worker=1, node="n3", created=400, deleting=12)
    gated = pod("web-x3", key=KEY_GATED, gated=True, created=10)
    stale = pod("web-x4", key=KEY_UPDATING, node="n4", created=200, ready=False, revision="r0")
    pods = [ready_leader, ready_worker, old_leader, old_worker, gated, stale]
    statefulsets = [
        worker_sts(ready_leader),
        worker_sts(old_leader),
        worker_sts(stale, revision="r0"),
    ]
    return Snapshot(hash_lws(), pods, statefulsets, deployment("r1"))


def test_rows_of_a_hash_lws_with_a_gated_replacement() -> None:
    rows = {r.index: r for r in rows_of(gated_snapshot(), NOW)}
    ready, old, gated, stale = (rows[k] for k in (KEY_READY, KEY_OLD, KEY_GATED, KEY_UPDATING))
    assert [r.state for r in (ready, old, gated, stale)] == [
        GroupState.READY,
        GroupState.TEARING_DOWN,
        GroupState.GATED,
        GroupState.UPDATING,
    ]
    assert (ready.group, ready.ready, ready.size, ready.restarts) == ("aaaaaaaa", 2, 2, 2)
    assert (ready.current, stale.current) == (True, False)
    assert (ready.leader_node, gated.leader_node, ready.age) == ("n1", "", "5m")
    assert gated.waiting_for == "bbbbbbbb"
    assert ready.waiting_for is None and old.waiting_for is None
    # The gated leader (unscheduled) goes first, the not-ready one next, the ready last;
    # the terminating leader is no longer the ReplicaSet's to remove.
    assert (gated.scale_down_rank, stale.scale_down_rank, ready.scale_down_rank) == (1, 2, 3)
    assert old.scale_down_rank is None


def test_the_table() -> None:
    rows = rows_of(gated_snapshot(), NOW)
    text = group_table(rows, hash_mode=True)
    lines = text.splitlines()
    header = lines[0]
    for column in ("STATE", "READY", "REVISION", "LEADER NODE", "SCALE-DOWN RANK", "WAITING FOR"):
        assert column in header
    by_group = {line.split()[0]: line.split() for line in lines[1:]}
    assert by_group["cccccccc"][:4] == ["cccccccc", "Gated", "0/2", "current"]
    assert by_group["cccccccc"][4] == "<none>"
    assert by_group["cccccccc"][-1] == "bbbbbbbb"
    assert by_group["bbbbbbbb"][1] == "TearingDown" and by_group["bbbbbbbb"][-2:] == ["-", "-"]
    assert by_group["dddddddd"][3] == "old"
    # Columns line up: every cell of a column starts at the header's offset.
    offset = header.index("WAITING FOR")
    assert all(line[offset:].strip() in ("bbbbbbbb", "-") for line in lines[1:])
    wide = group_table(rows, hash_mode=True, wide=True).splitlines()
    assert wide[0].endswith("LEADER POD   WORKER STATEFULSET")
    assert any(line.split()[-2:] == ["web-x1", "web-x1"] for line in wide)


def test_ordinal_table_has_no_hash_columns() -> None:
    lws = hash_lws(groupIdentity=c.GROUP_IDENTITY_ORDINAL)
    leader = pod("web-0", key="0", created=65)
    sts = {"metadata": {"name": "web", "labels": {c.LABEL_TEMPLATE_REVISION_HASH: "r1"}}}
    rows = rows_of(Snapshot(lws, [leader], [sts], sts), NOW)
    text = group_table(rows, hash_mode=False)
    assert "SCALE-DOWN RANK" not in text and "WAITING FOR" not in text
    row = ["0", "NotReady", "1/2", "current", "n1", "0", "-", "65s"]
    assert text.splitlines()[1].split() == row


def test_json_and_yaml_carry_the_same_rows() -> None:
    rows = rows_of(gated_snapshot(), NOW)
    as_json = json.loads(
        group_objects(rows, name="web", namespace="ns", hash_mode=True, output="json")
    )
    as_yaml = yaml.safe_load(
        group_objects(rows, name="web", namespace="ns", hash_mode=True, output="yaml")
    )
    assert as_json == as_yaml
    gated = next(g for g in as_json["groups"] if g["state"] == "Gated")
    assert gated["waitingFor"] == "bbbbbbbb" and gated["scaleDownRank"] == 1
    assert gated["groupIndex"] == KEY_GATED and gated["leaderNode"] is None


def test_admitting_leader() -> None:
    snapshot = gated_snapshot()
    snapshot.pods = [
        p for p in snapshot.pods if p["metadata"]["labels"][c.LABEL_GROUP_KEY] != KEY_OLD
    ]
    row = next(r for r in rows_of(snapshot, NOW) if r.state is GroupState.GATED)
    assert row.waiting_for == ADMITTING


# --- describe ------------------------------------------------------------------------------


def test_find_group_by_prefix_ordinal_or_leader() -> None:
    snapshot = gated_snapshot()
    assert find_group(snapshot, "cccc").index == KEY_GATED
    assert find_group(snapshot, "web-x1").index == KEY_READY
    assert find_group(snapshot, KEY_OLD).index == KEY_OLD
    with pytest.raises(UnknownGroup) as raised:
        find_group(snapshot, "zzz")
    message = str(raised.value)
    assert 'no group "zzz"' in message
    assert all(k[:8] in message for k in (KEY_READY, KEY_OLD, KEY_GATED, KEY_UPDATING))


def test_describe_gated_and_tearing_down() -> None:
    snapshot = gated_snapshot()
    snapshot.services = [
        {"metadata": {"name": "web"}, "spec": {"selector": {c.LABEL_SET_NAME: "web"}}},
        {
            "metadata": {"name": "web-aaaaaaaa"},
            "spec": {"selector": {c.LABEL_SET_NAME: "web", c.LABEL_GROUP_INDEX: KEY_READY}},
        },
    ]
    snapshot.events = [
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "web-x3"},
            "type": "Normal",
            "reason": "Created",
            "message": "made  it",
            "lastTimestamp": stamp(8),
        },
        {
            "metadata": {"name": "e0"},
            "involvedObject": {"kind": c.KIND, "name": "web"},
            "type": "Normal",
            "reason": "GroupsProgressing",
            "message": "lws event",
            "eventTime": stamp(60),
        },
        {
            "metadata": {"name": "other"},
            "involvedObject": {"kind": "Pod", "name": "web-x1"},
            "reason": "NotMine",
            "lastTimestamp": stamp(1),
        },
    ]
    gated = describe(snapshot, find_group(snapshot, "cccc"), NOW)
    assert "gated: waiting for group bbbbbbbb to finish tearing down (T=1, G=1)." in gated
    assert "State:           Gated" in gated
    events = gated[gated.index("Events:") :]
    assert events.index("GroupsProgressing") < events.index("Created")
    assert "NotMine" not in events and "made it" in events
    services = gated[gated.index("Services:") : gated.index("Events:")]
    assert "shared" in services and "web-aaaaaaaa" not in services

    old = describe(snapshot, find_group(snapshot, "bbbb"), NOW)
    assert "tearing down: its leader web-x2 is terminating (grace period ended 12s ago)" in old
    assert "gated leader web-x3 waits for it" in old

    ready = describe(snapshot, find_group(snapshot, "aaaa"), NOW)
    assert "ready: leader web-x1 is Running and Ready" in ready
    assert "this group" in ready

    stale = describe(snapshot, find_group(snapshot, "dddd"), NOW)
    assert "updating: the group runs revision r0 while the current one is r1" in stale


def test_describe_not_ready() -> None:
    leader = pod("web-x1", key=KEY_READY)
    worker = pod("web-x1-1", key=KEY_READY, worker=1, ready=False)
    snapshot = Snapshot(
        hash_lws(), [leader, worker], [worker_sts(leader, ready=False)], deployment("r1")
    )
    text = describe(snapshot, find_group(snapshot, "aaaa"), NOW)
    assert "not ready: 1 worker(s) not ready: web-x1-1." in text


# --- kubeconfig ------------------------------------------------------------------------------


def kubeconfig(path: Path, name: str, server: str, namespace: str | None = None) -> Path:
    context: JSON = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": name,
                "clusters": [
                    {"name": name, "cluster": {"server": server, "certificate-authority": "ca.crt"}}
                ],
                "contexts": [{"name": name, "context": context}],
                "users": [{"name": name, "user": {"token": "t"}}],
            }
        )
    )
    return path


def test_kubeconfig_merge_first_wins(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    first = kubeconfig(tmp_path / "a" / "config", "one", "https://one:6443", "team")
    second = kubeconfig(tmp_path / "two", "two", "https://two:6443")
    merged = merge_kubeconfigs([first, tmp_path / "missing", second])
    assert merged["current-context"] == "one"
    assert [c["name"] for c in merged["contexts"]] == ["one", "two"]
    ca = merged["clusters"][0]["cluster"]["certificate-authority"]
    assert ca == str((tmp_path / "a" / "ca.crt").resolve())


def test_namespace_from_flag_context_or_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kubeconfig(tmp_path / "one", "one", "https://one:6443", "team")
    second = kubeconfig(tmp_path / "two", "two", "https://two:6443")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert target(None, None, None).namespace == "team"
    assert target(None, "two", None).namespace == "default"
    assert target(None, "two", "mine").namespace == "mine"
    assert target(str(second), None, None).config.context_name == "two"


# --- start-up ---------------------------------------------------------------------------------


def test_the_plugin_imports_nothing_heavy() -> None:
    # aiohttp's client is the API client's, which every command uses; its server side
    # (the webhook and metrics servers' framework) stays out.
    code = (
        "import sys, leaderworkerset.kubectl.cli\n"
        "heavy = ('aiohttp.web', 'prometheus_client', 'cryptography',"
        " 'lws_localcluster', 'leaderworkerset.wiring',"
        " 'leaderworkerset.runtime.manager')\n"
        "print([m for m in sys.modules if m.startswith(heavy)])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- group recovery: the restart budget and the group back-off --------------------------


def test_a_group_waiting_out_its_back_off_shows_the_time_left_and_its_recreations() -> None:
    from leaderworkerset.group.recreations import GroupRecords, Recreation

    lws = hash_lws(groupIdentity=c.GROUP_IDENTITY_ORDINAL)
    now = NOW.timestamp()
    records = GroupRecords({}, {"0": Recreation(2, now - 5, now + 15), "1": Recreation(1, now - 9)})
    lws["metadata"]["annotations"] = {k: v for k, v in records.annotations().items() if v}
    crashed = pod("web-0", key="0", restarts=1)
    quiet = pod("web-1", key="1")
    sts = {"metadata": {"name": "web", "labels": {c.LABEL_TEMPLATE_REVISION_HASH: "r1"}}}
    rows = {r.group: r for r in rows_of(Snapshot(lws, [crashed, quiet], [sts], sts), NOW)}
    assert rows["0"].state is GroupState.BACK_OFF and rows["0"].backoff_left == 15
    assert rows["0"].state_text == "BackOff (15s)" and rows["0"].recreations == 2
    # No restarted pod: nothing waits, whatever the record says.
    assert rows["1"].state is not GroupState.BACK_OFF and rows["1"].recreations == 1
    line = group_table([rows["0"]], hash_mode=False).splitlines()[1]
    assert "BackOff (15s)" in line and line.split()[7] == "2"


def test_a_group_past_its_budget_is_failed() -> None:
    lws = hash_lws(groupIdentity=c.GROUP_IDENTITY_ORDINAL)
    lws["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 1
    lws["metadata"]["annotations"] = {c.ANNOTATION_GROUP_RESTART_COUNTS: '{"0": 2, "1": 1}'}
    sts = {"metadata": {"name": "web", "labels": {c.LABEL_TEMPLATE_REVISION_HASH: "r1"}}}
    leaders = [pod("web-0", key="0", restarts=3), pod("web-1", key="1")]
    rows = {r.group: r for r in rows_of(Snapshot(lws, leaders, [sts], sts), NOW)}
    assert rows["0"].state is GroupState.FAILED and rows["0"].recreations == 2
    assert rows["1"].state is not GroupState.FAILED and rows["1"].recreations == 1
    as_json = json.loads(
        group_objects(
            list(rows.values()), name="web", namespace="ns", hash_mode=False, output="json"
        )
    )
    assert [g["state"] for g in as_json["groups"]] == ["Failed", "NotReady"]
