"""The stored form of a kubectl-created manifest, and its template revision hash, equal
upstream's.

Upstream's defaulting webhook decodes the object into Go structs and patches it with
their encoding, so struct-typed members that the manifest omitted are stored. Its
controller then hashes the Go JSON of a patch holding leaderWorkerTemplate and
networkConfig. The expected hashes here come from an independent rendering of that
algorithm over patches written out by hand as Go would encode them; our webhook and
revision code only produce the actual values.
"""

from __future__ import annotations

import copy

import pytest

from leaderworkerset.controllers.revisions import snapshot_key
from leaderworkerset.controllers.semantic_json import normalized
from tests.toolkit.lws import defaulted_json
from tests.toolkit.upstream_revision import (
    CASES,
    JSON,
    LEADER_WORKER_MANIFEST,
    PAUSE_MANIFEST,
    SAMPLE_MANIFEST,
    upstream_hash,
)


@pytest.mark.parametrize("manifest, patch, pinned", CASES, ids=["pause", "sample", "both"])
def test_revision_hash_matches_upstream(manifest: JSON, patch: JSON, pinned: str) -> None:
    expected = upstream_hash(patch)
    assert expected == pinned, "the independent rendering drifted"
    stored = defaulted_json(copy.deepcopy(manifest))
    assert snapshot_key(stored) == expected


def test_template_metadata_and_container_resources_are_stored() -> None:
    stored = defaulted_json(copy.deepcopy(LEADER_WORKER_MANIFEST))
    lwt = stored["spec"]["leaderWorkerTemplate"]
    worker, leader = lwt["workerTemplate"], lwt["leaderTemplate"]
    assert worker["metadata"] == {}
    assert leader["metadata"] == {"labels": {"role": "leader"}}
    assert worker["spec"]["containers"][0]["resources"] == {}
    assert leader["spec"]["initContainers"][0]["resources"] == {}
    ref = leader["spec"]["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]
    assert ref == {"resource": "limits.cpu", "divisor": "0"}


def test_given_members_are_kept() -> None:
    manifest = copy.deepcopy(SAMPLE_MANIFEST)
    worker = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["metadata"] = {"annotations": {"a": "b"}}
    env = {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "x", "divisor": "1Mi"}}}
    worker["spec"]["containers"][0]["env"] = [env]
    stored = defaulted_json(manifest)["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert stored["metadata"] == {"annotations": {"a": "b"}}
    container = stored["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"cpu": "100m"}, "requests": {"cpu": "50m"}}
    assert container["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"] == "1Mi"


def test_volume_claim_templates_get_struct_members() -> None:
    manifest = copy.deepcopy(PAUSE_MANIFEST)
    manifest["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = [
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    ]
    stored = defaulted_json(manifest)
    (claim,) = stored["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]
    assert claim == {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {}},
        "status": {},
    }


def test_filling_is_idempotent() -> None:
    once = defaulted_json(copy.deepcopy(LEADER_WORKER_MANIFEST))
    assert defaulted_json(copy.deepcopy(once)) == once


def test_a_zero_divisor_is_no_template_change() -> None:
    ref = {"resource": "limits.cpu"}
    with_zero = {"resourceFieldRef": {**ref, "divisor": "0"}}
    assert normalized(with_zero) == normalized({"resourceFieldRef": ref})
    assert normalized({"resourceFieldRef": {**ref, "divisor": "1m"}}) != normalized(
        {"resourceFieldRef": ref}
    )
