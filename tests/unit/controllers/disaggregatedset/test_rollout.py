"""The rollout decisions, against upstream's v0.10.0 tests of the executor
(executor_test.go), the reconciler (disaggregatedset_controller_test.go) and their
helpers (utils_test.go, lws_manager_test.go). Upstream runs them through a fake API
client; here the same objects go into the pure functions, and the test asserts the
decision that leads to upstream's expected objects. Each test is named after the
upstream test (and case) it mirrors."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from leaderworkerset.api.disaggregatedset.names import (
    compute_revision,
    initial_replicas,
    legacy_lws_name,
    lws_name,
)
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.controllers.disaggregatedset.planner import RollingConfig, Step
from leaderworkerset.controllers.disaggregatedset.rollout import (
    ObservedLWS,
    SlicePlan,
    drain_plan,
    group_by_revision,
    grow_plan,
    initial_replica_state,
    is_stable,
    newest_first,
    plan_set,
    plan_slice,
    rolling_configs,
    target_replicas,
)
from tests.toolkit.disaggregatedset import upstream_role, upstream_set

PREFILL, DECODE = "prefill", "decode"
ROLES = [PREFILL, DECODE]
BASE = "2025-01-01T00:00:00Z"
INITIAL = "disaggregatedset.x-k8s.io/initial-replicas"


def at(hours: int = 0, minutes: int = 0) -> str:
    return f"2025-01-01T{hours:02d}:{minutes:02d}:00Z"


def lws(
    role: str,
    revision: str,
    replicas: int | None,
    *,
    ready: int | None = None,
    initial: int | None = None,
    created: str | None = None,
    name: str | None = None,
    slice_label: str | None = "0",
    set_name: str = "test",
) -> ObservedLWS:
    return ObservedLWS(
        name=name or lws_name(set_name, 0, revision, role),
        role=role,
        revision=revision,
        replicas=replicas,
        ready_replicas=(replicas or 0) if ready is None else ready,
        initial_replicas=initial,
        created=created,
        slice=slice_label,
    )


def two_roles(prefill: int, decode: int, **spec: Any) -> DisaggregatedSet:
    return upstream_set(
        upstream_role(PREFILL, prefill, **spec), upstream_role(DECODE, decode, **spec)
    )


def replicas_after(observed: list[ObservedLWS], scale: dict[str, int]) -> dict[str, int]:
    return {x.name: scale.get(x.name, x.desired) for x in observed}


# --- TestComputeInitialReplicaState (utils_test.go) -------------------------------------


def annotated(role: str, replicas: int | None, annotation: str | None) -> ObservedLWS:
    value = initial_replicas({INITIAL: annotation} if annotation is not None else None)
    return lws(role, "r", replicas, initial=value, name=f"{role}-{replicas}-{annotation}")


@pytest.mark.parametrize(
    "observed,expected",
    [
        pytest.param([], {}, id="returns empty map for empty list"),
        pytest.param(
            [annotated(PREFILL, 3, "3"), annotated(PREFILL, 2, "2")],
            {PREFILL: 5},
            id="sums prefill annotations correctly",
        ),
        pytest.param(
            [annotated(DECODE, 4, "4"), annotated(DECODE, 6, "6")],
            {DECODE: 10},
            id="sums decode annotations correctly",
        ),
        pytest.param(
            [annotated(PREFILL, 3, "3"), annotated(DECODE, 6, "6"), annotated(PREFILL, 2, "2")],
            {PREFILL: 5, DECODE: 6},
            id="sums mixed prefill and decode correctly",
        ),
        pytest.param(
            [annotated(PREFILL, 4, None)],
            {PREFILL: 4},
            id="uses spec.Replicas fallback for missing annotation",
        ),
        pytest.param(
            [annotated(DECODE, 5, "not-a-number")],
            {DECODE: 5},
            id="uses spec.Replicas fallback for invalid annotation",
        ),
        pytest.param(
            [annotated(PREFILL, 3, "3"), annotated(PREFILL, 2, "invalid")],
            {PREFILL: 5},
            id="handles mixed valid and invalid annotations",
        ),
        pytest.param(
            [annotated(PREFILL, None, None)],
            {PREFILL: 1},
            id="handles nil spec.Replicas with missing annotation",
        ),
    ],
)
def test_compute_initial_replica_state(
    observed: list[ObservedLWS], expected: dict[str, int]
) -> None:
    assert initial_replica_state(observed) == expected


def test_compute_initial_replica_state_leaves_out_objects_without_a_role() -> None:
    assert initial_replica_state([lws("", "r", 3)]) == {}


# --- TestGetLWSReplicas (lws_manager_test.go) -------------------------------------------


@pytest.mark.parametrize(
    "replicas,expected",
    [
        pytest.param(None, 1, id="nil replicas returns 1"),
        pytest.param(5, 5, id="set replicas returns correct value"),
        pytest.param(0, 0, id="zero replicas returns 0"),
    ],
)
def test_get_lws_replicas(replicas: int | None, expected: int) -> None:
    assert lws(PREFILL, "r", replicas).desired == expected


# --- TestSortByNewestTimestamp ----------------------------------------------------------


def revision_at(revision: str, offset_minutes: int) -> dict[str, ObservedLWS]:
    created = at(offset_minutes // 60, offset_minutes % 60)
    return {role: lws(role, revision, 1, created=created) for role in ROLES}


@pytest.mark.parametrize(
    "hashes,offsets,expected",
    [
        pytest.param([], [], [], id="empty list"),
        pytest.param(["hash1"], [0], ["hash1"], id="single workload"),
        pytest.param(
            ["newest", "oldest", "middle"],
            [120, 0, 60],
            ["newest", "middle", "oldest"],
            id="three workloads unsorted",
        ),
        pytest.param(
            ["d", "a", "c", "b"],
            [30, 0, 20, 10],
            ["d", "c", "b", "a"],
            id="four workloads unsorted",
        ),
    ],
)
def test_sort_by_newest_timestamp(
    hashes: list[str], offsets: list[int], expected: list[str]
) -> None:
    revisions = {h: revision_at(h, o) for h, o in zip(hashes, offsets, strict=True)}
    assert newest_first(revisions) == expected


def test_sort_by_newest_timestamp_does_not_modify_original() -> None:
    revisions = {"second": revision_at("second", 60), "first": revision_at("first", 0)}
    newest_first(revisions)
    assert list(revisions) == ["second", "first"]


def test_sort_by_newest_timestamp_uses_max_timestamp_across_roles() -> None:
    revisions = {
        "A": {
            PREFILL: lws(PREFILL, "A", 1, created=at(0, 0)),
            DECODE: lws(DECODE, "A", 1, created=at(0, 20)),
        },
        "B": {
            PREFILL: lws(PREFILL, "B", 1, created=at(0, 10)),
            DECODE: lws(DECODE, "B", 1, created=at(0, 10)),
        },
    }
    assert newest_first(revisions) == ["A", "B"]


# --- TestIsRevisionStable ---------------------------------------------------------------


@pytest.mark.parametrize(
    "prefill,prefill_ready,decode,decode_ready,expected",
    [
        pytest.param(3, 3, 2, 2, True, id="all roles stable"),
        pytest.param(3, 2, 2, 2, False, id="prefill unstable"),
        pytest.param(3, 3, 2, 1, False, id="decode unstable"),
        pytest.param(3, 1, 2, 0, False, id="both roles unstable"),
        pytest.param(0, 0, 0, 0, True, id="zero replicas stable"),
    ],
)
def test_is_revision_stable(
    prefill: int, prefill_ready: int, decode: int, decode_ready: int, expected: bool
) -> None:
    revision = {
        PREFILL: lws(PREFILL, "hash1", prefill, ready=prefill_ready),
        DECODE: lws(DECODE, "hash1", decode, ready=decode_ready),
    }
    assert is_stable(revision, ROLES) is expected


def test_a_revision_missing_a_role_is_not_stable() -> None:
    assert not is_stable({PREFILL: lws(PREFILL, "hash1", 1)}, ROLES)


# --- TestGetRoleConfigs -----------------------------------------------------------------


def test_get_role_configs() -> None:
    ds = two_roles(3, 5)
    assert (target_replicas(ds, PREFILL, {}, 0), target_replicas(ds, DECODE, {}, 0)) == (3, 5)


# --- TestExtractRollingUpdateConfig -----------------------------------------------------


def rolling_ds(
    replicas: tuple[int, int], prefill: dict[str, Any] | None, decode: dict[str, Any] | None
) -> DisaggregatedSet:
    docs = []
    for name, count, config in ((PREFILL, replicas[0], prefill), (DECODE, replicas[1], decode)):
        extra = (
            {} if config is None else {"rolloutStrategy": {"rollingUpdateConfiguration": config}}
        )
        docs.append(upstream_role(name, count, **extra))
    # Upstream's test builds typed objects with no schema defaults: neither do we here.
    return upstream_set(*docs, defaulted=False)


def config_of(surge: int | str | None, unavailable: int | str | None) -> dict[str, Any] | None:
    if surge is None and unavailable is None:
        return None
    return {
        k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable)) if v is not None
    }


@pytest.mark.parametrize(
    "prefill,decode,expected",
    [
        pytest.param((None, None), (None, None), [(1, 0), (1, 0)], id="defaults when nil"),
        pytest.param((3, 1), (None, None), [(3, 1), (1, 0)], id="custom prefill only"),
        pytest.param((None, None), (2, 0), [(1, 0), (2, 0)], id="custom decode only"),
        pytest.param((5, 0), (None, None), [(5, 0), (1, 0)], id="partial prefill (surge only)"),
        pytest.param((2, 1), (3, 2), [(2, 1), (3, 2)], id="both custom"),
        pytest.param((0, 4), (0, 2), [(0, 4), (0, 2)], id="surge=0 with unavail allows zero surge"),
        pytest.param((0, 0), (0, 0), [(1, 0), (1, 0)], id="surge=0 without unavail keeps default"),
    ],
)
def test_extract_rolling_update_config(
    prefill: tuple[int | None, int | None],
    decode: tuple[int | None, int | None],
    expected: list[tuple[int, int]],
) -> None:
    ds = rolling_ds((3, 2), config_of(*prefill), config_of(*decode))
    assert rolling_configs(ds, ROLES, {}) == [RollingConfig(s, u) for s, u in expected]


@pytest.mark.parametrize(
    "replicas,surge,unavailable,expected",
    [
        pytest.param(4, "50%", "0", (2, 0), id="50% surge on 4 replicas = 2"),
        pytest.param(4, "0", "25%", (0, 1), id="25% unavailable on 4 replicas = 1"),
        pytest.param(10, "25%", "25%", (3, 2), id="surge rounds up, unavail rounds down"),
        pytest.param(5, "100%", "0", (5, 0), id="100% surge"),
    ],
)
def test_extract_rolling_update_config_with_percentages(
    replicas: int, surge: str, unavailable: str, expected: tuple[int, int]
) -> None:
    config = {"maxSurge": surge, "maxUnavailable": unavailable}
    ds = rolling_ds((replicas, replicas), config, config)
    assert rolling_configs(ds, ROLES, {}) == [RollingConfig(*expected)] * 2


def test_external_role_percentages_are_of_the_scalers_replicas() -> None:
    prefill = upstream_role(
        PREFILL, 1, rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": "50%"}}
    )
    prefill["scaling"] = {"mode": "External"}
    ds = upstream_set(prefill, upstream_role(DECODE, 1), defaulted=False)
    assert rolling_configs(ds, ROLES, {PREFILL: 8})[0] == RollingConfig(4, 0)
    # No scaler yet: percentages of 0 collapse to 0, so the defaults stay.
    assert rolling_configs(ds, ROLES, {})[0] == RollingConfig(1, 0)


# --- TestScaleDownOld -------------------------------------------------------------------


def old_revisions(*workloads: tuple[str, int, int, int]) -> dict[str, dict[str, ObservedLWS]]:
    """(revision, prefill, decode, age in hours) -> revisions as listed."""
    return {
        revision: {
            PREFILL: lws(PREFILL, revision, prefill, created=at(hours)),
            DECODE: lws(DECODE, revision, decode, created=at(hours)),
        }
        for revision, prefill, decode, hours in workloads
    }


@pytest.mark.parametrize(
    "workloads,budget,expected",
    [
        pytest.param(
            [("hash1", 4, 4, 0)], (2, 2), {"hash1": (2, 2)}, id="single workload scales down"
        ),
        pytest.param(
            [("oldest", 2, 2, 0), ("newer", 2, 2, 1)],
            (2, 2),
            {"oldest": (2, 2), "newer": (0, 0)},
            id="multiple workloads drain newest first",
        ),
        pytest.param(
            [("hash1", 3, 2, 0)],
            (1, 2),
            {"hash1": (0, 0)},
            id="coordinated drain when one role reaches zero",
        ),
        pytest.param(
            [("hash1", 6, 6, 0)],
            (2, 2),
            {"hash1": (4, 4)},
            id="budget exhaustion stops mid-workload",
        ),
        pytest.param(
            [("oldest", 2, 2, 0), ("middle", 2, 2, 1), ("newest", 2, 2, 2)],
            (4, 4),
            {"oldest": (2, 2), "middle": (0, 0), "newest": (0, 0)},
            id="three workloads drain newest then middle",
        ),
        pytest.param(
            [("hashA", 1, 2, 0), ("hashB", 3, 3, 1)],
            (1, 1),
            {"hashA": (1, 2), "hashB": (2, 2)},
            id="partial drain of newest without coordinated trigger",
        ),
        pytest.param(
            [("oldest", 1, 1, 0), ("newer", 3, 3, 1)],
            (2, 2),
            {"oldest": (1, 1), "newer": (1, 1)},
            id="drains newest without spilling to older",
        ),
    ],
)
def test_scale_down_old(
    workloads: list[tuple[str, int, int, int]],
    budget: tuple[int, int],
    expected: dict[str, tuple[int, int]],
) -> None:
    revisions = old_revisions(*workloads)
    current = [sum(r[role].desired for r in revisions.values()) for role in ROLES]
    target = [c - b for c, b in zip(current, budget, strict=True)]
    after = replicas_after(
        [x for r in revisions.values() for x in r.values()],
        drain_plan(revisions, ROLES, current, target),
    )
    for revision, (prefill, decode) in expected.items():
        assert after[lws_name("test", 0, revision, PREFILL)] == prefill, revision
        assert after[lws_name("test", 0, revision, DECODE)] == decode, revision


@pytest.mark.parametrize(
    "budget,expected",
    [
        pytest.param((0, 1, 0), (4, 3), id="missing role should not trigger coordinated drain"),
        pytest.param((1, 1, 0), (3, 3), id="normal drain with missing role"),
        pytest.param(
            (4, 0, 0), (0, 0), id="coordinated drain only when existing role reaches zero"
        ),
    ],
)
def test_scale_down_old_with_missing_role(
    budget: tuple[int, int, int], expected: tuple[int, int]
) -> None:
    roles = [PREFILL, DECODE, "encode"]
    revisions = {
        "oldhash": {PREFILL: lws(PREFILL, "oldhash", 4), DECODE: lws(DECODE, "oldhash", 4)}
    }
    current = [4, 4, 0]
    target = [c - b for c, b in zip(current, budget, strict=True)]
    after = replicas_after(
        list(revisions["oldhash"].values()), drain_plan(revisions, roles, current, target)
    )
    assert (after["test-0-oldhash-prefill"], after["test-0-oldhash-decode"]) == expected


# --- TestScaleUpNew ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "current,target,expected",
    [
        pytest.param((2, 4), (4, 4), {"test-0-newhash-prefill": 4}, id="scales up prefill only"),
        pytest.param((4, 2), (4, 4), {"test-0-newhash-decode": 4}, id="scales up decode only"),
        pytest.param(
            (1, 2),
            (4, 4),
            {"test-0-newhash-prefill": 4, "test-0-newhash-decode": 4},
            id="scales up both roles",
        ),
        pytest.param((4, 4), (4, 4), {}, id="no-op when at target"),
    ],
)
def test_scale_up_new(
    current: tuple[int, int], target: tuple[int, int], expected: dict[str, int]
) -> None:
    names = {role: lws_name("test", 0, "newhash", role) for role in ROLES}
    assert grow_plan(names, ROLES, current, target) == expected


def test_scale_up_new_leaves_removed_roles_alone() -> None:
    names = {PREFILL: "p", DECODE: "d"}
    assert grow_plan(names, [PREFILL, DECODE, "gone"], [0, 0, 0], [1, 1, 1]) == {"p": 1, "d": 1}


# --- TestEnsureNewLWSExists -------------------------------------------------------------


def test_ensure_new_lws_exists_creates_workload_when_missing() -> None:
    ds = two_roles(2, 2)
    plan = plan_slice(ds, 0, "newhash", [])
    assert plan.create == {PREFILL: 2, DECODE: 2}


def test_ensure_new_lws_exists_no_op_when_workload_already_exists() -> None:
    ds = two_roles(3, 3)
    plan = plan_slice(ds, 0, "newhash", [lws(PREFILL, "newhash", 3), lws(DECODE, "newhash", 3)])
    assert plan == SlicePlan()


# --- TestReconcilerIntegration ----------------------------------------------------------


def integration(
    target: int, old: tuple[int, int] | None, new: tuple[int, int] | None, surge: int | None = None
) -> tuple[SlicePlan, str]:
    extra = (
        {}
        if surge is None
        else {
            "rolloutStrategy": {
                "rollingUpdateConfiguration": {"maxSurge": surge, "maxUnavailable": 0}
            }
        }
    )
    ds = upstream_set(
        upstream_role(PREFILL, target, **extra), upstream_role(DECODE, target, **extra)
    )
    revision = compute_revision(ds.roles)
    observed = []
    if old is not None:
        observed += [lws(role, "oldhash", old[0], ready=old[1]) for role in ROLES]
    if new is not None:
        observed += [lws(role, revision, new[0], ready=new[1]) for role in ROLES]
    return plan_slice(ds, 0, revision, observed), revision


def test_reconciler_integration_completes_and_cleans_up_old_workloads() -> None:
    plan, _ = integration(2, old=(0, 0), new=(2, 2))
    assert sorted(plan.delete) == ["test-0-oldhash-decode", "test-0-oldhash-prefill"]
    assert (plan.create, plan.scale, plan.rolling_out, plan.requeue_after) == ({}, {}, False, None)


def test_reconciler_integration_advances_through_rolling_update() -> None:
    plan, _ = integration(2, old=(2, 2), new=None)
    assert plan.rolling_out and plan.requeue_after
    assert plan.create == {PREFILL: 0, DECODE: 0}
    assert plan.annotate == {"test-0-oldhash-prefill": 2, "test-0-oldhash-decode": 2}


def test_reconciler_integration_no_scale_down_until_new_ready() -> None:
    plan, _ = integration(4, old=(4, 4), new=(2, 0), surge=2)
    assert plan.rolling_out and plan.requeue_after
    assert (plan.scale, plan.step) == ({}, None)


def test_reconciler_integration_scales_down_when_new_ready() -> None:
    plan, _ = integration(4, old=(4, 4), new=(4, 4), surge=2)
    assert plan.step == Step(old=(0, 0), new=(4, 4))
    assert plan.scale == {"test-0-oldhash-prefill": 0, "test-0-oldhash-decode": 0}


# --- TestReconcileRollingUpdateABCScenario ----------------------------------------------


@pytest.mark.parametrize(
    "a,b,c,expected_a,expected_b,expected_c",
    [
        pytest.param(
            (2, 2),
            (2, 2),
            (0, 0),
            (2, 2),
            (2, 2),
            (1, 1),
            id="first step scales up C without drain",
        ),
        pytest.param(
            (0, 0), (2, 2), (2, 2), (0, 0), (2, 2), (3, 3), id="C scales up while B stays"
        ),
        pytest.param(
            (2, 2), (2, 2), (2, 2), (2, 2), (1, 1), (2, 2), id="drains newest old workload first"
        ),
    ],
)
def test_reconcile_rolling_update_abc_scenario(
    a: tuple[int, int],
    b: tuple[int, int],
    c: tuple[int, int],
    expected_a: tuple[int, int],
    expected_b: tuple[int, int],
    expected_c: tuple[int, int],
) -> None:
    ds = two_roles(4, 4)
    observed = []
    for revision, counts, hours, initial in (
        ("hashA", a, 0, 2),
        ("hashB", b, 1, 2),
        ("hashC", c, 2, None),
    ):
        if revision == "hashA" and counts == (0, 0):
            continue  # upstream creates no objects for an empty A
        for role, count in zip(ROLES, counts, strict=True):
            observed.append(lws(role, revision, count, initial=initial, created=at(hours)))
    plan = plan_slice(ds, 0, "hashC", observed)
    after = replicas_after(observed, plan.scale)
    for revision, expected in (("hashA", expected_a), ("hashB", expected_b), ("hashC", expected_c)):
        if revision == "hashA" and a == (0, 0):
            continue
        assert (after[f"test-0-{revision}-prefill"], after[f"test-0-{revision}-decode"]) == expected


# --- TestMidRolloutABC, TestAsymmetricSizesCoordinatedDrain: whole reconcile loops ------


class Cluster:
    """The LeaderWorkerSets of one slice as a fake API server keeps them: plans are
    applied, then every pod becomes ready, as upstream's simulateAllReady does."""

    def __init__(self, ds: DisaggregatedSet, observed: list[ObservedLWS]) -> None:
        self.ds = ds
        self.objects = {x.name: x for x in observed}

    def reconcile(self) -> SlicePlan:
        revision = compute_revision(self.ds.roles)
        plan = plan_set(self.ds, revision, list(self.objects.values())).slices[0]
        for name in plan.delete:
            del self.objects[name]
        for role, replicas in plan.create.items():
            name = lws_name(self.ds.name, 0, revision, role)
            self.objects[name] = lws(role, revision, replicas, ready=0)
        for name, value in plan.annotate.items():
            self.objects[name] = replace(self.objects[name], initial_replicas=value)
        for name, replicas in plan.scale.items():
            self.objects[name] = replace(self.objects[name], replicas=replicas)
        for name, x in self.objects.items():
            self.objects[name] = replace(x, ready_replicas=x.desired)
        return plan

    def replicas(self, revision: str, role: str) -> int:
        found = self.objects.get(lws_name(self.ds.name, 0, revision, role))
        return 0 if found is None else found.desired


