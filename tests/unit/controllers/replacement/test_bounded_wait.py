"""The bounded PostTermination wait as pure decisions: when a tearing-down group stops
holding its replacement back (a node not Ready, a termination overrun), each just
before and just after its threshold; and admission with a cache that lags the API
server."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.api.config.codec import ConfigError, configuration_yaml, decode_configuration
from leaderworkerset.api.config.defaults import set_defaults
from leaderworkerset.api.config.validation import validate
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.api.objects import timestamp_of
from leaderworkerset.caches import build_caches, node_readiness
from leaderworkerset.controller_command import Settings, load_configuration
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.held import HeldBoard, HeldReplacements
from leaderworkerset.controllers.lws.status import (
    CONDITION_REPLACEMENT_HELD,
    REASON_NO_REPLACEMENT_HELD,
    REASON_WAITING_FOR_TERMINATION,
    hash_status,
    held_condition,
)
from leaderworkerset.controllers.replacement.reconciler import (
    RELEASE_SLACK,
    ReplacementReconciler,
)
from leaderworkerset.controllers.replacement.reconciler import held_of as held_in
from leaderworkerset.controllers.replacement.triggers import node_events
from leaderworkerset.group.options import (
    NODE_NOT_READY,
    ORPHANED,
    TERMINATION_OVERRUN,
    ControllerOptions,
    ReleaseThresholds,
)
from leaderworkerset.group.post_termination import (
    decide,
    node_not_ready_since,
    pod_release,
)
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import container, lws_labels
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.recorded_events import RecordedEvents
from tests.toolkit.statefulsets import controller_ref, statefulset

JSON = dict[str, Any]
T0 = "2026-01-01T00:00:00Z"
EPOCH = timestamp_of(T0) or 0.0
NODE_BOUND = 120.0
OVERRUN_BOUND = 300.0
BOUNDS = ReleaseThresholds(node_not_ready=NODE_BOUND, termination_overrun=OVERRUN_BOUND)
EPS = 0.001


def at(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(EPOCH + seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, status: str = "True", since: float = 0.0) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": T0},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": T0},
                {"type": "Ready", "status": status, "lastTransitionTime": at(since)},
            ]
        },
    }


def pod(
    name: str,
    key: str,
    *,
    leader: bool = True,
    node_name: str = "n1",
    gated: bool = False,
    deleted_at: float | None = None,
    created: float = 0.0,
) -> JSON:
    return a_pod(
        name,
        "default",
        created=at(created),
        deleted=None if deleted_at is None else at(deleted_at),
        grace=None if deleted_at is None else 30,
        labels=lws_labels("lws", worker="0" if leader else "1", group_key=key, group_index=key),
        containers=[container("c", "pause")],
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        node=None if gated else node_name,
        phase="Running",
    )


def old_group(key: str = "a" * 40, node_name: str = "n1", deleted_at: float = 0.0) -> list[JSON]:
    """A group whose leader was deleted: leader and worker terminating on `node_name`."""
    return [
        pod(f"old-{key[:4]}", key, node_name=node_name, deleted_at=deleted_at),
        pod(f"old-{key[:4]}-1", key, leader=False, node_name=node_name, deleted_at=deleted_at),
    ]


REPLACEMENT = pod("new", "b" * 40, gated=True, created=1)


def admitted(pods: list[JSON], nodes: dict[str, JSON], now: float, **kw: Any) -> list[str]:
    return [p["metadata"]["name"] for p in decide(pods, nodes, EPOCH + now, BOUNDS, **kw).admit]


# --- reading nodes -------------------------------------------------------------------------


def test_node_not_ready_since() -> None:
    assert node_not_ready_since(node("n1")) is None
    assert node_not_ready_since(node("n1", "False", 10)) == EPOCH + 10
    assert node_not_ready_since(node("n1", "Unknown", 20)) == EPOCH + 20
    # Never reported Ready: not ready since it was registered.
    no_condition = {"metadata": {"name": "n", "creationTimestamp": at(5)}, "status": {}}
    assert node_not_ready_since(no_condition) == EPOCH + 5


def test_node_cache_keeps_only_the_ready_condition() -> None:
    full = node("n1", "False", 3)
    full["metadata"].update(
        {"uid": "u", "resourceVersion": "7", "labels": {"x": "y"}, "managedFields": [{}]}
    )
    full["status"].update({"images": [{"names": ["big"]}], "capacity": {"cpu": "8"}})
    full["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    kept = node_readiness(full)
    assert kept["metadata"] == {
        "name": "n1",
        "uid": "u",
        "resourceVersion": "7",
        "creationTimestamp": T0,
    }
    assert kept["status"] == {
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": at(3)}]
    }
    assert node_not_ready_since(kept) == node_not_ready_since(full)


# --- a node not Ready -----------------------------------------------------------------------


def test_node_not_ready_releases_at_the_threshold() -> None:
    pods = [*old_group(node_name="n1", deleted_at=1000), REPLACEMENT]
    nodes = {"n1": node("n1", "Unknown", since=10)}
    # The deletion is recent (overrun far away): only the node can release the group.
    assert admitted(pods, nodes, 10 + NODE_BOUND - EPS) == []
    assert admitted(pods, nodes, 10 + NODE_BOUND + EPS) == ["new"]
    decision = decide(pods, nodes, EPOCH + 10 + NODE_BOUND + EPS, BOUNDS)
    (release,) = decision.released
    assert release.reason == NODE_NOT_READY and release.nodes == ("n1",)
    assert release.pods == ("old-aaaa", "old-aaaa-1")


def test_node_ready_false_counts_like_unknown() -> None:
    pods = [*old_group(deleted_at=1000), REPLACEMENT]
    nodes = {"n1": node("n1", "False", since=0)}
    assert admitted(pods, nodes, NODE_BOUND - EPS) == []
    assert admitted(pods, nodes, NODE_BOUND + EPS) == ["new"]


def test_a_ready_node_never_releases() -> None:
    pods = [*old_group(deleted_at=1000), REPLACEMENT]
    assert admitted(pods, {"n1": node("n1")}, 1000 + OVERRUN_BOUND - EPS) == []


def test_a_node_that_is_gone_releases_at_once() -> None:
    pods = [*old_group(deleted_at=1000), REPLACEMENT]
    assert admitted(pods, {}, 0) == ["new"]
    assert decide(pods, {}, EPOCH, BOUNDS).released[0].reason == NODE_NOT_READY


def test_one_pod_on_a_healthy_node_keeps_the_group_counted() -> None:
    key = "a" * 40
    pods = [
        pod("old", key, node_name="dead", deleted_at=0),
        pod("old-1", key, leader=False, node_name="alive"),  # not even terminating yet
        REPLACEMENT,
    ]
    nodes = {"dead": node("dead", "Unknown", 0), "alive": node("alive")}
    assert admitted(pods, nodes, 10 * NODE_BOUND) == []


def test_node_release_disabled_by_zero() -> None:
    pods = [*old_group(deleted_at=1000), REPLACEMENT]
    nodes = {"n1": node("n1", "Unknown", since=0)}
    off = ReleaseThresholds(node_not_ready=0, termination_overrun=OVERRUN_BOUND)
    assert decide(pods, nodes, EPOCH + 10 * NODE_BOUND, off).admit == []
    assert decide(pods, {}, EPOCH, off).admit == []


# --- a termination that overruns --------------------------------------------------------------


def test_termination_overrun_releases_at_the_threshold() -> None:
    # deletionTimestamp already is the end of the grace period.
    pods = [*old_group(deleted_at=50), REPLACEMENT]
    nodes = {"n1": node("n1")}
    assert admitted(pods, nodes, 50 + OVERRUN_BOUND - EPS) == []
    assert admitted(pods, nodes, 50 + OVERRUN_BOUND + EPS) == ["new"]
    release = decide(pods, nodes, EPOCH + 50 + OVERRUN_BOUND + EPS, BOUNDS).released[0]
    assert release.reason == TERMINATION_OVERRUN


def test_a_worker_not_yet_deleted_keeps_the_group_counted() -> None:
    key = "a" * 40
    pods = [
        pod("old", key, deleted_at=0),
        pod("old-1", key, leader=False),  # background deletion: not terminating yet
        REPLACEMENT,
    ]
    assert admitted(pods, {"n1": node("n1")}, 10 * OVERRUN_BOUND) == []


def test_overrun_release_disabled_by_zero() -> None:
    pods = [*old_group(deleted_at=0), REPLACEMENT]
    off = ReleaseThresholds(node_not_ready=NODE_BOUND, termination_overrun=0)
    assert decide(pods, {"n1": node("n1")}, EPOCH + 10 * OVERRUN_BOUND, off).admit == []


def test_the_earlier_release_wins_per_pod() -> None:
    p = pod("old", "a" * 40, deleted_at=0)
    late_node = {"n1": node("n1", "Unknown", since=OVERRUN_BOUND)}
    release = pod_release(p, late_node, BOUNDS)
    assert release is not None and release.reason == TERMINATION_OVERRUN
    early_node = {"n1": node("n1", "Unknown", since=0)}
    release = pod_release(p, early_node, BOUNDS)
    assert release is not None and release.reason == NODE_NOT_READY
    assert release.at == EPOCH + NODE_BOUND


def test_next_release_is_the_earliest_counted_groups() -> None:
    pods = [
        *old_group("a" * 40, node_name="n1", deleted_at=1000),
        *old_group("c" * 40, node_name="n2", deleted_at=20),
        REPLACEMENT,
        pod("new2", "d" * 40, gated=True, created=2),
    ]
    nodes = {"n1": node("n1", "Unknown", since=0), "n2": node("n2")}
    decision = decide(pods, nodes, EPOCH, BOUNDS)
    assert decision.admit == [] and len(decision.held) == 2
    assert decision.next_release_at == EPOCH + NODE_BOUND
    assert decision.holding == ["a" * 40, "c" * 40]
    later = decide(pods, nodes, EPOCH + NODE_BOUND + EPS, BOUNDS)
    assert [p["metadata"]["name"] for p in later.admit] == ["new"]
    assert later.holding == ["c" * 40] and later.next_release_at == EPOCH + 20 + OVERRUN_BOUND


def test_no_release_moment_without_a_bound() -> None:
    pods = [*old_group(deleted_at=0), REPLACEMENT]
    off = ReleaseThresholds(node_not_ready=0, termination_overrun=0)
    decision = decide(pods, {"n1": node("n1")}, EPOCH, off)
    assert decision.held and decision.next_release_at is None


# --- a cache that lags the API server ---------------------------------------------------------


def test_an_ungated_leader_still_seen_gated_is_not_waiting() -> None:
    """T = 1, and the scale-up leader S was admitted a moment ago; the cache still
    shows S gated when a new replacement R2 for a second teardown arrives in the
    same second with a name that sorts first. Without memory, G = 3 and T = 2 would
    admit R2 while its predecessor holds capacity."""
    pods = [
        *old_group("a" * 40, deleted_at=1000),
        pod("r1", "b" * 40, gated=True, created=1),
        pod("s", "e" * 40, gated=True, created=1),  # already ungated on the server
        *old_group("c" * 40, deleted_at=1000),
        pod("a-r2", "d" * 40, gated=True, created=1),
    ]
    nodes = {"n1": node("n1")}
    naive = admitted(pods, nodes, 0)
    assert naive == ["a-r2"]  # the early admission the memory prevents
    assert admitted(pods, nodes, 0, ungating={"s"}) == []
    held = decide(pods, nodes, EPOCH, BOUNDS, ungating={"s"}).held
    assert [p["metadata"]["name"] for p in held] == ["a-r2", "r1"]


class Cluster:
    """The API server's pods as a history of states, and a cache that shows one of
    them (never the newest for sure). Slots count the groups the spec asks for: the
    initial ones and each scale-up; a teardown's replacement takes its group's slot."""

    def __init__(self, running: int) -> None:
        self.serial = 0
        self.slots = running
        state: dict[str, JSON] = {}
        for _ in range(running):
            key = self._key()
            state[f"g{key[:3]}"] = pod(f"g{key[:3]}", key)
            state[f"g{key[:3]}-1"] = pod(f"g{key[:3]}-1", key, leader=False)
        self.history = [state]
        self.seen = 0  # the cache shows history[seen]
        self.ungating: set[str] = set()
        self.in_flight: list[str] = []  # gates removed by a reconcile, not yet written

    def _key(self) -> str:
        self.serial += 1
        return f"{self.serial:03x}".ljust(40, "0")

    @property
    def server(self) -> dict[str, JSON]:
        return self.history[-1]

    def write(self, change: Any) -> None:
        state = {k: _copy(v) for k, v in self.server.items()}
        change(state)
        self.history.append(state)

    def arrive(self, prefix: int) -> None:
        """A gated leader, created in the same second as every other, any name."""
        key = self._key()
        name = f"{prefix}-rep{key[:3]}"
        self.write(lambda s: s.__setitem__(name, pod(name, key, gated=True, created=1)))

    def scale_up(self, prefix: int) -> None:
        self.slots += 1
        self.arrive(prefix)

    def teardown(self, pick: int, prefix: int) -> None:
        """Delete an admitted group's leader; its ReplicaSet creates a replacement."""
        live = sorted({_key(p) for p in self.server.values() if _holds(p) and not _tearing(p)})
        if not live:
            return
        key = live[pick % len(live)]

        def delete(state: dict[str, JSON]) -> None:
            for p in state.values():
                if _key(p) == key:
                    p["metadata"]["deletionTimestamp"] = at(1000)

        self.write(delete)
        self.arrive(prefix)

    def finish(self, pick: int) -> None:
        tearing = sorted({_key(p) for p in self.server.values() if _tearing(p)})
        if tearing:
            key = tearing[pick % len(tearing)]
            self.write(lambda s: [s.pop(n) for n in [n for n, p in s.items() if _key(p) == key]])

    def reconcile(self, memory: bool) -> None:
        """Decide on the cache; the gate removals reach the server later (`land`), and
        other writes may come first. Reconciles of one LeaderWorkerSet do not overlap."""
        self.land()
        cache = list(self.history[self.seen].values())
        ungating = self.ungating if memory else set()
        decision = decide(cache, {"n1": node("n1")}, EPOCH, BOUNDS, ungating=ungating)
        for leader in decision.admit:
            name = leader["metadata"]["name"]
            self.ungating.add(name)  # remembered before the request, as the reconciler does
            self.in_flight.append(name)

    def land(self) -> None:
        for name in self.in_flight:

            def ungate(state: dict[str, JSON], name: str = name) -> None:
                if name in state:
                    state[name]["spec"].pop("schedulingGates", None)
                    state[name]["spec"]["nodeName"] = "n1"

            self.write(ungate)
        self.in_flight = []

    def sync(self, steps: int) -> None:
        """The cache catches up by some events; its handlers tick off the leaders it
        now shows ungated or gone."""
        self.seen = min(len(self.history) - 1, self.seen + steps)
        cache = self.history[self.seen]
        self.ungating = {n for n in self.ungating if n in cache and _gated(cache[n])}

    def capacity_held(self) -> int:
        """Groups holding capacity on the server: admitted ones and tearing-down ones."""
        return len({_key(p) for p in self.server.values() if _holds(p)})


