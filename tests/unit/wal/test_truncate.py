"""truncate_after: durable, ordered with appends, seen by readers, recovery and the dump."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nyala.errors import InvalidArgument
from nyala.wal import Log, LogEntry, WalOptions
from nyala.wal.dump import inspect_log

from .helpers import SMALL, check_entries, crash_copy, fill, make_entries, stalled_appender


def terms(log: Log, first: int = 1) -> list[tuple[int, int]]:
    return [(e.index, e.term) for e in log.entries(first)]


def test_truncate_then_append_replaces_the_tail(small_log: Log) -> None:
    fill(small_log, 1, 10, term=1)
    assert small_log.truncate_after_sync(5) == 5
    assert (small_log.last_index, small_log.next_index) == (5, 6)
    small_log.append_sync(make_entries(6, 3, term=2))
    assert terms(small_log) == [(i, 1) for i in range(1, 6)] + [(i, 2) for i in range(6, 9)]
    assert small_log.term_at(5) == 1
    assert small_log.term_at(6) == 2


def test_truncation_survives_a_crash_and_a_clean_reopen(small_log: Log, log_dir: Path, tmp_path: Path) -> None:
    fill(small_log, 1, 10, term=1)
    small_log.truncate_after_sync(4)
    crashed = crash_copy(log_dir, tmp_path / "crashed")
    with Log.open(crashed, "tablet-1", SMALL) as log:
        assert (log.last_index, log.next_index) == (4, 5)
        log.append_sync(make_entries(5, 2, term=3))
    with Log.open(crashed, "tablet-1", SMALL) as log:
        assert terms(log) == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 3), (6, 3)]


def test_truncate_and_appends_in_one_group(small_log: Log, log_dir: Path) -> None:
    """Queued together they form one batch; a marker inside it cuts only what precedes it."""
    with stalled_appender(small_log):  # 1..5 is held; the three requests after it form one group
        small_log.append(make_entries(1, 5, term=1))
        small_log.truncate_after(3)
        small_log.append(make_entries(4, 4, term=2))
        last = small_log.truncate_after(6)
    assert last.result(timeout=10) == 6
    expected = [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)]
    assert terms(small_log) == expected
    assert terms(small_log, 5) == expected[4:]
    small_log.close()
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        assert terms(log) == expected
    kinds = [r.kind for s in inspect_log(str(log_dir)) for r in s.records]
    assert kinds.count("truncate") == 2


def test_many_appends_and_markers_in_one_group_keep_their_terms(small_log: Log, log_dir: Path) -> None:
    """The index merges consecutive appends of a group; terms and ranges must come out the same."""
    with stalled_appender(small_log) as holding:
        small_log.append(make_entries(1, 1, term=1))
        assert holding.wait(30)  # 1 is held; everything after it forms one group
        small_log.append(make_entries(2, 2, term=1))
        small_log.append([*make_entries(4, 1, term=1), *make_entries(5, 2, term=2)])
        small_log.append(make_entries(7, 1, term=2))
        small_log.truncate_after(5)
        small_log.append(make_entries(6, 1, term=3))
        small_log.append(make_entries(7, 2, term=4))
        last = small_log.append(make_entries(9, 1, term=4))
    assert last.result(timeout=10) == 9
    expected = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (6, 3), (7, 4), (8, 4), (9, 4)]
    assert terms(small_log) == expected
    assert [small_log.term_at(i) for i in range(1, 10)] == [t for _, t in expected]
    assert small_log.group_stats == (2, 8)
    small_log.close()
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        assert terms(log) == expected


def test_truncate_into_an_older_segment(log_dir: Path) -> None:
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        fill(log, 1, 600, term=1)
        assert len(log.segments()) > 3
        log.truncate_after_sync(150)
        fill(log, 151, 50, term=2)
        check_entries(list(log.entries(100, 200)), 100, 200)
        assert log.term_at(150) == 1
        assert log.term_at(151) == 2
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        assert log.last_index == 200
        check_entries(list(log.entries(1)), 1, 200)
        assert [e.term for e in log.entries(149, 152)] == [1, 1, 2, 2]


def test_truncate_everything(small_log: Log, log_dir: Path) -> None:
    fill(small_log, 1, 5)
    small_log.truncate_after_sync(0)
    assert (small_log.first_index, small_log.last_index) == (1, 0)
    assert list(small_log.entries(1)) == []
    small_log.append_sync([LogEntry(7, 1, 0, b"again")])
    small_log.close()
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        assert [(e.index, e.term, e.payload) for e in log.entries(1)] == [(1, 7, b"again")]


def test_truncate_at_the_end_is_allowed_and_changes_nothing(small_log: Log) -> None:
    fill(small_log, 1, 3)
    assert small_log.truncate_after_sync(3) == 3
    check_entries(list(small_log.entries(1)), 1, 3)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_bad_truncation_index(small_log: Log, bad: object) -> None:
    fill(small_log, 1, 3)
    with pytest.raises(InvalidArgument, match="truncation index must be an integer"):
        small_log.truncate_after(bad)  # type: ignore[arg-type]
    assert small_log.next_index == 4


def test_truncation_beyond_the_end_is_refused(small_log: Log) -> None:
    fill(small_log, 1, 3)
    with pytest.raises(InvalidArgument, match=re.escape("cannot truncate after 4: the log holds 1..3")):
        small_log.truncate_after(4)
    assert small_log.next_index == 4


def test_truncation_below_garbage_collected_entries_is_refused(log_dir: Path) -> None:
    with Log.open(log_dir, "tablet-1", WalOptions(segment_size_bytes=8192)) as log:
        fill(log, 1, 300)
        assert log.gc()
        first = log.first_index
        with pytest.raises(InvalidArgument, match=f"cannot truncate after {first - 2}"):
            log.truncate_after(first - 2)
        assert log.truncate_after_sync(first - 1) == first - 1
        assert log.last_index == first - 1
        log.append_sync(make_entries(first, 1, term=2))
    with Log.open(log_dir, "tablet-1") as log:
        assert (log.first_index, log.last_index) == (first, first)
