"""Recovery on open: torn tails are cut, every other damage is Corruption naming file and offset."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest

from nyala.errors import Corruption
from nyala.wal import Log, WalOptions
from nyala.wal.format import BATCH_HEADER_SIZE, FOOTER_SIZE, Footer, encode_footer, encode_segment_header
from nyala.wal.scan import SegmentScan, read_segment_file, scan_segment

from .helpers import check_entries, crash_copy, file_size, flip_byte, make_entries, segment_path

# fsync off only to build the fixtures fast: what a crash leaves is modelled by copying files.
FAST = WalOptions(segment_size_bytes=16 * 1024, fsync_enabled=False)
ENTRIES = 400
RECOVERY_LOGGER = "nyala.wal.recovery"


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A log of 400 single-entry batches over several segments: ``crashed`` (copied while open) and ``clean``."""
    root = tmp_path_factory.mktemp("templates")
    with Log.open(root / "clean", "tablet-1", FAST) as log:
        for index in range(1, ENTRIES + 1):
            log.append_sync(make_entries(index, 1))
        pending = log._preallocator._pending
        assert pending is not None
        pending[1].result(timeout=30)  # the next segment's .tmp file exists: the copy must hold it
        crash_copy(root / "clean", root / "crashed")
    return {"clean": root / "clean", "crashed": root / "crashed"}


def copy_of(templates: dict[str, Path], which: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(templates[which], tmp_path / which))


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("wal-?????????"))


def scan(path: Path, is_last: bool) -> SegmentScan:
    return scan_segment(str(path), read_segment_file(str(path)), is_last)


def reopen_all(directory: Path) -> int:
    """Open the log, check every entry's content, return the last index."""
    with Log.open(directory, "tablet-1", FAST) as log:
        check_entries(list(log.entries(1)), 1, log.last_index)
        return log.last_index


def test_fixture_has_closed_segments_and_an_open_last_one(templates: dict[str, Path]) -> None:
    crashed = segments(templates["crashed"])
    assert len(crashed) >= 4
    assert scan(crashed[-1], True).footer is None
    assert scan(crashed[0], False).footer is not None
    assert list(templates["crashed"].glob("*.tmp"))  # a preallocated next segment was copied too


def test_crash_copy_recovers_everything_and_drops_leftovers(templates, tmp_path, caplog) -> None:
    directory = copy_of(templates, "crashed", tmp_path)
    with caplog.at_level(logging.WARNING, RECOVERY_LOGGER):
        assert reopen_all(directory) == ENTRIES
    assert caplog.records == []  # preallocated zeros after the last batch are normal
    assert not list(directory.glob("*.tmp"))
    last = segments(directory)[-1]
    assert scan(last, True).footer is not None  # recovery closed the open segment


@pytest.mark.parametrize("offset", [0, 9, 14, 22])
def test_damaged_segment_header_is_corruption(templates, tmp_path, offset: int) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    victim = segments(directory)[1]
    flip_byte(victim, offset)
    with pytest.raises(Corruption, match=rf"{victim}: .*byte offset \d+"):
        Log.open(directory, "tablet-1", FAST)