ACTIONS = ["reconcile", "land", "sync", "arrive", "teardown", "finish"]


@st.composite
def histories(draw: st.DrawFn) -> tuple[int, list[tuple[str, int, int]]]:
    running = draw(st.integers(0, 3))
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(ACTIONS), st.integers(0, 9), st.integers(0, 9)),
            max_size=40,
        )
    )
    return running, steps


def replay(running: int, steps: list[tuple[str, int, int]], memory: bool) -> int:
    """The most capacity ever held beyond the slots the spec asks for."""
    cluster = Cluster(running)
    worst = 0
    for action, a, b in steps:
        if action == "reconcile":
            cluster.reconcile(memory)
        elif action == "land":
            cluster.land()
        elif action == "sync":
            cluster.sync(a)
        elif action == "arrive":
            cluster.scale_up(a)
        elif action == "teardown":
            cluster.teardown(a, b)
        else:
            cluster.finish(a)
        worst = max(worst, cluster.capacity_held() - cluster.slots)
    cluster.land()
    return max(worst, cluster.capacity_held() - cluster.slots)


@settings(max_examples=400, deadline=None)
@given(histories())
def test_a_lagging_cache_never_admits_more_than_g_minus_t(
    history: tuple[int, list[tuple[str, int, int]]],
) -> None:
    """Reconciles decide on a cache that shows an earlier state of the API server and
    ungate on the server; replacements arrive in the same second with any name. The
    groups holding capacity (admitted or tearing down) never outnumber the groups the
    spec asks for: no replacement is admitted while its predecessor still holds its
    capacity, which is what admitting at most G - T means."""
    running, steps = history
    assert replay(running, steps, memory=True) == 0