def abc(
    target: tuple[int, int], a: tuple[int, int], b: tuple[int, int], surges: tuple[int, int]
) -> tuple[Cluster, dict[str, str]]:
    def roles_with(image: str) -> list[dict[str, Any]]:
        return [
            upstream_role(
                role,
                count,
                image=image,
                rolloutStrategy={
                    "rollingUpdateConfiguration": {"maxSurge": surge, "maxUnavailable": 0}
                },
            )
            for role, count, surge in zip(ROLES, target, surges, strict=True)
        ]

    revisions = {
        key: compute_revision(upstream_set(*roles_with(f"img:{key.lower()}")).roles)
        for key in "ABC"
    }
    ds = upstream_set(*roles_with("img:c"))
    observed = [
        lws(role, revisions[key], count)
        for key, counts in (("A", a), ("B", b))
        for role, count in zip(ROLES, counts, strict=True)
    ]
    return Cluster(ds, observed), revisions


def test_mid_rollout_abc() -> None:
    cluster, revisions = abc((2, 4), a=(1, 2), b=(1, 2), surges=(1, 1))
    for _ in range(20):
        cluster.reconcile()
    for key in "AB":
        assert (
            cluster.replicas(revisions[key], PREFILL)
            == cluster.replicas(revisions[key], DECODE)
            == 0
        )
    assert (
        cluster.replicas(revisions["C"], PREFILL),
        cluster.replicas(revisions["C"], DECODE),
    ) == (2, 4)


