"""Appending: durability contract, ordering, bad input, reopening."""

from __future__ import annotations

import errno
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from nyala.errors import IllegalState, InvalidArgument, IOFailure
from nyala.wal import Log, LogEntry, WalOptions

from .helpers import SMALL, check_entries, fill, make_entries, stalled_appender


def test_append_returns_futures_completing_with_the_last_index(small_log: Log) -> None:
    future = small_log.append(make_entries(1, 3))
    assert future.result(timeout=10) == 3
    assert small_log.append_sync(make_entries(4, 1)) == 4
    assert (small_log.first_index, small_log.last_index, small_log.next_index) == (1, 4, 5)
    check_entries(list(small_log.entries(1)), 1, 4)


def test_reserved_append_cannot_be_cancelled(small_log: Log) -> None:
    future = small_log.append(make_entries(1, 1))
    assert future.cancel() is False
    assert future.result(timeout=10) == 1


def test_reopen_after_clean_close_keeps_everything(log_dir: Path) -> None:
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        fill(log, 1, 500, per_append=5, term=3)
        before = [s.seqno for s in log.segments()]
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        assert (log.first_index, log.last_index, log.next_index) == (1, 500, 501)
        assert log.term_at(250) == 3
        check_entries(list(log.entries(1)), 1, 500)
        # The reopened log starts a fresh active segment after the recovered ones.
        assert [s.seqno for s in log.segments()][:-1] == before
        fill(log, 501, 10, term=3)
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        check_entries(list(log.entries(1)), 1, 510)


def test_empty_log_round_trip(log_dir: Path) -> None:
    with Log.open(log_dir, "tablet-1") as log:
        assert (log.first_index, log.last_index, log.next_index) == (1, 0, 1)
        assert list(log.entries(1)) == []
    assert list(log_dir.iterdir()) == []  # an unused active segment is removed on close
    with Log.open(log_dir, "tablet-1") as log:
        assert log.last_index == 0


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "at least one entry"),
        ([LogEntry(1, 0, 0, b"")], "index must be an integer >= 1"),
        ([LogEntry(1, -3, 0, b"")], "index must be an integer >= 1"),
        ([LogEntry(1, 1, 0, b""), LogEntry(1, 3, 0, b"")], "consecutive"),
        ([LogEntry(-1, 1, 0, b"")], "term must be an integer"),
        ([LogEntry(2, 1, 0, b""), LogEntry(1, 2, 0, b"")], "term 1 is below the previous 2"),
        ([LogEntry(1, 1, 70000, b"")], "type must be an integer in [0, 65535]"),
        ([LogEntry(1, 1, -1, b"")], "type must be an integer in [0, 65535]"),
        ([LogEntry(1, 1, 0, "text")], "payload must be bytes"),  # type: ignore[arg-type]
        ([(1, 1, 0, b"")], "expected a LogEntry"),
    ],
)
def test_bad_entries_are_refused_and_change_nothing(small_log: Log, entries: list[LogEntry], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("[", r"\[").replace("]", r"\]")):
        small_log.append(entries)
    assert small_log.next_index == 1
    assert small_log.append_sync(make_entries(1, 1)) == 1


def test_appends_must_continue_the_log(small_log: Log) -> None:
    fill(small_log, 1, 5)
    for first in (5, 7, 1):
        with pytest.raises(InvalidArgument, match="must start at index 6"):
            small_log.append(make_entries(first, 1))
    assert small_log.append_sync(make_entries(6, 1)) == 6


def test_terms_may_not_go_down_across_appends(small_log: Log) -> None:
    small_log.append_sync(make_entries(1, 2, term=5))
    with pytest.raises(InvalidArgument, match="term 4 is below the log's last term 5"):
        small_log.append(make_entries(3, 1, term=4))
    assert small_log.append_sync(make_entries(3, 1, term=6)) == 3


def test_oversized_append_is_refused(log_dir: Path) -> None:
    with Log.open(log_dir, "t", WalOptions(max_append_bytes=1000)) as log:
        with pytest.raises(InvalidArgument, match="exceeds max_append_bytes=1000"):
            log.append(make_entries(1, 1, size=2000))
        assert log.append_sync(make_entries(1, 1, size=500)) == 1


def test_closed_log_refuses_appends(log_dir: Path) -> None:
    log = Log.open(log_dir, "tablet-1", SMALL)
    log.close()
    log.close()  # idempotent
    with pytest.raises(IllegalState, match="closed"):
        log.append(make_entries(1, 1))
    with pytest.raises(IllegalState, match="closed"):
        log.truncate_after(0)
    with pytest.raises(IllegalState, match="closed"):
        log.gc()