def test_without_memory_the_same_lag_admits_early() -> None:
    """The history the memory is for: one group tearing down, its replacement and a
    scale-up waiting; the scale-up is admitted, and before that gate removal reaches
    the server a second group is torn down; its replacement, created in the same
    second, sorts first. The cache then shows the second teardown but not the gate
    removal."""
    steps = [
        ("teardown", 0, 2),  # group 1 tearing down; replacement 2-rep003 gated
        ("arrive", 1, 0),  # scale-up 1-rep004 gated
        ("sync", 9, 0),
        ("reconcile", 0, 0),  # T = 1, G = 2: admits 1-rep004
        ("teardown", 1, 0),  # group 2 tearing down; replacement 0-rep005 gated
        ("land", 0, 0),  # 1-rep004 ungated on the server
        ("sync", 2, 0),  # the cache shows group 2's teardown, not that ungate
        ("reconcile", 0, 0),  # T = 2: G = 3 without memory, 2 with it
    ]
    assert replay(2, steps, memory=False) > 0
    assert replay(2, steps, memory=True) == 0


def _copy(p: JSON) -> JSON:
    meta = {**p["metadata"], "labels": dict(p["metadata"]["labels"])}
    return {**p, "metadata": meta, "spec": dict(p["spec"])}


def _gated(p: JSON) -> bool:
    return bool(p["spec"].get("schedulingGates"))


