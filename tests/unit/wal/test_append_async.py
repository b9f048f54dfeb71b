"""The asyncio-native append path: order, bulk completion, durability, errors, close, cancellation."""

from __future__ import annotations

import asyncio
import errno
import random
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from nyala.errors import IllegalState, InvalidArgument, IOFailure
from nyala.rpc.loop import loop_factory
from nyala.testing.wait import wait_for_async
from nyala.wal import Log, LogEntry, WalOptions, loop_bridge
from nyala.wal import appender as appender_module

from .helpers import (
    SMALL,
    check_entries,
    crash_copy,
    durable_marks,
    make_entries,
    noting_idle_waits,
    room_waiters,
    stalled_appender,
)

T = TypeVar("T")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": loop_factory(),
}


def run(main: Coroutine[Any, Any, T], loop: str = "asyncio") -> T:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(main)


class PostCounter:
    """Counts the appender's calls into event loops (one per loop per group is the contract)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.sizes: list[int] = []
        original = loop_bridge.post

        def counting(loop: asyncio.AbstractEventLoop, results: list[Any], failure: BaseException | None) -> None:
            self.calls += 1
            self.sizes.append(len(results))
            original(loop, results, failure)

        monkeypatch.setattr(appender_module, "post", counting)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_many_tasks_complete_in_reservation_order_one_loop_call_per_group(
    small_log: Log, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 tasks append back to back; completions follow reservation order, one loop call per group."""
    posts = PostCounter(monkeypatch)
    reserved: list[int] = []
    completed: list[int] = []
    rng = random.Random(7)

    async def writer() -> None:
        for _ in range(10):
            first = small_log.next_index  # one event loop: reading and appending is atomic
            count = rng.choice((1, 1, 2, 5))
            future = small_log.append_async(make_entries(first, count, size=rng.randint(0, 300)))
            reserved.append(first + count - 1)
            future.add_done_callback(lambda f: completed.append(f.result()))
            assert await future == first + count - 1
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(writer() for _ in range(200)))

    run(main(), loop)
    assert completed == reserved == sorted(reserved)
    last = reserved[-1]
    check_entries(list(small_log.entries(1)), 1, last)
    groups, requests = small_log.group_stats
    assert requests == len(reserved) == 2000
    assert posts.calls == groups < requests
    assert sum(posts.sizes) == requests


