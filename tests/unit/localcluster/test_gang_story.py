"""The gang story's pictures on hand-made pods: which groups are whole, partly placed or
not started, the gang column as `kubectl lws` decides it, and the two pictures the
story insists on (Act 1 stuck, Act 2 one group whole and the rest waiting)."""

from __future__ import annotations

from typing import Any

from lws_localcluster.gang_story import (
    NAMES,
    NOT_STARTED,
    PARTIAL,
    WHOLE,
    Row,
    all_stuck,
    gang_lws,
    one_whole,
    render,
    rows_of,
)

from leaderworkerset.api.leaderworkerset import constants as c
from tests.toolkit.pods import lws_labels, pod

JSON = dict[str, Any]


def member(lws: str, group: str, worker: int, *, bound: bool, gang: bool = False) -> JSON:
    obj = pod(
        f"{lws}-{group}-{worker}",
        "default",
        labels=lws_labels(lws, group_index=group, worker=str(worker), revision="r1"),
        annotations={c.ANNOTATION_SIZE: "3"},
        node="gang-story-node-0" if bound else None,
        phase="Running" if bound else "Pending",
    )
    if gang:
        obj.setdefault("spec", {})["schedulingGroup"] = {"podGroupName": f"{lws}-{group}-r1"}
    return obj


def test_rows_say_how_much_of_each_group_is_placed() -> None:
    pods = [member("alpha", "0", i, bound=True) for i in range(3)]
    pods += [member("alpha", "1", 0, bound=True), member("alpha", "1", 1, bound=False)]
    pods += [member("alpha", "2", 0, bound=False)]
    rows = rows_of("alpha", pods, None)
    assert [(r.group, r.bound, r.pending, r.placement, r.gang) for r in rows] == [
        ("0", 3, 0, WHOLE, "-"),
        ("1", 1, 1, PARTIAL, "-"),
        ("2", 0, 1, NOT_STARTED, "-"),
    ]
    text = render(rows, gangs=False)
    assert text.splitlines()[0].split() == ["LWS", "GROUP", "BOUND", "PENDING", "PLACEMENT"]


def test_the_gang_column_is_kubectl_lws_answer() -> None:
    pods = [member("beta", "0", i, bound=False, gang=True) for i in range(3)]
    unschedulable = {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "pod group is unschedulable, first placement status: minCount (3) cannot "
        "be satisfied: 1 scheduled, 2 remaining",
    }
    group = {
        "metadata": {"name": "beta-0-r1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        "status": {"conditions": [unschedulable]},
    }
    rows = rows_of("beta", pods, {"beta-0-r1": group})
    assert rows[0].gang == "WaitingForCapacity (only 1 of 3 fit)"
    assert render(rows, gangs=True).splitlines()[0].split()[-1] == "GANG"
    assert rows_of("beta", pods, {})[0].gang == "Missing"


def row(lws: str, group: str, bound: int, placement: str) -> Row:
    return Row(lws, group, bound, 3 - bound, placement)


def test_act_one_is_stuck_only_when_every_set_holds_part_of_a_group() -> None:
    stuck = [row(name, g, 1, PARTIAL) for name in NAMES for g in ("0", "1")]
    assert all_stuck(stuck)
    one_whole = [
        row(NAMES[0], "0", 3, WHOLE),
        row(NAMES[0], "1", 1, PARTIAL),
        row(NAMES[1], "0", 0, NOT_STARTED),
        row(NAMES[1], "1", 0, NOT_STARTED),
    ]
    assert not all_stuck(one_whole)  # full, but the second set holds nothing
    assert not all_stuck(stuck[:3])  # pods still coming


def test_act_two_wants_one_group_whole_and_the_rest_unstarted() -> None:
    waiting = [row(NAMES[0], "1", 0, NOT_STARTED)] + [
        row(NAMES[1], g, 0, NOT_STARTED) for g in ("0", "1")
    ]
    assert one_whole([row(NAMES[0], "0", 3, WHOLE), *waiting])
    assert not one_whole(waiting)


def test_only_act_two_asks_for_gangs() -> None:
    assert "scheduling" not in gang_lws("alpha", "default", "pool", gangs=False)["spec"]
    assert gang_lws("alpha", "default", "pool", gangs=True)["spec"]["scheduling"] == {}
