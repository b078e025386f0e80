"""`lws demo --story gang` told against the test cluster: its own two GPU nodes (a
pool of its own, removed after), the session's controller, the real kube-scheduler.
The story raises StoryError when the cluster does not do what it shows, so its end
is the check: the partial placement without gangs, whole-or-nothing with them, and
the waiting LeaderWorkerSet starting a group whole once the other is deleted."""

from __future__ import annotations

import sys

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.gang_story import gang_nodes, gang_story
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.nodesim import unique_node_name

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_the_gang_story_happens_as_told(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pool = unique_node_name("gang-story")
    try:
        await gang_story(nodesim_api, node_simulator, namespace, pool=pool)
    finally:
        out = capsys.readouterr().out
        print(out, file=sys.stderr)
        for spec in gang_nodes(pool):
            if spec.name in node_simulator.fleet.nodes:
                await node_simulator.remove_node(spec.name)
    act_two = out.index("Act 2")
    assert "stuck: all 16 GPUs are held" in out[:act_two]
    assert "GANG" not in out[:act_two] and "PLACEMENT" in out[:act_two]
    assert "placed whole; the other groups have no pod bound and wait" in out[act_two:]
    assert "WaitingForCapacity" in out[act_two:] and "Scheduled" in out[act_two:]
    assert "partial" not in out[act_two:]
    assert "started whole" in out.rstrip().splitlines()[-1]