@pytest.mark.timeout(60)
def test_a_held_group_is_resolved_by_one_loop_call_in_order(small_log: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    posts = PostCounter(monkeypatch)

    async def main() -> list[tuple[int, int]]:
        # (index acknowledged, last durable index when it was acknowledged), in completion order.
        order: list[tuple[int, int]] = []
        with durable_marks(small_log) as durable:
            with stalled_appender(small_log) as holding:
                first = small_log.append_async(make_entries(1, 1))
                assert await asyncio.to_thread(holding.wait, 30)  # the committer holds the first group
                queued = [small_log.append_async(make_entries(i, 1, size=20)) for i in range(2, 102)]
                for future in queued:
                    future.add_done_callback(lambda f: order.append((f.result(), durable.through)))
            assert await first == 1
            assert await asyncio.gather(*queued) == list(range(2, 102))
        return order

    order = run(main())
    assert [index for index, _ in order] == list(range(2, 102))
    # Nothing is acknowledged before it is durable: checked at every acknowledgement, however
    # early or late it comes.
    assert all(index <= durable for index, durable in order), order
    assert posts.sizes == [1, 100]  # the 100 queued appends: one group, one call into the loop


@pytest.mark.timeout(60)
def test_acknowledged_async_appends_are_on_disk(small_log: Log, log_dir: Path, tmp_path: Path) -> None:
    async def main() -> int:
        futures = [small_log.append_async(make_entries(i, 1, size=700)) for i in range(1, 301)]
        return max(await asyncio.gather(*futures))

    acknowledged = run(main())
    assert acknowledged == 300
    # What a kill -9 right now leaves: every acknowledged entry, across several segments.
    copy = crash_copy(log_dir, tmp_path / "crashed")
    with Log.open(copy, "tablet-1", SMALL) as reopened:
        assert reopened.last_index == 300
        assert len(reopened.segments()) > 3
        check_entries(list(reopened.entries(1)), 1, 300)


@pytest.mark.timeout(60)
def test_truncate_after_async_is_ordered_with_appends(small_log: Log) -> None:
    async def main() -> list[int]:
        futures = [small_log.append_async(make_entries(1, 10))]
        futures.append(small_log.truncate_after_async(4))
        futures.append(small_log.append_async(make_entries(5, 3, term=2)))
        return list(await asyncio.gather(*futures))

    assert run(main()) == [10, 4, 7]
    entries = list(small_log.entries(1))
    check_entries(entries, 1, 7)
    assert [e.term for e in entries] == [1, 1, 1, 1, 2, 2, 2]


@pytest.mark.timeout(60)
def test_bad_input_is_refused_at_once_and_changes_nothing(small_log: Log) -> None:
    async def main() -> None:
        assert await small_log.append_async(make_entries(1, 2)) == 2
        with pytest.raises(InvalidArgument, match="must start at index 3"):
            small_log.append_async(make_entries(5, 1))
        with pytest.raises(InvalidArgument, match="consecutive"):
            small_log.append_async([LogEntry(1, 3, 0, b""), LogEntry(1, 5, 0, b"")])
        with pytest.raises(InvalidArgument, match="cannot truncate after 9"):
            small_log.truncate_after_async(9)
        assert small_log.next_index == 3
        assert small_log.queued_bytes == 0
        assert await small_log.append_async(make_entries(3, 1)) == 3

    run(main())
    check_entries(list(small_log.entries(1)), 1, 3)


def test_async_methods_need_a_running_loop(small_log: Log) -> None:
    with pytest.raises(IllegalState, match="append_async must be called from a running asyncio event loop"):
        small_log.append_async(make_entries(1, 1))
    with pytest.raises(IllegalState, match="truncate_after_async must be called"):
        small_log.truncate_after_async(0)
    assert small_log.next_index == 1


@pytest.mark.timeout(60)
def test_a_failed_write_fails_every_waiter_of_the_group_with_the_same_error(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log.open(log_dir, "tablet-1", SMALL)
    try:

        async def main() -> None:
            assert await log.append_async(make_entries(1, 5)) == 5

            def broken_write(header: bytes, payload: bytes) -> int:
                raise OSError(errno.EIO, "Input/output error")

            with stalled_appender(log) as holding:
                held = log.append_async(make_entries(6, 1))
                assert await asyncio.to_thread(holding.wait, 30)
                monkeypatch.setattr(log._active, "write", broken_write)
                group = [log.append_async(make_entries(i, 1)) for i in range(7, 17)]
            results = await asyncio.gather(held, *group, return_exceptions=True)
            errors = {id(r) for r in results}
            assert len(errors) == 1  # one error object for every waiter
            assert isinstance(results[0], IOFailure)
            assert "write or sync failed: Input/output error" in str(results[0])
            with pytest.raises(IOFailure, match="failed earlier and must be reopened"):
                log.append_async(make_entries(17, 1))
            await log.wait_for_room()  # a failed log has an empty queue: no waiting

        run(main())
    finally:
        log.close()
    with Log.open(log_dir, "tablet-1", SMALL) as reopened:
        check_entries(list(reopened.entries(1)), 1, 5)


@pytest.mark.timeout(60)
def test_close_while_appends_wait_completes_them(log_dir: Path) -> None:
    log = Log.open(log_dir, "tablet-1", SMALL)

    async def main() -> list[int]:
        with durable_marks(log) as durable, noting_idle_waits(log) as close_waits:

            def close() -> int:
                log.close()
                return durable.through  # what was on disk when close returned

            with stalled_appender(log) as holding:
                futures = [log.append_async(make_entries(1, 1))]
                assert await asyncio.to_thread(holding.wait, 30)
                futures += [log.append_async(make_entries(i, 1)) for i in range(2, 51)]
                closing = asyncio.create_task(asyncio.to_thread(close))
                # In order: close blocks waiting for the queued appends, and only then may the
                # committer go on.  A close that returned at once is caught here, not raced.
                await wait_for_async(lambda: close_waits.is_set() or closing.done(), what="close to wait", timeout_s=10)
                assert not closing.done()
            assert await closing == 50  # close waited for every queued append to be durable
        with pytest.raises(IllegalState, match="closed"):
            log.append_async(make_entries(51, 1))
        await log.wait_for_room()
        return list(await asyncio.gather(*futures))

    assert run(main()) == list(range(1, 51))
    with Log.open(log_dir, "tablet-1", SMALL) as reopened:
        check_entries(list(reopened.entries(1)), 1, 50)


@pytest.mark.timeout(60)
def test_cancelling_the_awaiting_task_does_not_withdraw_the_append(small_log: Log) -> None:
    async def main() -> None:
        with stalled_appender(small_log) as holding:
            first = small_log.append_async(make_entries(1, 1))
            assert await asyncio.to_thread(holding.wait, 30)
            cancelled_future = small_log.append_async(make_entries(2, 3))
            task = asyncio.create_task(_await(cancelled_future))
            after = small_log.append_async(make_entries(5, 1))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert cancelled_future.cancelled()
            assert small_log.next_index == 6  # still reserved
        assert await first == 1
        assert await after == 5  # later appends complete normally, after the cancelled one
        assert small_log.last_index == 5

    run(main())
    check_entries(list(small_log.entries(1)), 1, 5)


async def _await(future: asyncio.Future[int]) -> int:
    return await future


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_results_for_a_closed_loop_are_dropped_quietly(small_log: Log, loop: str) -> None:
    async def leave_appends_in_flight() -> list[asyncio.Future[int]]:
        return [small_log.append_async(make_entries(i, 1)) for i in range(1, 21)]

    with stalled_appender(small_log):
        futures = run(leave_appends_in_flight(), loop)  # the loop is closed when run() returns
    assert small_log.append_sync(make_entries(21, 1)) == 21  # the appender survived
    assert not any(f.done() for f in futures)
    check_entries(list(small_log.entries(1)), 1, 21)


@pytest.mark.timeout(60)
def test_wait_for_room_holds_producers_while_the_queue_is_full(log_dir: Path) -> None:
    options = WalOptions(segment_size_bytes=64 * 1024, append_queue_max_bytes=2000)
    with Log.open(log_dir, "t", options) as log:

        async def main() -> None:
            await log.wait_for_room()  # empty queue: at once
            with stalled_appender(log) as holding:
                futures = [log.append_async(make_entries(1, 1, size=100))]
                assert await asyncio.to_thread(holding.wait, 30)
                futures += [log.append_async(make_entries(i, 1, size=100)) for i in range(2, 12)]
                assert log.queued_bytes >= 1000
                await log.wait_for_room()  # 10 x 124 bytes < 2000: room
                futures += [log.append_async(make_entries(i, 1, size=100)) for i in range(12, 22)]
                assert log.queued_bytes >= 2000

                async def wait_and_measure() -> int:
                    await log.wait_for_room()
                    return log.queued_bytes  # what was queued when the producer was let go

                waiting = asyncio.create_task(wait_and_measure())
                # In order: the producer parks until there is room, and only then may the
                # appender take a group (the queue is full until it does).
                await wait_for_async(lambda: room_waiters(log) == 1 or waiting.done(), what="a parked producer")
                assert not waiting.done()
            assert await waiting < 2000
            assert await asyncio.gather(*futures) == list(range(1, 22))

        run(main())
        check_entries(list(log.entries(1)), 1, 21)


def test_bad_append_queue_setting() -> None:
    with pytest.raises(InvalidArgument, match="append_queue_max_bytes must be positive"):
        WalOptions(append_queue_max_bytes=0)


@pytest.mark.timeout(60)
def test_thread_and_asyncio_callers_share_one_log(small_log: Log) -> None:
    """Threads and a loop append at the same time; each caller's appends complete in its order."""
    reserve = threading.Lock()
    start = threading.Barrier(5)
    results: list[list[int]] = []

    def thread_writer() -> None:
        futures: list[Future[int]] = []
        start.wait(30)
        for _ in range(100):
            with reserve:
                futures.append(small_log.append(make_entries(small_log.next_index, 1)))
        results.append([f.result(timeout=30) for f in futures])

    async def loop_writer() -> None:
        futures = []
        await asyncio.to_thread(start.wait, 30)
        for _ in range(100):
            with reserve:  # held only for the synchronous reservation, never across an await
                futures.append(small_log.append_async(make_entries(small_log.next_index, 2)))
            await asyncio.sleep(0)
        results.append(list(await asyncio.gather(*futures)))

    threads = [threading.Thread(target=thread_writer) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        run(loop_writer(), "uvloop")
    finally:
        for t in threads:
            t.join()
    assert len(results) == 5
    assert all(r == sorted(r) and len(r) == 100 for r in results)
    assert len({index for r in results for index in r}) == 500
    last = small_log.next_index - 1
    assert last == 600
    small_log.truncate_after_sync(last)  # a barrier: everything queued before is durable
    check_entries(list(small_log.entries(1)), 1, last)