@pytest.mark.parametrize("where", ["batch header", "payload", "last batch"])
def test_damage_inside_a_closed_segment_is_corruption(templates, tmp_path, where: str) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    victim = segments(directory)[1]
    batches = scan(victim, False).batches
    batch = batches[len(batches) // 2] if where != "last batch" else batches[-1]
    offset = batch.offset + (3 if where == "batch header" else BATCH_HEADER_SIZE + 30)
    flip_byte(victim, offset)
    with pytest.raises(Corruption, match=rf"{victim}: damaged batch at byte offset {batch.offset} inside a closed"):
        Log.open(directory, "tablet-1", FAST)


def test_damaged_footer_of_an_older_segment_is_corruption(templates, tmp_path) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    victim = segments(directory)[0]
    footer_at = file_size(victim) - FOOTER_SIZE
    flip_byte(victim, footer_at + 4)
    with pytest.raises(Corruption, match=rf"{victim}: no valid footer at byte offset {footer_at}"):
        Log.open(directory, "tablet-1", FAST)


def test_footer_disagreeing_with_the_contents_is_corruption(templates, tmp_path) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    victim = segments(directory)[0]
    footer_at = file_size(victim) - FOOTER_SIZE
    with open(victim, "r+b") as f:
        f.seek(footer_at)
        f.write(encode_footer(Footer(1, 1, 1)))
    with pytest.raises(Corruption, match=rf"{victim}: footer says"):
        Log.open(directory, "tablet-1", FAST)


def test_damaged_footer_of_the_last_segment_only_reopens_it(templates, tmp_path, caplog) -> None:
    """A footer holds no data; losing it is what a crash during close looks like."""
    directory = copy_of(templates, "clean", tmp_path)
    victim = segments(directory)[-1]
    flip_byte(victim, file_size(victim) - 2)
    with caplog.at_level(logging.WARNING, RECOVERY_LOGGER):
        assert reopen_all(directory) == ENTRIES
    assert any("torn write" in r.getMessage() for r in caplog.records)


def test_bad_batch_at_the_tail_of_the_last_segment_is_a_torn_write(templates, tmp_path, caplog) -> None:
    directory = copy_of(templates, "crashed", tmp_path)
    last = segments(directory)[-1]
    tail = scan(last, True).batches[-1]
    flip_byte(last, tail.offset + BATCH_HEADER_SIZE + 5)
    with caplog.at_level(logging.WARNING, RECOVERY_LOGGER):
        assert reopen_all(directory) == ENTRIES - 1
    assert [r.getMessage() for r in caplog.records if str(tail.offset) in r.getMessage()]
    after = scan(last, True)
    assert after.footer is not None
    assert file_size(last) == tail.offset + FOOTER_SIZE


def test_bad_batch_followed_by_a_valid_one_is_corruption(templates, tmp_path) -> None:
    directory = copy_of(templates, "crashed", tmp_path)
    last = segments(directory)[-1]
    batches = scan(last, True).batches
    assert len(batches) >= 3
    victim = batches[-3]
    flip_byte(last, victim.offset + BATCH_HEADER_SIZE + 1)
    with pytest.raises(
        Corruption, match=rf"{last}: damaged batch at byte offset {victim.offset} is followed by a valid batch"
    ):
        Log.open(directory, "tablet-1", FAST)


@pytest.mark.parametrize("torn", ["half header", "short payload", "garbage"])
def test_torn_tails_are_truncated(templates, tmp_path, caplog, torn: str) -> None:
    directory = copy_of(templates, "crashed", tmp_path)
    last = segments(directory)[-1]
    valid_end = scan(last, True).valid_end
    data = read_segment_file(str(last))
    sample = data[scan(last, True).batches[-1].offset : valid_end]  # a real batch, re-written torn
    tail = {"half header": sample[:7], "short payload": sample[:-10], "garbage": b"\x13\x37" * 50}[torn]
    with open(last, "r+b") as f:
        f.seek(valid_end)
        f.write(tail)
    with caplog.at_level(logging.WARNING, RECOVERY_LOGGER):
        assert reopen_all(directory) == ENTRIES
    assert any(f"torn write at byte offset {valid_end}" in r.getMessage() for r in caplog.records)
    assert file_size(last) == valid_end + FOOTER_SIZE


def test_missing_segment_is_corruption(templates, tmp_path) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    segments(directory)[1].unlink()
    with pytest.raises(Corruption, match=re.escape("wal-000000002..wal-000000002 are missing")):
        Log.open(directory, "tablet-1", FAST)


def test_segment_of_another_tablet_is_corruption(templates, tmp_path) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    with pytest.raises(Corruption, match="belongs to tablet 'tablet-1', not 'tablet-2'"):
        Log.open(directory, "tablet-2", FAST)


def test_segment_renamed_out_of_place_is_corruption(templates, tmp_path) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    paths = segments(directory)
    nxt = segment_path(directory, len(paths) + 1)
    paths[-1].rename(nxt)
    paths[-2].rename(paths[-1])
    nxt.rename(paths[-2])
    with pytest.raises(Corruption, match="header says sequence number"):
        Log.open(directory, "tablet-1", FAST)


def test_empty_open_last_segment_is_removed(templates, tmp_path) -> None:
    directory = copy_of(templates, "clean", tmp_path)
    count = len(segments(directory))
    empty = segment_path(directory, count + 1)
    empty.write_bytes(encode_segment_header(count + 1, "tablet-1") + bytes(4096))
    assert reopen_all(directory) == ENTRIES
    assert not empty.exists()


def test_entries_that_do_not_follow_each_other_are_corruption(tmp_path) -> None:
    """Batches with valid CRCs that skip indexes mean a segment was swapped: refuse to serve them."""
    short, long = tmp_path / "short", tmp_path / "long"
    for directory, count in ((short, 3), (long, 7)):
        for first, n in ((1, 3), (4, count), (4 + count, 2)):
            with Log.open(directory, "tablet-1", FAST) as log:  # one segment per open
                log.append_sync(make_entries(first, n))
    shutil.copy(segment_path(short, 2), segment_path(long, 2))  # long: 1..3, 4..6, 11..12
    with pytest.raises(Corruption, match=rf"{segment_path(long, 3)}: batch at byte offset \d+: entry 11 where 7"):
        Log.open(long, "tablet-1", FAST)
