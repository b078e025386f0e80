"""Controller expectations: exact by identity, bounded by a TTL."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.runtime.expectations import EXPECTATIONS_TIMEOUT, Expectations
from tests.toolkit.clock import FakeClock

LWS = "ns/sample"


def new() -> tuple[Expectations, FakeClock]:
    clock = FakeClock()
    return Expectations(clock=clock.now), clock


def test_nothing_expected_is_satisfied() -> None:
    exp, _ = new()
    assert exp.satisfied(LWS)
    exp.deletion_observed(LWS, "Pod", "ns/x")  # stray events are harmless
    assert exp.satisfied(LWS)
    assert len(exp) == 0


def test_removals_are_satisfied_only_when_every_one_is_seen() -> None:
    exp, _ = new()
    exp.expect_deletions(LWS, "Pod", ["ns/sample-0", "ns/sample-1"])
    assert not exp.satisfied(LWS)
    exp.deletion_observed(LWS, "Pod", "ns/sample-0")
    exp.deletion_observed(LWS, "Pod", "ns/sample-0")  # a repeat must not count twice
    assert not exp.satisfied(LWS)
    assert exp.pending(LWS) == {"Pod": {"ns/sample-1"}}
    exp.deletion_observed(LWS, "Service", "ns/sample-1")  # another kind does not tick off
    assert not exp.satisfied(LWS)
    exp.deletion_observed(LWS, "Pod", "ns/sample-1")
    assert exp.satisfied(LWS)
    assert len(exp) == 0


def test_kinds_are_kept_apart() -> None:
    exp, _ = new()
    exp.expect_deletions(LWS, "Pod", ["uid-1"])
    exp.expect_deletions(LWS, "Gate", ["uid-1"])
    exp.deletion_observed(LWS, "Pod", "uid-1")
    assert not exp.satisfied(LWS)
    assert exp.pending(LWS) == {"Gate": {"uid-1"}}
    exp.deletion_observed(LWS, "Gate", "uid-1")
    assert exp.satisfied(LWS)


def test_deletions_by_uid() -> None:
    exp, _ = new()
    exp.expect_deletions(LWS, "Pod", ["uid-1", "uid-2"])
    exp.deletion_observed(LWS, "Pod", "uid-3")
    exp.deletion_observed(LWS, "Pod", "uid-1")
    assert not exp.satisfied(LWS)
    exp.deletion_observed(LWS, "Pod", "uid-2")
    assert exp.satisfied(LWS)


def test_ttl_expires_expectations_and_new_ones_restart_it() -> None:
    exp, clock = new()
    exp.expect_deletions(LWS, "Pod", ["ns/a"])
    clock.advance(EXPECTATIONS_TIMEOUT - 1)
    exp.expect_deletions(LWS, "Pod", ["ns/b"])  # keeps ns/a, restarts the clock
    clock.advance(2)
    assert not exp.satisfied(LWS)
    assert exp.pending(LWS) == {"Pod": {"ns/a", "ns/b"}}
    clock.advance(EXPECTATIONS_TIMEOUT)
    assert exp.satisfied(LWS)
    # Expired leftovers are dropped when new expectations are set.
    exp.expect_deletions(LWS, "Pod", ["ns/c"])
    assert exp.pending(LWS) == {"Pod": {"ns/c"}}


def test_keys_are_independent_and_delete_forgets() -> None:
    exp, _ = new()
    exp.expect_deletions("ns/one", "Pod", ["ns/one-0"])
    exp.expect_deletions("ns/two", "Pod", ["ns/two-0"])
    exp.deletion_observed("ns/one", "Pod", "ns/one-0")
    assert exp.satisfied("ns/one")
    assert not exp.satisfied("ns/two")
    exp.delete("ns/two")
    assert exp.satisfied("ns/two")


@settings(max_examples=300)
@given(
    expected=st.sets(st.text("abc", min_size=1, max_size=3), max_size=8),
    events=st.lists(st.text("abcd", min_size=1, max_size=3), max_size=30),
)
def test_satisfied_exactly_when_all_expected_names_are_observed(
    expected: set[str], events: list[str]
) -> None:
    exp, _ = new()
    exp.expect_deletions(LWS, "Pod", expected)
    seen: set[str] = set()
    for name in events:
        exp.deletion_observed(LWS, "Pod", name)
        seen.add(name)
        assert exp.satisfied(LWS) == expected.issubset(seen)
