"""`kubectl lws disaggregatedset` on a set caught mid-rollout: the LeaderWorkerSets are
those the controller's own builder makes (`disaggregatedset.objects`), with the status
and pods the LeaderWorkerSet controller gives them. Checks the role lines (targets,
counts over revisions, Group Identity), the LeaderWorkerSet lines (slice, current or
old revision, initial replicas, Service), the groups under each, and the text, JSON
and YAML renderings."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.objects import (
    leaderworkerset,
    role_scaler,
    service,
)
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.resources import DISAGGREGATEDSETS
from leaderworkerset.group.state import GroupState
from leaderworkerset.kubectl.set_render import set_objects, set_text
from leaderworkerset.kubectl.set_rows import SetView, set_view
from leaderworkerset.kubectl.set_snapshot import SetSnapshot, read_set
from leaderworkerset.kubectl.snapshot import Snapshot
from tests.toolkit.disaggregatedset import disaggregatedset, role
from tests.toolkit.fake_client import FakeApiClient, not_found
from tests.toolkit.pods import container, lws_labels, pod

JSON = dict[str, Any]
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
OLD = "0ld0ld00"
KEY_A = "aaaaaaaa" + "1" * 32
KEY_B = "bbbbbbbb" + "2" * 32


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def the_set(conditions: list[JSON] | None = None) -> JSON:
    doc = disaggregatedset(
        role("prefill", 2, size=2, image="pause"),
        role(
            "decode",
            None,
            size=1,
            image="pause",
            scaling={"mode": c.SCALING_EXTERNAL},
            groupIdentity=lws_c.GROUP_IDENTITY_HASH,
        ),
        name="llm",
        namespace="ns",
        metadata={"uid": "uid-llm"},
        slices=1,
    )
    if conditions is not None:
        doc["status"] = {"conditions": conditions}
    return doc


def lws_of(ds: DisaggregatedSet, role: int, revision: str, replicas: int, ready: int) -> JSON:
    obj = leaderworkerset(ds, ds.roles[role], 0, revision, replicas)
    obj["status"] = {"replicas": replicas, "readyReplicas": ready}
    return obj


def leader(name: str, index: str, revision: str, *, ready: bool = True, size: int = 1) -> JSON:
    return pod(
        name,
        uid=f"uid-{name}",
        created=stamp(60),
        labels=lws_labels(group_index=index, group_key=index, worker="0", revision=revision),
        annotations={lws_c.ANNOTATION_SIZE: str(size)},
        containers=[container("main")],
        node="n1",
        phase="Running",
        ready=ready,
        container_statuses=[{"name": "main", "ready": ready, "restartCount": 0}],
    )


def mid_rollout(conditions: list[JSON] | None = None) -> SetSnapshot:
    """Prefill 2 -> old 1 + new 1 (not ready yet); decode (Hash) old 1, new 2."""
    doc = the_set(conditions)
    ds, errors = DisaggregatedSet.from_json(doc)
    assert errors == []
    new = compute_revision(ds.roles)
    old_prefill = lws_of(ds, 0, OLD, 1, 1)
    old_prefill["metadata"]["annotations"] = {c.ANNOTATION_INITIAL_REPLICAS: "2"}
    old_decode = lws_of(ds, 1, OLD, 1, 1)
    old_decode["metadata"]["annotations"] = {c.ANNOTATION_INITIAL_REPLICAS: "3"}
    new_prefill, new_decode = lws_of(ds, 0, new, 1, 0), lws_of(ds, 1, new, 2, 2)
    # The Hash LeaderWorkerSet's leader Deployment, whose template says which revision is current.
    template = {"metadata": {"labels": {lws_c.LABEL_TEMPLATE_REVISION_HASH: "t2"}}}
    deployment = {"spec": {"template": template}}
    decode_pods = [leader("d-1", KEY_A, "t2"), leader("d-2", KEY_B, "t2", ready=False)]
    snapshots = [
        Snapshot(new_decode, decode_pods, [], deployment),
        Snapshot(old_prefill, [leader("p-0", "0", "t1", size=2)], [], None),
        Snapshot(new_prefill, [], [], None),
        Snapshot(old_decode, [], [], None),
    ]
    services = [service(ds, old_prefill), service(ds, old_decode)]
    scaler = role_scaler(ds, "decode", 3)
    return SetSnapshot(doc, snapshots, services, [scaler])


def view(conditions: list[JSON] | None = None) -> SetView:
    return set_view(mid_rollout(conditions), NOW)


def test_role_lines_count_every_revision_and_take_their_target() -> None:
    prefill, decode = view().roles
    assert (prefill.scaling, prefill.scaler, prefill.target) == ("Static", None, 2)
    assert (prefill.replicas, prefill.ready, prefill.updated) == (2, 1, 1)
    assert prefill.group_identity == "Ordinal"
    assert (decode.scaling, decode.scaler, decode.target) == ("External", "llm-decode", 3)
    assert (decode.replicas, decode.ready, decode.updated) == (3, 3, 2)
    assert decode.group_identity == "Hash"


def test_an_external_role_without_its_scaler_has_no_target() -> None:
    snapshot = mid_rollout()
    snapshot.scalers = []
    assert set_view(snapshot, NOW).roles[1].target is None


def test_leaderworkersets_by_slice_current_first_then_role_order() -> None:
    lines = view().leaderworkersets
    new = compute_revision(DisaggregatedSet.from_json(the_set())[0].roles)
    assert [(x.revision, x.role) for x in lines] == [
        (new, "prefill"),
        (new, "decode"),
        (OLD, "prefill"),
        (OLD, "decode"),
    ]
    assert [x.current for x in lines] == [True, True, False, False]
    assert [x.initial for x in lines] == [None, None, 2, 3]
    assert lines[2].service == f"llm-0-{OLD}-prefill-prv" and lines[0].service is None
    assert {x.slice for x in lines} == {"0"}
    assert [x.group_identity for x in lines] == ["Ordinal", "Hash", "Ordinal", "Hash"]


def test_each_leaderworkerset_has_its_group_rows() -> None:
    lines = {(x.revision, x.role): x for x in view().leaderworkersets}
    decode = next(x for x in lines.values() if x.current and x.role == "decode")
    assert [(r.group, r.state) for r in decode.groups] == [
        ("aaaaaaaa", GroupState.READY),
        ("bbbbbbbb", GroupState.NOT_READY),
    ]
    # The not-ready Hash group is the one its ReplicaSet would remove first.
    assert [r.scale_down_rank for r in decode.groups] == [2, 1]
    assert [r.group for r in lines[(OLD, "prefill")].groups] == ["0"]


def test_text_has_summary_roles_leaderworkersets_and_groups() -> None:
    text = set_text(view())
    new = compute_revision(DisaggregatedSet.from_json(the_set())[0].roles)
    assert f"Revision:    {new}" in text
    assert "Conditions:  <none>" in text  # upstream's controller writes none
    assert "Placement:   None" in text
    roles = text.split("Roles:\n")[1].split("\n\n")[0].splitlines()
    assert roles[0] == "  ROLE      SCALING    TARGET   REPLICAS   READY   UPDATED   GROUP IDENTITY"
    assert roles[2].split() == ["decode", "External", "3", "3", "3", "2", "Hash"]
    lwss = text.split("LeaderWorkerSets:\n")[1].split("\n\n")[0].splitlines()
    assert lwss[3].split() == [
        "0",
        OLD,
        "(old)",
        "prefill",
        f"llm-0-{OLD}-prefill",
        "1",
        "1",
        "2",
        f"llm-0-{OLD}-prefill-prv",
    ]
    assert f"Groups of llm-0-{new}-decode (Hash):" in text
    assert "SCALE-DOWN RANK" in text.split(f"Groups of llm-0-{new}-decode (Hash):")[1]
    empty = text.split(f"Groups of llm-0-{new}-prefill (Ordinal):\n")[1].splitlines()[0]
    assert empty == "  <none>"


def test_conditions_are_shown_when_written() -> None:
    conditions = [
        {"type": "Available", "status": "True", "reason": "AllRolesAvailable"},
        {"type": "Progressing", "status": "True", "reason": "RollingUpdate", "message": "a  b"},
    ]
    text = set_text(view(conditions))
    assert "Available:   True (AllRolesAvailable)" in text
    assert "Progressing: True (RollingUpdate): a b" in text
    assert "Conditions:" not in text


def with_generations(generation: int, observed: int | None) -> SetView:
    snapshot = mid_rollout([{"type": "Available", "status": "True", "reason": "R"}])
    snapshot.ds["metadata"]["generation"] = generation
    if observed is not None:
        snapshot.ds["status"]["observedGeneration"] = observed
    return set_view(snapshot, NOW)


def test_a_status_written_for_an_older_spec_is_called_stale() -> None:
    stale = with_generations(4, 3)
    assert stale.stale
    assert "Status:      stale: describes generation 3, the spec is at 4" in set_text(stale)
    assert json.loads(set_objects(stale, "json"))["observedGeneration"] == 3


def test_a_current_or_unwritten_observed_generation_says_nothing() -> None:
    # Unwritten: a controller that writes no observedGeneration (upstream v0.10.0).
    for current in (with_generations(4, 4), with_generations(4, None)):
        assert not current.stale
        assert "Status:" not in set_text(current)


def test_json_and_yaml_carry_the_same_data() -> None:
    as_json = json.loads(set_objects(view(), "json"))
    assert as_json == yaml.safe_load(set_objects(view(), "yaml"))
    assert as_json["disaggregatedSet"] == "llm" and as_json["slices"] == 1
    assert as_json["roles"][1] == {
        "name": "decode",
        "scaling": "External",
        "scaler": "llm-decode",
        "target": 3,
        "replicas": 3,
        "readyReplicas": 3,
        "updatedReplicas": 2,
        "groupIdentity": "Hash",
    }
    decode = as_json["leaderWorkerSets"][1]
    assert decode["currentRevision"] is True and decode["groupIdentity"] == "Hash"
    assert [g["scaleDownRank"] for g in decode["groups"]] == [2, 1]


async def test_a_cluster_without_the_scaler_kind_shows_the_set_without_scalers() -> None:
    client = FakeApiClient()
    client.put(DISAGGREGATEDSETS, {"metadata": {"name": "llm", "namespace": "default"}})
    # Upstream's v0.9 CRDs have no RoleScaler kind: the server answers its LIST with 404.
    plural = "disaggregatedsetrolescalers"
    client.fail[("list", plural)] = not_found(plural, "")
    snapshot = await read_set(client, "llm", "default")
    assert snapshot.scalers == []
    assert snapshot.ds["metadata"]["name"] == "llm"
