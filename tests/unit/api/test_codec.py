"""JSON in and out: camelCase, int-or-string, unknown members kept."""

from __future__ import annotations

import copy

from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from tests.toolkit.lws import lws_json, template


def test_round_trip_keeps_unknown_members_everywhere() -> None:
    data = lws_json()
    data["spec"]["futureField"] = {"x": [1, 2]}
    template(data)["workerTemplate"]["spec"]["someNewPodField"] = {"enabled": True}
    template(data)["workerTemplate"]["metadata"] = {"labels": {"a": "b"}}
    data["status"] = {"replicas": 2, "conditions": [], "newCounter": 3}
    data["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    before = copy.deepcopy(data)
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == []
    assert lws.to_json() == before
    assert data == before  # decoding copies, never aliases


def test_int_or_string_members() -> None:
    data = lws_json(
        rolloutStrategy={
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": "50%", "maxSurge": 1},
        }
    )
    lws, errors = LeaderWorkerSet.from_json(data)
    assert errors == []
    assert lws.spec is not None and lws.spec.rollout_strategy is not None
    config = lws.spec.rollout_strategy.rolling_update_configuration
    assert config is not None
    assert (config.max_unavailable, config.max_surge) == ("50%", 1)


def test_booleans_are_not_integers() -> None:
    data = lws_json(replicas=True)
    _, errors = LeaderWorkerSet.from_json(data)
    assert [e.field for e in errors] == ["spec.replicas"]


def test_out_of_range_int32() -> None:
    data = lws_json(replicas=2**31)
    _, errors = LeaderWorkerSet.from_json(data)
    assert [e.field for e in errors] == ["spec.replicas"]


def test_leader_template_falls_back_to_worker_template() -> None:
    lws, _ = LeaderWorkerSet.from_json(lws_json())
    assert lws.spec is not None and lws.spec.leader_worker_template is not None
    lwt = lws.spec.leader_worker_template
    assert lwt.effective_leader_template() == lwt.worker_template
    lwt.leader_template = {"spec": {"containers": [{"name": "leader"}]}}
    assert lwt.effective_leader_template()["spec"]["containers"][0]["name"] == "leader"
