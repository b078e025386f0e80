"""The work queue's guarantees, and the controller's worker loop built on them.

Time is a FakeClock: delayed keys become ready inside ``clock.advance``, so no
test waits for wall-clock time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.runtime.controller import Controller, Result
from leaderworkerset.runtime.queue import (
    BucketRateLimiter,
    ExponentialRateLimiter,
    MaxOfRateLimiter,
    WorkQueue,
)
from tests.toolkit.clock import FakeClock
from tests.toolkit.waiting import eventually

KEYS = st.sampled_from(["ns/a", "ns/b", "ns/c", "ns/d"])
BASE, CAP = 0.01, 1.0
_names = itertools.count()


def new_queue(clock: FakeClock, **kwargs: Any) -> WorkQueue:
    kwargs.setdefault("rate_limiter", ExponentialRateLimiter(BASE, CAP))
    return WorkQueue(f"test-queue-{next(_names)}", clock=clock, **kwargs)


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


# -- the queue as a state machine, against a model -------------------------------------------------

OPS = st.one_of(
    st.tuples(st.just("add"), KEYS),
    st.tuples(st.just("add_after"), KEYS, st.floats(0.001, 3.0)),
    st.tuples(st.just("rate_limited"), KEYS),
    st.tuples(st.just("forget"), KEYS),
    st.tuples(st.just("take"), st.integers(0, 2)),
    st.tuples(st.just("finish"), st.integers(0, 2)),
    st.tuples(st.just("advance"), st.floats(0.0, 2.0)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(OPS, max_size=80))
def test_queue_matches_model(ops: list[tuple[Any, ...]]) -> None:
    """Exclusive hand-out, coalescing, no early delivery, and no lost key.

    ``owed`` holds keys added (or whose delay ran out) and not handed out since.
    A key is handed out only if owed (so never early and never twice for one
    add), never while another worker holds it, and by the end every owed key has
    been handed out again.
    """

    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock)
        owed: set[str] = set()
        delayed: dict[str, float] = {}
        failures: dict[str, int] = {}
        held: dict[int, str] = {}

        def promote() -> None:
            for key, ready_at in list(delayed.items()):
                if ready_at <= clock.now():
                    owed.add(key)
                    del delayed[key]

        def add_after(key: str, delay: float) -> None:
            ready_at = clock.now() + delay
            delayed[key] = min(ready_at, delayed.get(key, ready_at))

        async def take(worker: int) -> None:
            if worker in held or len(q) == 0:
                return
            key = await q.get()
            assert key is not None
            assert key in owed, f"{key} handed out without an add since its last hand-out"
            assert key not in held.values(), f"{key} handed to two workers at once"
            owed.discard(key)
            held[worker] = key

        def check() -> None:
            busy = set(held.values())
            assert set(q._queue) == owed - busy
            assert len(q) == len(owed - busy)

        for op in ops:
            match op:
                case ("add", key):
                    q.add(key)
                    owed.add(key)
                case ("add_after", key, delay):
                    q.add_after(key, delay)
                    add_after(key, delay)
                case ("rate_limited", key):
                    n = failures.get(key, 0)
                    failures[key] = n + 1
                    q.add_rate_limited(key)
                    add_after(key, min(CAP, BASE * 2**n))
                case ("forget", key):
                    q.forget(key)
                    failures.pop(key, None)
                case ("take", worker):
                    await take(worker)
                case ("finish", worker):
                    if worker in held:
                        q.done(held.pop(worker))
                case ("advance", seconds):
                    clock.advance(seconds)
                    promote()
            check()

        for worker in list(held):
            q.done(held.pop(worker))
        clock.advance(CAP * 10)
        promote()
        check()
        while len(q):
            await take(0)
            q.done(held.pop(0))
        assert owed == set()
        assert q.waiting == 0

    run(scenario)


# -- real concurrent workers -----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    workers=st.integers(1, 6),
    bursts=st.lists(st.lists(KEYS, max_size=12), min_size=1, max_size=8),
    work=st.dictionaries(KEYS, st.integers(0, 5)),
)
def test_concurrent_workers_never_share_a_key_and_process_every_add(
    workers: int, bursts: list[list[str]], work: dict[str, int]
) -> None:
    async def scenario() -> None:
        q = new_queue(FakeClock())
        seq = itertools.count()
        last_add: dict[str, int] = {}
        last_start: dict[str, int] = {}
        active: set[str] = set()
        handed_out = 0

        async def worker() -> None:
            nonlocal handed_out
            while (key := await q.get()) is not None:
                assert key not in active, f"{key} processed by two workers at once"
                active.add(key)
                handed_out += 1
                last_start[key] = next(seq)
                # Yield a few times so other workers and the adder interleave with this one.
                for _ in range(work.get(key, 0)):
                    await asyncio.sleep(0)
                active.discard(key)
                q.done(key)

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        adds = 0
        for burst in bursts:
            for key in burst:
                q.add(key)
                last_add[key] = next(seq)
                adds += 1
            await asyncio.sleep(0)
        await eventually(lambda: len(q) == 0 and not q.processing, "the queue to drain")
        q.shutdown()
        await asyncio.gather(*tasks)
        for key, added in last_add.items():
            assert last_start.get(key, -1) > added, f"{key} not processed after its last add"
        assert handed_out <= adds

    run(scenario)


def test_duplicates_coalesce() -> None:
    async def scenario() -> None:
        q = new_queue(FakeClock())
        for _ in range(10):
            q.add("ns/a")
        q.add("ns/b")
        assert len(q) == 2
        assert await q.get() == "ns/a"
        # Re-added while held: queued again only once the holder is done.
        for _ in range(5):
            q.add("ns/a")
        assert len(q) == 1
        assert await q.get() == "ns/b"
        assert len(q) == 0
        q.done("ns/a")
        assert len(q) == 1
        assert await q.get() == "ns/a"

    run(scenario)


# -- backoff ---------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["when", "forget"]), KEYS), max_size=60))
def test_exponential_backoff_per_key_resets_on_forget(ops: list[tuple[str, str]]) -> None:
    limiter = ExponentialRateLimiter(0.005, 1000.0)
    failures: dict[str, int] = {}
    for op, key in ops:
        if op == "when":
            n = failures.get(key, 0)
            assert limiter.when(key) == min(1000.0, 0.005 * 2**n)
            failures[key] = n + 1
        else:
            limiter.forget(key)
            failures.pop(key, None)
        assert limiter.num_requeues(key) == failures.get(key, 0)


def test_backoff_is_capped_without_overflow() -> None:
    limiter = ExponentialRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k") for _ in range(2000)]
    assert delays[:3] == [0.005, 0.01, 0.02]
    assert delays[-1] == 1000.0
    assert delays == sorted(delays)


@settings(max_examples=50, deadline=None)
@given(failures=st.integers(0, 12))
def test_rate_limited_key_returns_exactly_after_its_backoff(failures: int) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock, rate_limiter=ExponentialRateLimiter(0.005, 1000.0))
        for _ in range(failures):
            q.rate_limiter.when("ns/a")
        q.add_rate_limited("ns/a")
        delay = 0.005 * 2**failures
        clock.advance(delay * 0.999)
        assert len(q) == 0 and q.waiting == 1
        clock.advance(delay * 0.002)
        assert len(q) == 1
        q.forget("ns/a")
        assert q.num_requeues("ns/a") == 0

    run(scenario)


def test_bucket_limiter_spaces_a_burst_of_failures() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10, burst=3, clock=clock)
    assert [bucket.when(str(i)) for i in range(3)] == [0, 0, 0]
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    clock.advance(10)
    assert bucket.when("z") == 0
    combined = MaxOfRateLimiter(ExponentialRateLimiter(1.0, 100.0), bucket)
    assert combined.when("k") == 1.0
    assert combined.num_requeues("k") == 1


# -- add_after -------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    delays=st.lists(st.tuples(KEYS, st.floats(0.001, 10.0)), min_size=1, max_size=20),
    steps=st.lists(st.floats(0.01, 3.0), min_size=1, max_size=20),
)
def test_add_after_delivers_not_before_its_delay(
    delays: list[tuple[str, float]], steps: list[float]
) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock)
        ready_at: dict[str, float] = {}
        for key, delay in delays:
            q.add_after(key, delay)
            # The earliest request wins, as in client-go.
            ready_at[key] = min(ready_at.get(key, float("inf")), clock.now() + delay)
        for step in [*steps, 20.0]:
            clock.advance(step)
            while len(q):
                ready = await q.get()
                assert ready is not None
                assert ready_at[ready] <= clock.now()
                del ready_at[ready]
                q.done(ready)
            assert all(at > clock.now() for at in ready_at.values())
        assert ready_at == {}

    run(scenario)


def test_add_after_without_delay_adds_at_once() -> None:
    async def scenario() -> None:
        q = new_queue(FakeClock())
        q.add_after("ns/a", 0)
        q.add_after("ns/b", -1)
        assert len(q) == 2 and q.waiting == 0

    run(scenario)


def test_add_after_with_real_clock_fires() -> None:
    async def scenario() -> None:
        q = WorkQueue(f"test-queue-{next(_names)}")
        q.add_after("ns/a", 0.01)
        assert len(q) == 0
        assert await asyncio.wait_for(q.get(), 5) == "ns/a"

    run(scenario)


# -- hand-out and shutdown -------------------------------------------------------------------------


def test_one_add_wakes_exactly_one_waiting_worker() -> None:
    async def scenario() -> None:
        q = new_queue(FakeClock())
        getters = [asyncio.create_task(q.get()) for _ in range(3)]
        await eventually(lambda: len(q._getters) == 3, "getters to wait")
        q.add("ns/a")
        done, pending = await asyncio.wait(getters, timeout=5, return_when="FIRST_COMPLETED")
        assert [t.result() for t in done] == ["ns/a"]
        q.shutdown()
        assert [await t for t in pending] == [None, None]

    run(scenario)


def test_a_cancelled_woken_getter_passes_the_key_on() -> None:
    async def scenario() -> None:
        q = new_queue(FakeClock())
        first = asyncio.create_task(q.get())
        second = asyncio.create_task(q.get())
        await eventually(lambda: len(q._getters) == 2, "getters to wait")
        q.add("ns/a")  # wakes `first`, which is cancelled before it runs
        first.cancel()
        assert await asyncio.wait_for(second, 5) == "ns/a"

    run(scenario)


def test_shutdown_stops_hand_out_and_accepts_nothing_new() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock)
        q.add("ns/a")
        q.add("ns/b")
        q.add_after("ns/c", 1.0)
        assert await q.get() == "ns/a"
        q.add("ns/a")  # changed again while in flight
        q.shutdown()
        assert await q.get() is None  # ns/b is never handed out
        q.add("ns/d")
        clock.advance(5)
        assert len(q) == 1 and q.waiting == 1  # nothing new accepted, timers disarmed
        q.done("ns/a")
        assert len(q) == 1, "a key changed in flight is not queued again once shut down"

    run(scenario)


def test_queue_metrics() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock)
        labels = {"name": q.name, "controller": q.name}
        registry = q.metrics.registry
        q.add("ns/a")
        q.add("ns/a")
        q.add("ns/b")
        assert registry.get_sample_value("workqueue_adds_total", labels) == 2
        assert registry.get_sample_value("workqueue_depth", labels) == 2
        await q.get()
        clock.advance(3)
        assert registry.get_sample_value("workqueue_longest_running_processor_seconds", labels) == 3
        assert registry.get_sample_value("workqueue_unfinished_work_seconds", labels) == 3
        q.done("ns/a")
        q.add_rate_limited("ns/a")
        assert registry.get_sample_value("workqueue_retries_total", labels) == 1
        assert registry.get_sample_value("workqueue_depth", labels) == 1
        assert registry.get_sample_value("workqueue_work_duration_seconds_count", labels) == 1
        assert registry.get_sample_value("workqueue_queue_duration_seconds_count", labels) == 1

    run(scenario)


# -- the controller's workers on the queue ---------------------------------------------------------


def reconcile_total(controller: Controller, result: str) -> float:
    value = controller.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": controller.name, "result": result}
    )
    return value or 0.0


def test_controller_retries_errors_with_backoff_and_honours_requeue_after() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        calls: list[str] = []
        called = asyncio.Event()
        outcomes: Iterator[Exception | Result] = iter(
            [RuntimeError("boom"), RuntimeError("boom"), Result(requeue_after=30)]
        )

        async def reconcile(key: str) -> Result | None:
            calls.append(key)
            called.set()
            outcome = next(outcomes, None)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        name = f"test-ctrl-{next(_names)}"
        ctrl = Controller(
            name, reconcile, workers=2, clock=clock, rate_limiter=ExponentialRateLimiter(1.0, 60)
        )

        async def next_call() -> None:
            await asyncio.wait_for(called.wait(), 5)
            called.clear()
            await eventually(lambda: not ctrl.queue.processing, "the reconcile to finish")

        await ctrl.start()
        ctrl.enqueue("ns/a")
        await next_call()  # fails: back in 1 s
        clock.advance(0.99)
        assert len(ctrl.queue) == 0 and ctrl.queue.waiting == 1
        clock.advance(0.01)
        await next_call()  # fails again: back in 2 s
        clock.advance(1.99)
        assert ctrl.queue.waiting == 1
        clock.advance(0.01)
        await next_call()  # asks to come back in 30 s; backoff forgotten
        assert ctrl.queue.num_requeues("ns/a") == 0
        clock.advance(29.9)
        assert ctrl.queue.waiting == 1 and len(ctrl.queue) == 0
        clock.advance(0.1)
        await next_call()  # succeeds
        assert calls == ["ns/a"] * 4
        assert reconcile_total(ctrl, "error") == 2
        assert reconcile_total(ctrl, "requeue_after") == 1
        assert reconcile_total(ctrl, "success") == 1
        errors = ctrl.metrics.registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": name}
        )
        assert errors == 2
        await ctrl.stop(deadline=5)

    run(scenario)


def test_controller_stop_lets_in_flight_finish_then_cancels_at_deadline() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        started: list[str] = []
        finished: list[str] = []
        cancelled: list[str] = []

        async def reconcile(key: str) -> Result:
            started.append(key)
            try:
                if key == "ns/slow":
                    await asyncio.Event().wait()
                await release.wait()
            except asyncio.CancelledError:
                cancelled.append(key)
                raise
            finished.append(key)
            return Result()

        ctrl = Controller(f"test-ctrl-{next(_names)}", reconcile, workers=2, clock=FakeClock())
        await ctrl.start()
        ctrl.enqueue("ns/quick")
        ctrl.enqueue("ns/slow")
        await eventually(lambda: len(started) == 2, "both reconciles to start")
        ctrl.enqueue("ns/never")
        stopping = asyncio.create_task(ctrl.stop(deadline=1.0))
        await eventually(lambda: ctrl.queue._shutting_down, "the queue to shut down")
        release.set()
        await asyncio.wait_for(stopping, 5)
        assert finished == ["ns/quick"]
        assert cancelled == ["ns/slow"]
        assert "ns/never" not in started
        assert not ctrl.running

    run(scenario)


def test_controller_requeue_uses_rate_limit_and_max_concurrency_gauge() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        runs = 0
        ran = asyncio.Event()

        async def reconcile(key: str) -> Result:
            nonlocal runs
            runs += 1
            ran.set()
            return Result(requeue=runs == 1)

        name = f"test-ctrl-{next(_names)}"
        ctrl = Controller(
            name, reconcile, workers=3, clock=clock, rate_limiter=ExponentialRateLimiter(5.0, 60)
        )
        await ctrl.start()
        gauge = ctrl.metrics.registry.get_sample_value(
            "controller_runtime_max_concurrent_reconciles", {"controller": name}
        )
        assert gauge == 3
        ctrl.enqueue("ns/a")
        await asyncio.wait_for(ran.wait(), 5)
        await eventually(lambda: ctrl.queue.waiting == 1, "the requeue")
        ran.clear()
        clock.advance(5)
        await asyncio.wait_for(ran.wait(), 5)
        assert runs == 2
        assert reconcile_total(ctrl, "requeue") == 1
        await ctrl.stop()

    run(scenario)


def test_add_paced_passes_a_lone_event_and_holds_a_burst_to_one_pass_per_interval() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock)
        q.add_paced("ns/a", 1.0)
        assert len(q) == 1  # never handed out: no wait
        key = await q.get()
        assert key == "ns/a"
        # Events while the pass runs and right after it wait for the interval.
        q.add_paced("ns/a", 1.0)
        q.done("ns/a")
        clock.advance(0.3)
        q.add_paced("ns/a", 1.0)
        q.add_paced("ns/a", 1.0)
        assert len(q) == 0 and q.waiting == 1
        clock.advance(0.6)
        assert len(q) == 0
        clock.advance(0.1)
        assert len(q) == 1
        assert await q.get() == "ns/a"
        q.done("ns/a")
        assert len(q) == 0 and q.waiting == 0  # the burst made one pass, not three
        # Long after the last pass, an event goes through at once; other keys are not held.
        clock.advance(5.0)
        q.add_paced("ns/a", 1.0)
        q.add_paced("ns/b", 1.0)
        assert len(q) == 2

    run(scenario)


def test_add_paced_does_not_delay_a_key_already_queued() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        q = new_queue(clock)
        q.add("ns/a")
        q.add_paced("ns/a", 1.0)
        assert len(q) == 1 and q.waiting == 0

    run(scenario)