def test_asymmetric_sizes_coordinated_drain() -> None:
    cluster, revisions = abc((4, 3), a=(1, 2), b=(3, 1), surges=(1, 2))
    for step in range(20):
        cluster.reconcile()
        for key in "AB":
            prefill = cluster.replicas(revisions[key], PREFILL)
            decode = cluster.replicas(revisions[key], DECODE)
            assert (prefill == 0) == (decode == 0), (
                f"step {step}: {key} orphaned ({prefill}, {decode})"
            )
    for key in "AB":
        assert (
            cluster.replicas(revisions[key], PREFILL)
            == cluster.replicas(revisions[key], DECODE)
            == 0
        )
    assert (
        cluster.replicas(revisions["C"], PREFILL),
        cluster.replicas(revisions["C"], DECODE),
    ) == (4, 3)


def test_a_finished_rollout_deletes_the_old_revision_then_settles() -> None:
    cluster, revisions = abc((2, 2), a=(2, 2), b=(0, 0), surges=(1, 1))
    plans = [cluster.reconcile() for _ in range(20)]
    deleted = [name for plan in plans for name in plan.delete]
    old = [lws_name("test", 0, revisions[key], role) for key in "AB" for role in ROLES]
    assert sorted(deleted) == sorted(old)
    # The drained revision goes before the planner could call the rollout complete, as
    # upstream's cleanup runs first: the next reconciles are steady and do nothing.
    assert not any(plan.complete for plan in plans)
    assert plans[-1] == SlicePlan()
    assert set(cluster.objects) == {lws_name("test", 0, revisions["C"], role) for role in ROLES}


