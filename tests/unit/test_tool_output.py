"""What the tools print is true and readable: one table layout for every command, READY
counts only pods that stay, and a terminating leader's grace period read the right way
round."""

from __future__ import annotations

from collections.abc import Sequence

from leaderworkerset.api.objects import JSON
from leaderworkerset.localcluster.cli import nodes_table
from leaderworkerset.localcluster.groups import GroupRow
from leaderworkerset.localcluster.groups import render as story_table
from leaderworkerset.tables import table


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
