"""The invariant checker on hand-made object sets: silent on a settled LWS, and each
rule able to fail (no cluster needed)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.pods import lws_labels
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.statefulsets import statefulset

from .invariants import (
    Snapshot,
    check,
    check_logs,
    expected,
    expected_status,
    tracebacks,
    transient_tracebacks,
)

JSON = dict[str, Any]
REV = "rev-new"


def lws(replicas: int = 2, size: int = 2, *, hash_mode: bool = True) -> JSON:
    spec: JSON = {"groupIdentity": c.GROUP_IDENTITY_HASH} if hash_mode else {}
    body = leaderworkerset("w", replicas=replicas, size=size, metadata={"uid": "lws-uid"}, **spec)
    return {
        **body,
        "status": {
            "replicas": replicas,
            "readyReplicas": replicas,
            "updatedReplicas": replicas,
            "conditions": [
                {"type": c.CONDITION_AVAILABLE, "status": "True"},
                {"type": c.CONDITION_PROGRESSING, "status": "False"},
            ],
        },
    }


def pod(name: str, key: str, index: str, rev: str = REV, **extra: Any) -> JSON:
    body = a_pod(
        name,
        uid=f"uid-{name}",
        labels=lws_labels("w", group_key=key, worker=index, revision=rev),
        spec={},
        phase="Running",
        ready=True,
    )
    body.update(extra)
    return body


def owned_by(obj: JSON, owner: JSON, kind: str) -> JSON:
    ref = {"kind": kind, "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
    obj["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
    return obj


def worker_sts(leader: JSON, rev: str = REV) -> JSON:
    name = leader["metadata"]["name"]
    key = leader["metadata"]["labels"][c.LABEL_GROUP_KEY]
    sts = statefulset(name, uid=f"sts-{name}", labels=lws_labels("w", group_key=key, revision=rev))
    return owned_by(sts, leader, "Pod")


def settled() -> Snapshot:
    """Two groups of two, all ready, at the newest revision."""
    owner = lws()
    pods, sets = [], []
    for i, key in enumerate(("aaaa1111", "bbbb2222")):
        leader = pod(f"w-{i}", key, "0")
        pods += [leader, pod(f"w-{i}-1", key, "1")]
        sets.append(worker_sts(leader))
    revisions = [
        owned_by(
            {
                "metadata": {
                    "name": f"w-{n}",
                    "uid": f"cr-{n}",
                    "labels": {c.LABEL_TEMPLATE_REVISION_HASH: rev},
                },
                "revision": n,
            },
            owner,
            "LeaderWorkerSet",
        )
        for n, rev in ((1, "rev-old"), (2, REV))
    ]
    services = [owned_by({"metadata": {"name": "w", "uid": "svc"}}, owner, "LeaderWorkerSet")]
    return Snapshot(owner, pods, sets, services, revisions, {"replica-0.log": "all fine\n"})


def rules(snapshot: Snapshot) -> set[str]:
    return {v.rule for v in check(snapshot)}


def test_a_settled_lws_passes() -> None:
    assert check(settled()) == []


def test_too_few_groups() -> None:
    snap = settled()
    snap.lws["spec"]["replicas"] = 3
    assert "group-count" in rules(snap)


def test_two_live_leaders_of_one_group() -> None:
    snap = settled()
    snap.pods.append(pod("w-9", "aaaa1111", "0"))
    snap.lws["spec"]["replicas"] = 3
    assert "group-count" in rules(snap)


def test_unkeyed_pod() -> None:
    snap = settled()
    del snap.pods[1]["metadata"]["labels"][c.LABEL_GROUP_KEY]
    assert "unkeyed" in rules(snap)


def test_duplicate_worker_statefulset() -> None:
    snap = settled()
    twin = copy.deepcopy(snap.statefulsets[0])
    twin["metadata"]["name"] = "w-0-twin"
    snap.statefulsets.append(twin)
    assert "duplicate-worker-sts" in rules(snap)


def test_missing_worker_statefulset() -> None:
    snap = settled()
    del snap.statefulsets[1]
    assert "missing-worker-sts" in rules(snap)


@pytest.mark.parametrize(("hash_mode", "updated"), [(False, 1), (True, 2)], ids=["ordinal", "hash"])
def test_exclusive_placement_waits_for_the_leader_to_be_scheduled(
    hash_mode: bool, updated: int
) -> None:
    """An unscheduled leader of an exclusive LWS has no worker StatefulSet yet. In
    Ordinal mode its group counts as neither ready nor updated (upstream's status rule);
    in Hash mode a leader at the current revision is an updated group all the same."""
    snap = settled()
    if not hash_mode:
        del snap.lws["spec"]["groupIdentity"]
    snap.lws["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone"}
    del snap.statefulsets[1]
    snap.pods = [p for p in snap.pods if p["metadata"]["name"] != "w-1-1"]
    snap.pods[2]["status"] = {"phase": "Pending"}
    want = expected_status(snap)
    assert (want["replicas"], want["readyReplicas"], want["updatedReplicas"]) == (2, 1, updated)
    assert "missing-worker-sts" not in rules(snap)
    snap.pods[2]["spec"]["nodeName"] = "node-1"  # scheduled: now the set must exist
    assert "missing-worker-sts" in rules(snap)


@pytest.mark.parametrize("field", ["statefulsets", "services", "revisions"])
def test_orphan_whose_owner_is_gone(field: str) -> None:
    snap = settled()
    obj = getattr(snap, field)[0]
    obj["metadata"]["ownerReferences"][0]["uid"] = "deleted-long-ago"
    assert "orphan" in rules(snap)


def test_dependent_without_owner() -> None:
    snap = settled()
    del snap.services[0]["metadata"]["ownerReferences"]
    assert "orphan" in rules(snap)


def test_gate_left_while_nothing_tears_down() -> None:
    snap = settled()
    snap.pods[0]["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    assert "gate-left" in rules(snap)


def test_gate_allowed_while_a_group_tears_down() -> None:
    snap = settled()
    snap.pods[0]["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    snap.pods.append(pod("w-old", "cccc3333", "0"))
    snap.pods[-1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert "gate-left" not in rules(snap)


def test_gate_under_immediate_is_not_our_rule() -> None:
    snap = settled()
    snap.lws["spec"]["groupReplacementPolicy"] = c.GROUP_REPLACEMENT_IMMEDIATE
    snap.pods[0]["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    assert "gate-left" not in rules(snap)


def test_group_mixing_revisions() -> None:
    snap = settled()
    snap.pods[1]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "rev-old"
    assert "mixed-revisions" in rules(snap)


def test_worker_set_of_another_revision() -> None:
    snap = settled()
    snap.statefulsets[0]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "rev-old"
    assert "mixed-revisions" in rules(snap)


def test_status_counts_more_ready_than_the_pods() -> None:
    snap = settled()
    snap.pods[1]["status"]["conditions"][0]["status"] = "False"
    assert expected_status(snap)["readyReplicas"] == 1
    assert "status" in rules(snap)


def test_status_counts_old_groups_as_updated() -> None:
    snap = settled()
    for p in snap.pods[:2]:
        p["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "rev-old"
    snap.statefulsets[0]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "rev-old"
    assert expected_status(snap)["updatedReplicas"] == 1
    assert "status" in rules(snap)


def test_available_while_a_group_is_missing() -> None:
    snap = settled()
    snap.pods = snap.pods[:2]
    snap.statefulsets = snap.statefulsets[:1]
    snap.lws["status"]["replicas"] = 1
    snap.lws["status"]["readyReplicas"] = 1
    snap.lws["status"]["updatedReplicas"] = 1
    assert {v.rule for v in check(snap)} == {"group-count", "status"}


def test_terminating_pods_are_not_groups() -> None:
    snap = settled()
    gone = pod("w-gone", "dddd4444", "0")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    snap.pods.append(gone)
    assert check(snap) == []


def test_traceback_in_a_log() -> None:
    snap = settled()
    snap.logs["replica-1.log"] = "x\nTraceback (most recent call last):\n  File ...\nKeyError\n"
    (violation,) = check(snap)
    assert violation.rule == "traceback" and "replica-1.log" in violation.detail


def test_traceback_in_a_json_log_line() -> None:
    snap = settled()
    stack = "Traceback (most recent call last):\n  File x\nTypeError: bad operand\n"
    line = json.dumps({"level": "error", "msg": "reconcile failed", "stacktrace": stack})
    snap.logs["replica-1.log"] = line + "\n"
    (violation,) = check(snap)
    assert "TypeError: bad operand" in violation.detail


def test_a_lost_connection_is_not_a_bug() -> None:
    snap = settled()
    stack = (
        "Traceback (most recent call last):\n  File x\n"
        "aiohttp.client_exceptions.ClientConnectorError: Cannot connect\n"
    )
    line = json.dumps({"level": "error", "msg": "reconcile failed", "stacktrace": stack})
    snap.logs["replica-1.log"] = line + "\n"
    assert check(snap) == []
    assert transient_tracebacks(snap.logs) == 1


def test_ordinal_mode() -> None:
    snap = settled()
    del snap.lws["spec"]["groupIdentity"]
    assert check(snap) == []
    snap.pods[0]["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    assert "gate-left" not in rules(snap)


def test_a_chained_console_traceback_is_one_ending_in_what_was_raised_last() -> None:
    log = """\
2026-12-02T17:35:47.697Z\tERROR\tcontroller\treconcile soak/ordinal failed: Cannot connect
Traceback (most recent call last):
  File "aiohappyeyeballs/impl.py", line 124, in start_connection
    raise first_exception
ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 55753)

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "leaderworkerset/runtime/controller.py", line 280, in _reconcile_one
    result = await self._reconcile(key) or Result()
aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:55753
2026-12-02T17:35:48.000Z\tERROR\tcontroller\treconcile soak/other failed
Traceback (most recent call last):
  File "leaderworkerset/controllers/lws/reconciler.py", line 1, in x
KeyError: 'spec'
"""
    found = tracebacks(log)
    assert len(found) == 2
    assert expected(found[0]) and "ConnectionRefusedError" in found[0]
    assert not expected(found[1])
    assert [v.rule for v in check_logs({"r0.log": log})] == ["traceback"]
