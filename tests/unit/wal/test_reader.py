"""Reading entries back: from any index, with a byte budget, while the appender writes."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from nyala.errors import Corruption, InvalidArgument, NotFound
from nyala.wal import Log, WalOptions
from nyala.wal.format import BATCH_HEADER_SIZE
from nyala.wal.scan import read_segment_file, scan_segment

from .helpers import check_entries, fill, flip_byte, make_entries


@pytest.fixture
def filled(small_log: Log) -> Log:
    """700 entries in appends of 1 to 5, across several segments, terms rising every 100."""
    index = 1
    rng = random.Random(7)
    futures = []
    while index <= 700:
        count = min(rng.randint(1, 5), 701 - index)
        futures.append(small_log.append(make_entries(index, count, term=1 + index // 100)))
        index += count
    for future in futures:
        future.result(timeout=30)
    assert len(small_log.segments()) > 4
    return small_log


def test_read_from_every_index(filled: Log) -> None:
    for first in [1, 2, 99, 100, 101, 350, 699, 700]:
        check_entries(list(filled.entries(first)), first, 700)
    assert list(filled.entries(701)) == []


def test_read_a_range(filled: Log) -> None:
    check_entries(list(filled.entries(200, 260)), 200, 260)
    check_entries(list(filled.entries(200, 5000)), 200, 700)
    assert list(filled.entries(200, 100)) == []


def test_read_respects_the_byte_budget(filled: Log) -> None:
    # payloads are 100 bytes: a budget of 250 fits two, and one always comes back.
    check_entries(filled.read(10, 250), 10, 11)
    check_entries(filled.read(10, 0), 10, 10)
    check_entries(filled.read(10, 10**9), 10, 700)
    check_entries(filled.read(10, 10**9, to_index=20), 10, 20)
    assert filled.read(701, 100) == []


def test_terms(filled: Log) -> None:
    recorded = {e.index: e.term for e in filled.entries(1)}  # from the records on disk
    assert [filled.term_at(i) for i in range(1, 701)] == [recorded[i] for i in range(1, 701)]
    assert (filled.term_at(1), filled.term_at(700)) == (1, 7)
    for index in (0, 701, -1):
        with pytest.raises(NotFound, match=f"index {index} is not in the log"):
            filled.term_at(index)


@pytest.mark.parametrize("bad", [0, -5, 1.0, "1"])
def test_bad_start_index(filled: Log, bad: object) -> None:
    with pytest.raises(InvalidArgument, match="from_index must be an integer >= 1"):
        filled.entries(bad)  # type: ignore[arg-type]


def test_start_beyond_the_end(filled: Log) -> None:
    with pytest.raises(InvalidArgument, match="beyond the end of the log"):
        filled.entries(702)
    with pytest.raises(InvalidArgument, match="max_bytes"):
        filled.read(1, -1)


def test_garbage_collected_start(log_dir: Path) -> None:
    with Log.open(log_dir, "t", WalOptions(segment_size_bytes=8192)) as log:
        fill(log, 1, 300)
        log.gc()
        first = log.first_index
        assert first > 1
        with pytest.raises(NotFound, match=f"index {first - 1} was garbage collected; the log starts at {first}"):
            log.entries(first - 1)
        check_entries(list(log.entries(first)), first, 300)


def test_damage_found_while_reading_is_corruption(filled: Log) -> None:
    closed = filled.segments()[1]
    scan = scan_segment(closed.path, read_segment_file(closed.path), False)
    batch = scan.batches[-1]
    flip_byte(Path(closed.path), batch.offset + BATCH_HEADER_SIZE + 40)
    first_entry = closed.min_index
    with pytest.raises(
        Corruption, match=rf"{closed.path}: payload checksum mismatch in the batch at byte offset {batch.offset}"
    ):
        list(filled.entries(first_entry))
    flip_byte(Path(closed.path), batch.offset + 1)
    with pytest.raises(Corruption, match=rf"{closed.path}: damaged batch header at byte offset {batch.offset}"):
        list(filled.entries(first_entry))


@pytest.mark.timeout(60)
def test_readers_see_only_durable_entries_while_the_appender_writes(log_dir: Path) -> None:
    options = WalOptions(segment_size_bytes=32 * 1024, fsync_enabled=False)
    problems: list[str] = []
    done = threading.Event()

    def reader(log: Log, seed: int) -> None:
        rng = random.Random(seed)
        reads = 0
        while not done.is_set() or reads < 5:
            last = log.last_index
            if last == 0:
                continue
            first = rng.randint(1, last)
            entries = log.read(first, rng.choice([500, 5000, 10**6]))
            reads += 1
            try:
                check_entries(entries, first, first + len(entries) - 1)
            except AssertionError as exc:
                problems.append(str(exc))

    with Log.open(log_dir, "t", options) as log:
        readers = [threading.Thread(target=reader, args=(log, seed)) for seed in range(3)]
        for t in readers:
            t.start()
        try:
            futures = [log.append(make_entries(i, 1, size=50 + i % 300)) for i in range(1, 3001)]
            futures[-1].result(timeout=30)
        finally:
            done.set()
            for t in readers:
                t.join()
        assert len(log.segments()) > 5
    assert problems == []
