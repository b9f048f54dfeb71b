"""Shared helpers of the WAL unit tests."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from nyala.wal import Log, LogEntry, WalOptions
from nyala.wal.appender import Request
from nyala.wal.format import segment_name

SMALL = WalOptions(segment_size_bytes=16 * 1024)


def payload_for(index: int, size: int = 100) -> bytes:
    """Deterministic payload bytes of an entry, so a test can check contents after reopening."""
    seed = hashlib.blake2b(index.to_bytes(8, "little"), digest_size=32).digest()
    return (seed * (size // 32 + 1))[:size]


def make_entries(first: int, count: int, term: int = 1, size: int = 100) -> list[LogEntry]:
    return [LogEntry(term, i, i % 7, payload_for(i, size)) for i in range(first, first + count)]


def fill(log: Log, first: int, count: int, per_append: int = 1, term: int = 1, size: int = 100) -> None:
    """Append ``count`` entries starting at ``first``, ``per_append`` per call, and wait for all."""
    futures = []
    for start in range(first, first + count, per_append):
        n = min(per_append, first + count - start)
        futures.append(log.append(make_entries(start, n, term, size)))
    for future in futures:
        future.result(timeout=30)


def check_entries(entries: list[LogEntry], first: int, last: int) -> None:
    assert [e.index for e in entries] == list(range(first, last + 1))
    for e in entries:
        assert e.payload == payload_for(e.index, len(e.payload)), f"entry {e.index} payload differs"
        assert e.type == e.index % 7


def segment_path(directory: Path, seqno: int) -> Path:
    return directory / segment_name(seqno)


def crash_copy(source: Path, target: Path) -> Path:
    """Copy a live log directory: the copy is what a kill -9 would leave on disk right now."""
    shutil.copytree(source, target)
    return target


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        assert byte, f"{path} has no byte at offset {offset}"
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x5A]))


def file_size(path: Path) -> int:
    return os.stat(path).st_size


@contextlib.contextmanager
def stalled_appender(log: Log) -> Iterator[threading.Event]:
    """Hold the committer before it writes its next group, so requests made meanwhile queue up.

    The first request after entering becomes a group of its own (held); everything queued while
    it is held is written as the following group(s) once the block exits.  The yielded event is
    set once the committer is holding (that is, a request has arrived and is being committed).
    """
    release = threading.Event()
    holding = threading.Event()
    committer = log._committer
    original = committer._write_group

    def held(group: list[Request]) -> None:
        holding.set()
        release.wait(30)
        committer._write_group = original
        original(group)

    committer._write_group = held
    try:
        yield holding
    finally:
        release.set()


class DurableMark:
    """The last index of the newest group the log has written and synced, read from any thread."""

    through = 0


@contextlib.contextmanager
def durable_marks(log: Log) -> Iterator[DurableMark]:
    """Record, after each group's write and sync returns, the last index that is now durable.

    A completion callback that reads ``through`` learns whether its append was on disk when it
    was acknowledged, whatever the timing: "nothing is acknowledged before it is durable" is
    then checked on every completion instead of by looking once after a sleep.  Enter it
    before :func:`stalled_appender`, which wraps whatever group writer it finds.
    """
    mark = DurableMark()
    committer = log._committer
    original = committer._write_group

    def recorded(group: list[Request]) -> None:
        original(group)
        mark.through = max([mark.through, *(r.last for r in group)])

    committer._write_group = recorded
    try:
        yield mark
    finally:
        committer._write_group = original


@contextlib.contextmanager
def noting_idle_waits(log: Log) -> Iterator[threading.Event]:
    """Set the yielded event once a caller (``Log.close``) blocks waiting for the appender to go idle.

    With it a test sequences "close is waiting" before "the appender may go on", rather than
    sleeping and hoping close got that far.
    """
    waiting = threading.Event()
    committer = log._committer
    original = committer._idle

    class Noting(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            waiting.set()
            return super().wait(timeout)

    committer._idle = Noting(committer._lock)
    try:
        yield waiting
    finally:
        committer._idle = original


def room_waiters(log: Log) -> int:
    """How many ``wait_for_room`` callers are parked until the queue has room."""
    with log._committer._lock:
        return len(log._committer._room_waiters)
