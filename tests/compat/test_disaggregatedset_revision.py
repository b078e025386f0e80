"""Our DisaggregatedSet revision against upstream's own ComputeRevision, on generated
roles: pod templates with resources, ports, probes, env, volumes, tolerations and
affinity, claims, subgroups, members Go does not know. Upstream's side is
hack/upstream-lws/revision, built from the module pinned there
(hack/build-upstream-revision.sh). Needs no cluster."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaderworkerset.api.disaggregatedset.names import compute_revision
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from tests.toolkit.strategies import lws_specs, unknown_members

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-upstream-revision.sh"

quantities = st.sampled_from(
    ["0", "1", "2", "500m", "1000m", "1.5", "0.5", "1Gi", "1024Mi", "1.5Gi", "100M", "1e3", "16"]
) | st.from_regex(r"[1-9][0-9]{0,3}(\.[0-9]{1,3})?(m|k|M|G|Ki|Mi|Gi|e3)?", fullmatch=True)
int_or_name = st.integers(1, 65535) | st.sampled_from(["http", "grpc"])
texts = st.text(alphabet="ab<>&/ é\n", max_size=6)


@st.composite
def containers(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"name": draw(st.sampled_from(["main", "side"])), "image": draw(texts)}
    if draw(st.booleans()):
        out["resources"] = {
            key: draw(
                st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantities, max_size=3
                )
            )
            for key in draw(st.lists(st.sampled_from(["limits", "requests"]), unique=True))
        }
    if draw(st.booleans()):
        out["ports"] = [{"containerPort": draw(st.integers(1, 65535)), "protocol": "TCP"}]
    if draw(st.booleans()):
        out["env"] = [{"name": "A", "value": draw(texts)}, {"name": "B"}]
    if draw(st.booleans()):
        probe = draw(
            st.sampled_from(
                [
                    {"httpGet": {"path": "/health", "port": draw(int_or_name)}},
                    {"tcpSocket": {"port": draw(int_or_name)}},
                    {"exec": {"command": ["true"]}},
                ]
            )
        )
        out["readinessProbe"] = {**probe, "periodSeconds": draw(st.integers(0, 30))}
    if draw(st.booleans()):
        out["args"] = draw(st.lists(texts, max_size=2))
    out.update(draw(unknown_members))
    return out


@st.composite
def pod_templates(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(containers(), min_size=1, max_size=2))}
    if draw(st.booleans()):
        spec["volumes"] = [
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": draw(quantities)}}
        ]
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(
            st.dictionaries(st.sampled_from(["b", "a", "c"]), texts, max_size=2)
        )
    if draw(st.booleans()):
        spec["hostNetwork"] = draw(st.booleans())
    template: dict[str, Any] = {"spec": spec}
    if draw(st.booleans()):
        template["metadata"] = {"labels": {"app": draw(texts)}, "annotations": {}}
    return template


@st.composite
def roles(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(lws_specs())
    template = spec["leaderWorkerTemplate"]
    template["workerTemplate"] = draw(pod_templates())
    if "leaderTemplate" in template:
        template["leaderTemplate"] = draw(pod_templates())
    if draw(st.booleans()):
        template["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": draw(quantities)}},
                },
            }
        ]
    if spec.get("groupIdentity") == "Hash":
        # Ours only, by design part of the revision (a Hash role never runs under
        # upstream, whose CRD prunes the member); Ordinal spelled out must not count.
        del spec["groupIdentity"]
    name = draw(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True))
    return {"name": name, "spec": spec}


@pytest.fixture(scope="module")
def upstream_revision(pytestconfig: pytest.Config) -> Path:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        built = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True
        )
    return Path(built.stdout.strip().splitlines()[-1])


def theirs(binary: Path, role_lists: list[list[dict[str, Any]]]) -> list[str]:
    out = subprocess.run(
        [str(binary)], input=json.dumps(role_lists), capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def ours(role_list: list[dict[str, Any]]) -> str:
    ds, errors = DisaggregatedSet.from_json({"spec": {"roles": role_list}})
    assert errors == []
    return compute_revision(ds.roles)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(st.lists(roles(), max_size=3), min_size=1, max_size=5))
def test_revision_equals_upstreams(
    upstream_revision: Path, batch: list[list[dict[str, Any]]]
) -> None:
    assert [ours(role_list) for role_list in batch] == theirs(upstream_revision, batch)