def _tearing(p: JSON) -> bool:
    return "deletionTimestamp" in p["metadata"]


def _holds(p: JSON) -> bool:
    return not _gated(p)


def _key(p: JSON) -> str:
    return str(p["metadata"]["labels"][c.LABEL_GROUP_KEY])


# --- the manager Configuration ------------------------------------------------------------

HEADER = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


def test_group_replacement_defaults_and_settings() -> None:
    cfg = load_configuration(None)
    gr = cfg.group_replacement
    assert gr is not None
    assert (gr.node_not_ready_release, gr.termination_overrun_release) == (120.0, 300.0)
    settings_ = Settings(configuration=cfg, namespace="lws-system")
    assert settings_.replacement_release == ReleaseThresholds(120.0, 300.0)
    assert "nodeNotReadyRelease: 2m" in configuration_yaml(cfg)


def test_group_replacement_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        HEADER + "groupReplacement: {nodeNotReadyRelease: 5s, terminationOverrunRelease: 0s}\n"
    )
    cfg = load_configuration(path)
    thresholds = Settings(configuration=cfg, namespace="x").replacement_release
    assert thresholds == ReleaseThresholds(node_not_ready=5.0, termination_overrun=0.0)


def test_group_replacement_rejects_negative_durations_by_field_path() -> None:
    cfg = set_defaults(
        decode_configuration(HEADER + "groupReplacement: {nodeNotReadyRelease: -1s}\n")
    )
    (error,) = [str(e) for e in validate(cfg)]
    assert error.startswith("groupReplacement.nodeNotReadyRelease: Invalid value")
    assert "-1s" in error
    with pytest.raises(ConfigError, match=r"groupReplacement\.terminationOverrunRelease"):
        decode_configuration(HEADER + "groupReplacement: {terminationOverrunRelease: 5}\n")
    with pytest.raises(ConfigError, match=r'unknown field "groupReplacement.other"'):
        decode_configuration(HEADER + "groupReplacement: {other: 1s}\n")