# --- disaggregatedset_controller_test.go: the set-level decisions -----------------------


def test_fresh_deployment_no_rolling_update() -> None:
    ds = two_roles(3, 2)
    (slice0,) = plan_set(ds, compute_revision(ds.roles), []).slices
    assert (slice0.create, slice0.rolling_out) == ({PREFILL: 3, DECODE: 2}, False)


def test_scaling_without_rolling_update() -> None:
    ds = two_roles(5, 4)
    revision = compute_revision(ds.roles)
    observed = [lws(PREFILL, revision, 3), lws(DECODE, revision, 2)]
    (slice0,) = plan_set(ds, revision, observed).slices
    assert slice0.scale == {
        lws_name("test", 0, revision, PREFILL): 5,
        lws_name("test", 0, revision, DECODE): 4,
    }
    assert (slice0.create, slice0.rolling_out) == ({}, False)


def test_slices_create_one_set_per_slice() -> None:
    ds = upstream_set(upstream_role(PREFILL, 2), upstream_role(DECODE, 3), slices=2)
    plan = plan_set(ds, compute_revision(ds.roles), [])
    assert [p.create for p in plan.slices] == [{PREFILL: 2, DECODE: 3}] * 2


def test_slices_scale_down_deletes_removed_slice() -> None:
    ds = upstream_set(upstream_role(PREFILL, 2), upstream_role(DECODE, 2), slices=1)
    revision = compute_revision(ds.roles)
    observed = [
        replace(
            lws(role, revision, 2), name=lws_name("test", index, revision, role), slice=str(index)
        )
        for index in (0, 1)
        for role in ROLES
    ]
    plan = plan_set(ds, revision, observed)
    assert sorted(plan.delete) == sorted(lws_name("test", 1, revision, role) for role in ROLES)
    assert plan.slices == [SlicePlan()]


