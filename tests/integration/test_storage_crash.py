"""Crash safety: kill -9 a process while it applies entries; on reopen, index and rows agree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nyala.storage import ScanSpec, StorageOptions, TabletStoreManager

WRITER = Path(__file__).with_name("storage_crash_writer.py")
ROWS_PER_ENTRY = 400


def expected_rows(applied: int, r: int = ROWS_PER_ENTRY) -> dict[int, int]:
    """id -> v after entries 1..applied of the writer."""
    rows: dict[int, int] = {}
    for i in range(1, applied + 1):
        rows.update({k: i for k in range((i - 1) * r, i * r)})
        if i > 1:
            rows.update({k: i for k in range((i - 2) * r, (i - 2) * r + r // 2)})
    return rows


def run_and_kill(data_dir: Path, min_progress: int, r: int = ROWS_PER_ENTRY, flush_rows: int | None = None) -> int:
    """Start the writer, let it apply at least ``min_progress`` more entries, SIGKILL it."""
    extra = [] if flush_rows is None else [str(flush_rows)]
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(data_dir), "crash", str(r), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = last = None
        for line in proc.stdout:
            last = int(line)
            first = last if first is None else first
            if last - first >= min_progress:
                break
        assert last is not None, f"writer exited early with {proc.poll()}"
        os.kill(proc.pid, signal.SIGKILL)  # mid-apply: it never stops between groups
        return last
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def check(data_dir: Path, last_printed: int, r: int = ROWS_PER_ENTRY) -> int:
    with TabletStoreManager(str(data_dir), StorageOptions(storage_threads=1)) as manager:
        store = manager.open_tablet("crash")
        applied = store.applied_index()
        assert applied >= last_printed  # everything acknowledged survived
        table = store.scan(ScanSpec(projection=["id", "v"])).read_all()
        assert dict(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True)) == expected_rows(applied, r)
        return applied


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("r", "flush_rows"), [(ROWS_PER_ENTRY, None), (10_000, 10_000)], ids=["small-entries", "flush-every-entry"]
)
def test_kill_9_during_apply_keeps_index_and_rows_in_step(tmp_path: Path, r: int, flush_rows: int | None) -> None:
    """With 15,000-row entries and a 10,000-row flush threshold, every entry applied alone
    freezes the MemRowSet, and the flush thread's commit checkpoints (DuckDB's WAL skipped):
    the kill lands in those too."""
    data_dir = tmp_path / "tserver"
    applied = 0
    for _ in range(3):  # crash, reopen and continue, crash again
        printed = run_and_kill(data_dir, min_progress=15, r=r, flush_rows=flush_rows)
        new = check(data_dir, printed, r)
        assert new > applied
        applied = new