# --- the LeaderWorkerSet status: GroupReplacementHeld -------------------------------------


def hash_lws(**spec: Any) -> JSON:
    return lws_object(name="lws", replicas=2, groupIdentity=c.GROUP_IDENTITY_HASH, **spec)


def held_of(lws: JSON, pods: list[JSON], now: float = 0.0) -> HeldReplacements:
    immediate = lws["spec"].get("groupReplacementPolicy") == c.GROUP_REPLACEMENT_IMMEDIATE
    return held_in(decide(pods, {"n1": node("n1")}, EPOCH + now, BOUNDS, immediate=immediate))


def conditions_of(status: JSON) -> dict[str, JSON]:
    return {cond["type"]: cond for cond in status.get("conditions", [])}


def test_held_condition_appears_and_clears() -> None:
    lws = hash_lws()
    running = [pod("run", "9" * 40)]
    waiting = [*running, *old_group(deleted_at=1000), REPLACEMENT]
    leaders = [p for p in waiting if p["metadata"]["labels"][c.LABEL_WORKER_INDEX] == "0"]

    plain = hash_status(view_of(lws), "rev", running, T0, held=held_of(lws, running))
    assert CONDITION_REPLACEMENT_HELD not in conditions_of(plain.status)

    held = held_of(lws, waiting)
    assert held == HeldReplacements(leaders=("new",), groups=("a" * 40,))
    update = hash_status(view_of(lws), "rev", leaders, T0, held=held)
    cond = conditions_of(update.status)[CONDITION_REPLACEMENT_HELD]
    assert (cond["status"], cond["reason"]) == ("True", REASON_WAITING_FOR_TERMINATION)
    assert "new" in cond["message"] and "aaaaaaaa" in cond["message"]
    assert update.changed
    # The E11 event speaks of the upstream conditions only.
    assert update.event is None or update.event.reason != REASON_WAITING_FOR_TERMINATION
    lws["status"] = update.status

    again = hash_status(view_of(lws), "rev", leaders, at(30), held=held)
    assert not again.changed, "no write when nothing changed"

    admitted_leaders = [p for p in leaders if p["metadata"]["name"] != "new"]
    admitted_leaders.append({**REPLACEMENT, "spec": {"nodeName": "n1"}})
    cleared = hash_status(view_of(lws), "rev", admitted_leaders, at(60), held=HeldReplacements())
    cond = conditions_of(cleared.status)[CONDITION_REPLACEMENT_HELD]
    assert (cond["status"], cond["reason"]) == ("False", REASON_NO_REPLACEMENT_HELD)
    assert cond["lastTransitionTime"] == at(60) and cleared.changed
    lws["status"] = cleared.status
    assert not hash_status(
        view_of(lws), "rev", admitted_leaders, at(90), held=HeldReplacements()
    ).changed


def test_held_condition_keeps_its_transition_time_while_held() -> None:
    lws = hash_lws()
    pods = [*old_group(deleted_at=1000), REPLACEMENT]
    first = hash_status(view_of(lws), "rev", pods, T0, held=held_of(lws, pods))
    lws["status"] = first.status
    more = [*pods, *old_group("c" * 40, deleted_at=1000), pod("new2", "d" * 40, gated=True)]
    second = hash_status(view_of(lws), "rev", more, at(30), held=held_of(lws, more))
    cond = conditions_of(second.status)[CONDITION_REPLACEMENT_HELD]
    assert cond["lastTransitionTime"] == T0 and "cccccccc" in cond["message"]


def test_nothing_is_held_under_immediate_or_once_released() -> None:
    pods = [*old_group(deleted_at=0), REPLACEMENT]
    assert not held_of(hash_lws(groupReplacementPolicy="Immediate"), pods).any
    assert held_of(hash_lws(), pods, now=OVERRUN_BOUND - EPS).any
    assert not held_of(hash_lws(), pods, now=OVERRUN_BOUND + EPS).any


# --- the reconciler: Events once per hold, a wake-up at the release moment ----------------------


