"""Crash consistency of the WAL: kill -9 a real writer process at random moments, then reopen.

A subprocess (wal_crash_writer.py) appends from four writers and prints every acknowledged
range; even rounds use threads (``append`` and ``append_sync``), odd rounds asyncio tasks on
one event loop (``append_async``).  Each round kills it with SIGKILL at a seeded moment (while
opening, or after a seeded number of acknowledgements), sometimes adds a torn batch at the end
of the last segment as a power cut mid-write would, reopens the log here and checks that every
acknowledged entry is present, in order, byte for byte, and that the torn bytes were truncated
with a warning.  The rounds share one directory, so every round also recovers what the
previous ones left.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nyala.wal import Log
from nyala.wal.format import BATCH_HEADER_SIZE
from nyala.wal.scan import read_segment_file, scan_segment

from .wal_crash_writer import OPTIONS, TABLET, expected_entry

HELPER = Path(__file__).with_name("wal_crash_writer.py")
SEED = 20261122
ROUNDS = 10
LINE_TIMEOUT_S = 30.0


class Writer:
    """The helper process and a thread collecting its stdout lines."""

    def __init__(self, directory: Path, seed: int, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HELPER), str(directory), str(seed), "4", mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self) -> str:
        line = self.lines.get(timeout=LINE_TIMEOUT_S)
        if line is None:
            self.kill()
            pytest.fail(f"writer exited early (status {self.proc.returncode}): {self.stderr()}")
        return line

    def kill(self) -> list[str]:
        """SIGKILL (if still running), reap, and return every line it printed that was not read yet."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        rest = []
        while (line := self.lines.get_nowait()) is not None:
            rest.append(line)
        return rest

    def close_pipes(self) -> None:
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-2000:]


def run_round(directory: Path, rng: random.Random, round_number: int) -> list[tuple[int, int]]:
    """Start a writer, kill it at a seeded moment; return the acknowledged (first, last) ranges."""
    writer = Writer(directory, SEED + round_number, "threads" if round_number % 2 == 0 else "asyncio")
    seen: list[str] = []
    try:
        moment = rng.choice(["during open", "after open", "acks", "acks", "acks"])
        if moment == "during open":
            time.sleep(rng.uniform(0.0, 0.5))  # the point is a random instant, not a condition
        else:
            seen.append(writer.next_line())
            target = 0 if moment == "after open" else rng.choice([1, 10, 100, 400, 1500])
            while sum(line.startswith("ack") for line in seen) < target:
                seen.append(writer.next_line())
    finally:
        seen.extend(writer.kill())
        writer.close_pipes()
    acks = []
    for line in seen:
        if line.startswith("ack "):
            _, first, last = line.split()
            acks.append((int(first), int(last)))
    return acks


def add_torn_batch(directory: Path, rng: random.Random) -> int | None:
    """Write part of a batch after the last valid one of an open last segment; return where."""
    last = sorted(directory.glob("wal-?????????"))[-1]
    scan = scan_segment(str(last), read_segment_file(str(last)), True)
    if scan.footer is not None or not scan.batches:
        return None
    batch = scan.batches[-1]
    whole = read_segment_file(str(last))[batch.offset : scan.valid_end]
    torn = whole[: rng.randint(1, len(whole) - 1)] if len(whole) > BATCH_HEADER_SIZE else whole[:5]
    with open(last, "r+b") as f:
        f.seek(scan.valid_end)
        f.write(torn)
    return scan.valid_end


def check_log(directory: Path, acked_up_to: int) -> int:
    with Log.open(directory, TABLET, OPTIONS) as log:
        assert log.first_index == 1
        assert log.last_index >= acked_up_to, f"acknowledged {acked_up_to} but the log ends at {log.last_index}"
        count = 0
        for expected_index, entry in enumerate(log.entries(1), start=1):
            assert entry == expected_entry(expected_index), f"entry {expected_index} differs"
            count += 1
        assert count == log.last_index
        return log.last_index


@pytest.mark.timeout(120)
def test_acknowledged_entries_survive_kill_9(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(SEED)
    directory = tmp_path / "wal"
    acked_up_to = 0
    torn_rounds = 0
    for round_number in range(ROUNDS):
        acks = run_round(directory, rng, round_number)
        for first, last in acks:
            assert first <= last
        acked_up_to = max([acked_up_to, *(last for _, last in acks)])
        torn_at = add_torn_batch(directory, rng) if directory.exists() and rng.random() < 0.5 else None
        caplog.clear()
        with caplog.at_level(logging.WARNING, "nyala.wal.recovery"):
            recovered = check_log(directory, acked_up_to)
        if torn_at is not None:
            torn_rounds += 1
            assert any(f"torn write at byte offset {torn_at}" in r.getMessage() for r in caplog.records)
        print(f"round {round_number}: {len(acks)} acks, log ends at {recovered}, torn tail at {torn_at}")
        acked_up_to = max(acked_up_to, recovered)  # durable now: the next round must keep it too
    assert acked_up_to > 1000
    assert torn_rounds >= 1
