"""Segment rollover, preallocation, closing, and the on-disk layout they leave."""

from __future__ import annotations

import os
from pathlib import Path

from nyala.wal import Log, WalOptions
from nyala.wal.format import FOOTER_SIZE, segment_name
from nyala.wal.scan import read_segment_file, scan_segment

from .helpers import SMALL, check_entries, file_size, fill, make_entries


def test_rollover_keeps_segments_near_their_size(small_log: Log, log_dir: Path) -> None:
    fill(small_log, 1, 1000, per_append=3)
    segments = small_log.segments()
    assert len(segments) > 5
    assert [s.seqno for s in segments] == list(range(1, len(segments) + 1))
    for closed in segments[:-1]:
        assert closed.closed
        assert closed.size_bytes <= SMALL.segment_size_bytes
        assert file_size(Path(closed.path)) == closed.size_bytes  # preallocated rest was cut
        assert scan_segment(closed.path, read_segment_file(closed.path), False).footer is not None
    mins = [s.min_index for s in segments]
    assert mins == sorted(mins)
    assert segments[0].min_index == 1
    assert segments[-1].max_index == 1000


def test_active_segment_is_preallocated_and_the_next_prepared(small_log: Log, log_dir: Path) -> None:
    fill(small_log, 1, 300)
    active = small_log.segments()[-1]
    assert not active.closed
    assert file_size(Path(active.path)) == SMALL.segment_size_bytes
    pending = small_log._preallocator._pending  # the background preparation of the next segment
    assert pending is not None
    prepared = pending[1].result(timeout=10)
    assert prepared.seqno == active.seqno + 1
    assert file_size(Path(prepared.tmp_path)) == SMALL.segment_size_bytes
    assert not (log_dir / segment_name(active.seqno + 1)).exists()  # named only when swapped in


def test_close_truncates_to_the_written_size_and_cleans_up(log_dir: Path) -> None:
    log = Log.open(log_dir, "tablet-1", SMALL)
    fill(log, 1, 50)
    active = log.segments()[-1]
    log.close()
    data = read_segment_file(active.path)
    scan = scan_segment(active.path, data, True)
    assert scan.footer is not None
    assert (scan.footer.num_entries, scan.footer.min_index, scan.footer.max_index) == (50, 1, 50)
    assert len(data) == scan.valid_end + FOOTER_SIZE < SMALL.segment_size_bytes
    assert not list(log_dir.glob("*.tmp"))


def test_without_preallocation(log_dir: Path) -> None:
    options = WalOptions(segment_size_bytes=16 * 1024, preallocate_segments=False)
    with Log.open(log_dir, "tablet-1", options) as log:
        fill(log, 1, 400)
        active = log.segments()[-1]
        assert file_size(Path(active.path)) == active.size_bytes  # grows as written
        assert not list(log_dir.glob("*.tmp"))
    with Log.open(log_dir, "tablet-1", options) as log:
        check_entries(list(log.entries(1)), 1, 400)


def test_an_entry_larger_than_a_segment_gets_its_own(small_log: Log, log_dir: Path) -> None:
    fill(small_log, 1, 5)
    big = make_entries(6, 1, size=3 * SMALL.segment_size_bytes)
    small_log.append_sync(big)
    fill(small_log, 7, 5)
    segments = small_log.segments()
    holder = next(s for s in segments if s.min_index <= 6 <= s.max_index)
    assert (holder.min_index, holder.max_index) == (6, 6)
    assert holder.size_bytes > SMALL.segment_size_bytes
    small_log.close()
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        entries = list(log.entries(1))
        check_entries(entries, 1, 11)
        assert entries[5].payload == big[0].payload


def test_groups_are_capped_at_half_a_segment(log_dir: Path) -> None:
    options = WalOptions(segment_size_bytes=16 * 1024, fsync_enabled=False)
    with Log.open(log_dir, "tablet-1", options) as log:
        futures = [log.append(make_entries(i, 1, size=1000)) for i in range(1, 201)]
        futures[-1].result(timeout=30)
        for closed in log.segments()[:-1]:
            # at least two groups fit, each below 8 KiB
            assert closed.size_bytes <= options.segment_size_bytes
            assert closed.num_entries >= 2


def test_files_in_the_directory(log_dir: Path) -> None:
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        fill(log, 1, 400)
        names = set(os.listdir(log_dir))
        count = len(log.segments())
    segments = {segment_name(n) for n in range(1, count + 1)}
    assert segments <= names
    assert names - segments <= {segment_name(count + 1) + ".tmp"}  # at most the prepared next one