def feed(informer: Any, *objects: JSON, kind: str = "ADDED") -> None:
    for i, obj in enumerate(objects):
        obj = {**obj, "metadata": {**obj["metadata"], "uid": obj["metadata"]["name"]}}
        obj["metadata"]["resourceVersion"] = f"{informer.events + i + 1}"
        informer._handle_event({"type": kind, "object": obj})


class Rig:
    def __init__(self, pods: list[JSON], nodes: list[JSON]) -> None:
        # Records gate removals; the caches are fed by hand, so they can lag.
        self.client = FakeApiClient()
        self.caches = build_caches(self.client)
        self.events = RecordedEvents()
        self.now = EPOCH
        self.reconciler = ReplacementReconciler(
            self.client,
            self.caches,
            self.events,
            options=ControllerOptions(replacement_release=BOUNDS),
            clock=lambda: self.now,
        )
        self.caches.pods.add_handler(
            on_update=self.reconciler.observe, on_delete=self.reconciler.observe_deleted
        )
        feed(self.caches.leaderworkersets, hash_lws())
        feed(self.caches.pods, *pods)
        assert self.caches.nodes is not None
        feed(self.caches.nodes, *nodes)
        self.caches.nodes.synced.set()

    @property
    def patched(self) -> list[str]:
        return [call.name for call in self.client.calls_of("patch")]

    async def reconcile(self, at_seconds: float) -> Any:
        self.now = EPOCH + at_seconds
        return await self.reconciler("default/lws")


async def test_reconciler_holds_tells_once_and_wakes_at_the_release() -> None:
    rig = Rig(
        [*old_group(node_name="n1", deleted_at=1000), REPLACEMENT], [node("n1", "Unknown", 10)]
    )
    result = await rig.reconcile(20)
    assert rig.patched == []
    assert result.requeue_after == pytest.approx(10 + NODE_BOUND - 20 + RELEASE_SLACK)
    assert rig.events.reasons == [ev.REASON_REPLACEMENT_HELD]
    assert "new" in rig.events.notes[0] and "aaaaaaaa" in rig.events.notes[0]
    await rig.reconcile(25)
    assert len(rig.events.notes) == 1, "one Event per hold, not per reconcile"

    result = await rig.reconcile(10 + NODE_BOUND + RELEASE_SLACK)
    assert rig.patched == ["new"] and result is None
    told = rig.events.told[-1]
    assert told.reason == ev.REASON_REPLACEMENT_RELEASED
    assert "aaaaaaaa" in told.note and "n1" in told.note and "not Ready" in told.note
    # The cache still shows the leader gated: it is not admitted (or told) again.
    await rig.reconcile(10 + NODE_BOUND + 1)
    assert rig.patched == ["new"] and len(rig.events.notes) == 2
    assert rig.reconciler.ungating("default/lws") == {"new"}
    ungated = {**REPLACEMENT, "spec": {"nodeName": "n2"}}
    feed(rig.caches.pods, ungated, kind="MODIFIED")
    assert rig.reconciler.ungating("default/lws") == set()


async def test_node_events_map_to_the_lws_with_pods_there() -> None:
    rig = Rig([*old_group(node_name="n1", deleted_at=1000), REPLACEMENT], [node("n1")])
    nodes = rig.caches.node_map()
    assert nodes is not None and "n1" in nodes and "n2" not in nodes and len(nodes) == 1
    assert rig.caches.lws_keys_on_node("n1") == ["default/lws"]
    assert rig.caches.lws_keys_on_node("n2") == []
    update = node_events().update
    assert update is not None
    assert update(node("n1"), node("n1", "Unknown", 5))
    assert not update(node("n1"), node("n1"))


def test_unknown_nodes_release_nothing() -> None:
    """Before the node cache has synced an absent Node is not a deleted one."""
    pods = [*old_group(deleted_at=1000), REPLACEMENT]
    assert decide(pods, None, EPOCH + 10 * NODE_BOUND, BOUNDS).admit == []
    assert decide(pods, None, EPOCH + 1000 + OVERRUN_BOUND + EPS, BOUNDS).admit != []


def test_held_board_tells_only_changes() -> None:
    board = HeldBoard()
    told: list[str] = []
    board.on_change = told.append
    assert board.get("ns/lws") is None
    held = HeldReplacements(leaders=("new",), groups=("a" * 40,))
    board.publish("ns/lws", held)
    board.publish("ns/lws", HeldReplacements(leaders=("new",), groups=("a" * 40,)))
    assert told == ["ns/lws"] and board.get("ns/lws") == held
    board.publish("ns/lws", HeldReplacements())
    assert told == ["ns/lws", "ns/lws"] and not board.get("ns/lws").any  # type: ignore[union-attr]
    board.forget("ns/lws")
    assert board.get("ns/lws") is None


# --- naming the group a leader waits for; backing off a refused gate removal -----------------


