"""`nyala wal dump`: lists segments and entries, verifies CRCs, fails loudly on corruption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nyala.tools.cli import main
from nyala.wal import Log
from nyala.wal.format import BATCH_HEADER_SIZE
from nyala.wal.scan import read_segment_file, scan_segment

from .helpers import SMALL, crash_copy, fill, flip_byte, make_entries


@pytest.fixture
def dumped_dir(log_dir: Path) -> Path:
    with Log.open(log_dir, "tablet-1", SMALL) as log:
        fill(log, 1, 300, per_append=4, term=2)
        log.truncate_after_sync(298)
        log.append_sync(make_entries(299, 1, term=3))
    return log_dir


def run(*args: str):
    return CliRunner().invoke(main, ["wal", "dump", *args])


def test_dump_lists_segments_and_entries(dumped_dir: Path) -> None:
    result = run(str(dumped_dir))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("segment 1 (")
    assert ", closed, " in lines[0]
    assert "indexes 1.." in lines[0]
    assert "tablet tablet-1" in lines[0]
    assert lines[1].split() == ["term", "index", "type", "size", "batch"]
    assert lines[2].split()[:4] == ["2", "1", "1", "100"]  # term, index, type (1 % 7), size
    assert any(line.strip().startswith("truncate after index 298") for line in lines)
    assert lines[-1].endswith("entries written; every checksum verified")


def test_dump_json(dumped_dir: Path) -> None:
    result = run(str(dumped_dir), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["error"] is None
    records = [r for s in document["segments"] for r in s["records"]]
    entries = [r for r in records if r["kind"] == "entry"]
    assert len(entries) == 301  # 300, then 299 again after the truncation
    assert entries[-1] == {"kind": "entry", "term": 3, "index": 299, "type": 299 % 7, "size": 100,
                           "batch_offset": entries[-1]["batch_offset"]}  # fmt: skip
    summary = run(str(dumped_dir), "--no-entries", "--format", "json")
    assert all(s["records"] == [] for s in json.loads(summary.output)["segments"])


def test_dump_reports_corruption_with_file_and_offset(dumped_dir: Path) -> None:
    victim = dumped_dir / "wal-000000001"
    scan = scan_segment(str(victim), read_segment_file(str(victim)), False)
    offset = scan.batches[-1].offset
    flip_byte(victim, offset + BATCH_HEADER_SIZE + 3)
    result = run(str(dumped_dir))
    assert result.exit_code == 1
    assert f"Error: corruption: {victim}: damaged batch at byte offset {offset} inside a closed segment" in (
        result.output
    )
    as_json = run(str(dumped_dir), "--format", "json", "--no-entries")
    assert as_json.exit_code == 1
    assert "byte offset" in as_json.output


def test_dump_reports_a_torn_tail_without_repairing_it(small_log: Log, log_dir: Path, tmp_path: Path) -> None:
    fill(small_log, 1, 20)
    crashed = crash_copy(log_dir, tmp_path / "crashed")
    last = sorted(crashed.glob("wal-?????????"))[-1]
    end = scan_segment(str(last), read_segment_file(str(last)), True).valid_end
    with open(last, "r+b") as f:
        f.seek(end)
        f.write(b"torn!")
    before = last.read_bytes()
    result = run(str(crashed), "--no-entries")
    assert result.exit_code == 0, result.output
    assert f"torn tail at byte offset {end}" in result.output
    assert last.read_bytes() == before


def test_dump_of_a_missing_directory(tmp_path: Path) -> None:
    result = run(str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert "not a directory" in result.output