def test_a_directory_is_opened_by_one_log_at_a_time(small_log: Log, log_dir: Path) -> None:
    with pytest.raises(IllegalState, match="open elsewhere"):
        Log.open(log_dir, "tablet-1")


def test_bad_open_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="tablet id"):
        Log.open(tmp_path / "a", "")
    with pytest.raises(InvalidArgument, match="tablet id"):
        Log.open(tmp_path / "a", "x" * 2000)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(InvalidArgument, match="not a directory"):
        Log.open(tmp_path / "file", "t")
    with pytest.raises(InvalidArgument, match="segment_size_bytes"):
        WalOptions(segment_size_bytes=10)
    with pytest.raises(InvalidArgument, match="min_segments_to_retain"):
        WalOptions(min_segments_to_retain=0)
    with pytest.raises(InvalidArgument, match="max_segments_to_retain"):
        WalOptions(min_segments_to_retain=5, max_segments_to_retain=2)


@pytest.mark.timeout(60)
def test_completion_order_equals_reservation_order_with_many_writers(small_log: Log) -> None:
    """64 threads reserve while completions are held back; every future completes in queue order."""
    reserved: list[int] = []
    completed: list[int] = []
    reserve_lock = threading.Lock()

    def on_done(future: Future[int]) -> None:
        completed.append(future.result())  # runs on the appender thread, in completion order

    def writer() -> None:
        for _ in range(40):
            with reserve_lock:
                index = small_log.next_index
                future = small_log.append(make_entries(index, 1 + index % 3, size=50 + index % 200))
                reserved.append(future_last(index))
            future.add_done_callback(on_done)

    def future_last(index: int) -> int:
        return index + index % 3

    # The stalled appender completes nothing, so every callback is attached to a pending future.
    with stalled_appender(small_log):
        threads = [threading.Thread(target=writer) for _ in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert completed == []
    last = reserved[-1]
    small_log.append_sync(make_entries(last + 1, 1))
    assert completed[: len(reserved)] == reserved
    assert reserved == sorted(reserved)
    check_entries(list(small_log.entries(1, last)), 1, last)
    groups, requests = small_log.group_stats
    assert requests == len(reserved) + 1
    assert groups < requests


@pytest.mark.timeout(60)
def test_a_blocking_caller_commits_its_own_group_then_hands_over(small_log: Log) -> None:
    completed: list[tuple[int, str]] = []

    def on_done(future: Future[int]) -> None:
        completed.append((future.result(), threading.current_thread().name))

    def blocking_writer() -> None:
        assert small_log.append_sync(make_entries(1, 2)) == 2

    with stalled_appender(small_log) as holding:
        leader = threading.Thread(target=blocking_writer, name="leader")
        leader.start()
        assert holding.wait(30)  # the leader is committing its group on its own thread
        for index in range(3, 13):
            small_log.append(make_entries(index, 1)).add_done_callback(on_done)
    leader.join(30)
    small_log.append_sync(make_entries(13, 1))
    assert [index for index, _ in completed] == list(range(3, 13))
    assert {name for _, name in completed} == {"wal-append-tablet-1"}  # handed to the appender thread
    check_entries(list(small_log.entries(1)), 1, 13)


@pytest.mark.timeout(60)
def test_blocking_and_future_appends_from_many_threads(small_log: Log) -> None:
    reserve = threading.Lock()
    futures: list[Future[int]] = []

    def worker(number: int) -> None:
        for step in range(50):
            with reserve:
                first = small_log.next_index
                if (number + step) % 4 == 0:
                    assert small_log.append_sync(make_entries(first, 2)) == first + 1
                else:
                    futures.append(small_log.append(make_entries(first, 1)))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = [f.result(timeout=30) for f in futures]
    assert results == sorted(results)
    last = small_log.next_index - 1
    small_log.truncate_after_sync(last)
    check_entries(list(small_log.entries(1)), 1, last)


def test_a_failed_write_fails_the_log_until_reopened(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(log_dir, "tablet-1", SMALL)
    fill(log, 1, 5)

    def broken_write(header: bytes, payload: bytes) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(log._active, "write", broken_write)
    failed = log.append(make_entries(6, 1))
    with pytest.raises(IOFailure, match="write or sync failed: Input/output error"):
        failed.result(timeout=10)
    with pytest.raises(IOFailure, match="failed earlier and must be reopened"):
        log.append(make_entries(7, 1))
    log.close()
    with Log.open(log_dir, "tablet-1", SMALL) as reopened:
        check_entries(list(reopened.entries(1)), 1, 5)
        assert reopened.append_sync(make_entries(6, 1)) == 6