def test_a_held_leader_is_told_the_one_group_whose_end_lets_it_in() -> None:
    """With two groups tearing down and one leader waiting, T/G counting admits it when
    either goes: it is paired with the one expected to go first (a bounded release), and
    the Event and the condition name that group only."""
    lost = old_group("a" * 40, node_name="n1", deleted_at=1000)  # node lost: bounded
    slow = old_group("c" * 40, node_name="n2", deleted_at=1000)  # healthy node: no bound yet
    pods = [*slow, *lost, REPLACEMENT]
    nodes = {"n1": node("n1", "Unknown", 10), "n2": node("n2")}
    decision = decide(pods, nodes, EPOCH + 20, BOUNDS)
    assert decision.waits_for == {"new": "a" * 40}
    held = held_in(decision)
    assert held == HeldReplacements(leaders=("new",), groups=("a" * 40,))
    cond = held_condition(held, 1, T0)
    assert "new waits for group aaaaaaaa" in cond["message"]
    assert "cccccccc" not in cond["message"]
    note = ev.replacement_held("new", decision.waits_for["new"]).note
    assert "group aaaaaaaa" in note and "cccccccc" not in note


def test_held_leaders_are_paired_oldest_first_with_distinct_groups() -> None:
    first = pod("new-1", "d" * 40, gated=True, created=1)
    second = pod("new-2", "e" * 40, gated=True, created=2)
    groups = [*old_group("a" * 40, deleted_at=1000), *old_group("c" * 40, deleted_at=500)]
    decision = decide([*groups, second, first], {"n1": node("n1")}, EPOCH, BOUNDS)
    # c's grace period ends first, so its overrun bound comes first: the oldest waits on it.
    assert decision.waits_for == {"new-1": "c" * 40, "new-2": "a" * 40}


async def test_a_refused_gate_removal_backs_off_instead_of_a_flat_retry() -> None:
    rig = Rig([*old_group(node_name="n1", deleted_at=0), REPLACEMENT], [node("n1")])
    rig.client.fail[("patch", "pods")] = ApiError(409, {"message": "the gates changed"})
    waits = [(await rig.reconcile(OVERRUN_BOUND + 1 + i)).requeue_after for i in range(8)]
    assert rig.client.calls_of("patch"), "the removal was tried"
    # From a second, doubling while it keeps being refused, never past a minute.
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    del rig.client.fail[("patch", "pods")]
    assert await rig.reconcile(OVERRUN_BOUND + 10) is None
    rig.client.fail[("patch", "pods")] = ApiError(409, {"message": "the gates changed"})
    feed(rig.caches.pods, pod("new2", "e" * 40, gated=True, created=2))
    again = await rig.reconcile(OVERRUN_BOUND + 11)
    assert again.requeue_after == 1.0, "a pass that got through starts the backoff afresh"


# --- a group whose pods will never be deleted (docs/hash-mode.md, "Pods nobody deletes") -------


def worker_set(name: str, *, owned: bool = True, deleting_since: float | None = None) -> JSON:
    deleting = deleting_since is not None
    return statefulset(
        name,
        "default",
        api_version="apps/v1",
        kind="StatefulSet",
        deleted=at(deleting_since) if deleting_since is not None else None,
        finalizers=["example.com/keep"] if deleting else None,
        labels={c.LABEL_SET_NAME: "lws"},
        owners=[{"apiVersion": "v1", **controller_ref("Pod", "old-aaaa", "u1")}] if owned else None,
    )


def kept_worker(key: str = "a" * 40) -> JSON:
    """A worker of `key` still Running (not deleted), controlled by its StatefulSet."""
    worker = pod(f"old-{key[:4]}-1", key, leader=False)
    worker["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "old-aaaa", "controller": True}
    ]
    return worker


def test_pods_of_an_orphaned_worker_statefulset_stop_counting_at_once() -> None:
    """`kubectl delete pod <leader> --cascade=orphan`: the leader is gone, its worker
    StatefulSet lost its owner reference, and its Running worker will never be deleted.
    Those pods are no longer the LWS's: the replacement is admitted at once."""
    pods = [kept_worker(), REPLACEMENT]
    healthy = {"n1": node("n1")}
    orphaned = {"old-aaaa": worker_set("old-aaaa", owned=False)}
    decision = decide(pods, healthy, EPOCH, BOUNDS, worker_sets=orphaned)
    assert [p["metadata"]["name"] for p in decision.admit] == ["new"]
    assert [(r.group, r.reason) for r in decision.released] == [("a" * 40, ORPHANED)]
    # Still owned by its (deleted) leader: the garbage collector will delete it; wait.
    owned = {"old-aaaa": worker_set("old-aaaa")}
    assert decide(pods, healthy, EPOCH + 10 * OVERRUN_BOUND, BOUNDS, worker_sets=owned).admit == []