def legacy(role: str, revision: str) -> ObservedLWS:
    return lws(role, revision, 2, name=legacy_lws_name("test", revision, role), slice_label=None)


def test_legacy_adopted_in_place() -> None:
    ds = two_roles(2, 2)
    revision = compute_revision(ds.roles)
    plan = plan_set(ds, revision, [legacy(PREFILL, revision), legacy(DECODE, revision)])
    assert (plan.delete, plan.delete_services, plan.slices) == ([], [], [SlicePlan()])


def test_legacy_migrates_to_slice_aware_on_rollout() -> None:
    ds = two_roles(2, 2, image="nginx:2.0")
    revision = compute_revision(ds.roles)
    plan = plan_set(ds, revision, [legacy(PREFILL, "old12345"), legacy(DECODE, "old12345")])
    (slice0,) = plan.slices
    assert plan.delete == []
    assert slice0.rolling_out and slice0.create == {PREFILL: 0, DECODE: 0}
    assert slice0.annotate == {legacy_lws_name("test", "old12345", role): 2 for role in ROLES}


def test_slices_increase_recreates_legacy_slice0() -> None:
    ds = upstream_set(upstream_role(PREFILL, 2), upstream_role(DECODE, 2), slices=2)
    revision = compute_revision(ds.roles)
    plan = plan_set(ds, revision, [legacy(PREFILL, revision), legacy(DECODE, revision)])
    names = [legacy_lws_name("test", revision, role) for role in ROLES]
    assert plan.delete == names
    assert plan.delete_services == [f"{name}-prv" for name in names]
    assert [p.create for p in plan.slices] == [{PREFILL: 2, DECODE: 2}] * 2


def test_slices_increase_with_rollout_not_blocked() -> None:
    ds = upstream_set(upstream_role(PREFILL, 2), upstream_role(DECODE, 2), slices=2)
    revision = compute_revision(ds.roles)
    plan = plan_set(ds, revision, [legacy(PREFILL, "oldrev01"), legacy(DECODE, "oldrev01")])
    assert plan.delete == []
    slice0, slice1 = plan.slices
    assert slice0.rolling_out and slice0.create == {PREFILL: 0, DECODE: 0}
    assert slice1.create == {PREFILL: 2, DECODE: 2}


# --- External roles (executor.go's scaler reading; no upstream unit test) ---------------


def external_ds(replicas: int = 1) -> DisaggregatedSet:
    prefill = upstream_role(PREFILL, replicas)
    prefill["scaling"] = {"mode": "External"}
    return upstream_set(prefill, upstream_role(DECODE, 2))


def test_external_role_targets_its_scaler() -> None:
    ds = external_ds()
    assert target_replicas(ds, PREFILL, {PREFILL: 6}, current_new=3) == 6
    assert target_replicas(ds, PREFILL, {}, current_new=3) == 3  # no scaler yet: stay
    assert target_replicas(ds, "unknown", {}, current_new=3) == 1


def test_external_role_does_not_shrink_during_a_rollout() -> None:
    ds = external_ds()
    revision = compute_revision(ds.roles)
    observed = [
        lws(PREFILL, "old", 4),
        lws(DECODE, "old", 2),
        lws(PREFILL, revision, 3),
        lws(DECODE, revision, 2),
    ]
    plan = plan_slice(ds, 0, revision, observed, {PREFILL: 1})
    assert plan.step is not None and plan.step.new[0] == 3  # HPA's 1 waits for the rollout


def test_group_by_revision_keeps_one_object_per_role() -> None:
    grouped = group_by_revision([lws(PREFILL, "r", 1), lws(DECODE, "r", 2), lws(PREFILL, "s", 3)])
    assert {r: sorted(roles) for r, roles in grouped.items()} == {
        "r": [DECODE, PREFILL],
        "s": [PREFILL],
    }


def test_a_new_revision_created_part_way_gets_its_missing_roles() -> None:
    # Old revision "old" at 3+3; the new revision's decode LWS was created, prefill's
    # create failed. Ours makes prefill's (at 0, as the first pass would have); upstream
    # would wait for ever for a stable new revision.
    ds = two_roles(3, 3)
    observed = [lws(PREFILL, "old", 3), lws(DECODE, "old", 3), lws(DECODE, "newhash", 0)]
    plan = plan_slice(ds, 0, "newhash", observed)
    assert plan.create == {PREFILL: 0}
    assert plan.scale == {}