def test_a_worker_statefulset_held_by_a_finalizer_releases_after_the_overrun_bound() -> None:
    """A foreign finalizer holds the worker StatefulSet in deletion, and with it its pods
    (never deleted while the set exists): the overrun clock starts at the set's
    deletion, so the wait ends `terminationOverrunRelease` later, not never."""
    pods = [kept_worker(), REPLACEMENT]
    healthy = {"n1": node("n1")}
    held = {"old-aaaa": worker_set("old-aaaa", deleting_since=100)}
    before = decide(pods, healthy, EPOCH + 100 + OVERRUN_BOUND - EPS, BOUNDS, worker_sets=held)
    assert before.admit == []
    assert before.next_release_at == pytest.approx(EPOCH + 100 + OVERRUN_BOUND)
    after = decide(pods, healthy, EPOCH + 100 + OVERRUN_BOUND + EPS, BOUNDS, worker_sets=held)
    assert [p["metadata"]["name"] for p in after.admit] == ["new"]
    assert [r.reason for r in after.released] == [TERMINATION_OVERRUN]


def test_the_orphaned_release_is_told_and_counted_by_its_own_reason() -> None:
    note = ev.replacement_released("a" * 40, ORPHANED, ("old-aaaa-1",), ("n1",), 0).note
    assert "group aaaaaaaa" in note and "orphaned" in note


async def test_the_reconciler_reads_the_worker_statefulsets_from_its_cache() -> None:
    rig = Rig([kept_worker(), REPLACEMENT], [node("n1")])
    result = await rig.reconcile(1)
    assert rig.patched == [] and result is None, "owned by a deleted leader: wait for GC"
    feed(rig.caches.statefulsets, worker_set("old-aaaa", owned=False))
    await rig.reconcile(2)
    assert rig.patched == ["new"]
    assert rig.events.reasons[-1] == ev.REASON_REPLACEMENT_RELEASED


def test_a_finished_leader_kept_by_a_foreground_deletion_does_not_stretch_the_wait() -> None:
    """A leader deleted in the foreground finishes (Completed) but stays until its worker
    StatefulSet's pods go; one of them is on a lost node. The finished leader holds no
    capacity, so the group is released on the node bound, not on the leader's overrun."""
    leader = pod("old-aaaa", "a" * 40, node_name="n1", deleted_at=10)
    leader["status"]["phase"] = "Succeeded"
    leader["metadata"]["finalizers"] = ["foregroundDeletion"]
    worker = pod("old-aaaa-1", "a" * 40, leader=False, node_name="n2", deleted_at=10)
    nodes = {"n1": node("n1"), "n2": node("n2", "Unknown", 0)}
    decision = decide([leader, worker, REPLACEMENT], nodes, EPOCH + NODE_BOUND + EPS, BOUNDS)
    assert [p["metadata"]["name"] for p in decision.admit] == ["new"]
    assert [r.reason for r in decision.released] == [NODE_NOT_READY]
    # Without the foreground finalizer the finished leader keeps its own (later) bound.
    del leader["metadata"]["finalizers"]
    later = decide([leader, worker, REPLACEMENT], nodes, EPOCH + NODE_BOUND + EPS, BOUNDS)
    assert later.admit == []
    # A finished leader not being deleted still counts, as before (the pod controller
    # deletes it to take the group down).
    kept = {**leader, "metadata": {**leader["metadata"], "deletionTimestamp": None}}
    assert decide([kept, REPLACEMENT], nodes, EPOCH + 10 * OVERRUN_BOUND, BOUNDS).admit == []


def test_a_pod_in_its_grace_period_keeps_its_own_deadline_under_a_foreground_deletion() -> None:
    """The restart policy deletes a leader in the foreground: the worker StatefulSet is
    marked at once, its pods get their grace period. The pods' own deadline (the end of
    that grace period) holds, never the set's earlier mark."""
    worker = kept_worker()
    worker["metadata"]["deletionTimestamp"] = at(600)  # a 600 s grace period from 0
    deleting = {"old-aaaa": worker_set("old-aaaa", deleting_since=0)}
    release = pod_release(worker, {"n1": node("n1")}, BOUNDS, deleting)
    assert release is not None and release.at == EPOCH + 600 + OVERRUN_BOUND


async def test_a_deleted_lws_takes_its_refusal_count_with_it() -> None:
    """An LWS deleted and made again under its name starts its backoff afresh."""
    rig = Rig([*old_group(node_name="n1", deleted_at=0), REPLACEMENT], [node("n1")])
    rig.client.fail[("patch", "pods")] = ApiError(409, {"message": "the gates changed"})
    assert (await rig.reconcile(OVERRUN_BOUND + 1)).requeue_after == 1.0
    assert (await rig.reconcile(OVERRUN_BOUND + 2)).requeue_after == 2.0
    feed(rig.caches.leaderworkersets, hash_lws(), kind="DELETED")
    assert await rig.reconcile(OVERRUN_BOUND + 3) is None
    feed(rig.caches.leaderworkersets, hash_lws())
    assert (await rig.reconcile(OVERRUN_BOUND + 4)).requeue_after == 1.0
