"""Open scanners: the state of a scan between calls, served in byte-bounded Arrow batches.

A scan's first call opens a store scanner (one DuckDB query over one MVCC snapshot, with
projection, predicates, key bounds, order and limit pushed into SQL) and registers a
:class:`ScanSession` under a random id.  Each call then takes record batches from the
store while the next whole batch fits the caller's byte budget, so calls end at the store's
batch boundaries and readers receive whole batches; only a batch larger than the whole budget
is sliced (the remainder waits for the next call).  The call writes them as ONE Arrow IPC
stream, which goes out as a sidecar without copies: its pieces are the batches' own buffers.  Before answering,
the session looks one batch ahead, so ``has_more_results`` is exact and an exhausted scanner
is closed at once.

Ordered scans also report the encoded primary key of the last row sent, so a client can
resume after it on another replica; when the projection lacks key columns they are read and
dropped before sending.  Calls must number themselves 0, 1, 2...: a repeated number is
refused (its batch was already consumed).  A session not continued within the TTL is closed
by the reaper, or found expired on its next call.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from nyala.errors import InvalidArgument, NotFound
from nyala.rpc.framing import Buffer, SplitSidecar
from nyala.schema import IPC_WRITE_OPTIONS, Schema, encode_key
from nyala.storage import Scanner

__all__ = ["ScanChunk", "ScanSession", "ScannerRegistry"]

log = logging.getLogger("nyala.tserver")


@dataclass(frozen=True, slots=True)
class ScanChunk:
    """One call's worth of rows."""

    ipc_stream: SplitSidecar | None  # None when no rows
    num_rows: int
    has_more: bool
    last_primary_key: bytes


class _PieceSink:
    """A file for Arrow's IPC writer that keeps what it is given instead of copying it.

    Arrow hands a Python file each body buffer as a ``pyarrow.Buffer`` over the batch's own
    memory, and only the small metadata and padding as ``bytes``.  Copying a 4 MiB chunk into
    one buffer cost about 9 % of a tablet server's CPU during full scans (perf, with call
    graphs), besides the copy the socket makes anyway.
    """

    closed = False

    def __init__(self) -> None:
        self.pieces: list[Buffer] = []

    def write(self, data: bytes | pa.Buffer) -> int:
        piece = memoryview(data)
        self.pieces.append(piece)
        return piece.nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _ipc_stream(batches: list[pa.RecordBatch]) -> SplitSidecar:
    """``batches`` as one Arrow IPC stream, in pieces that share the batches' memory."""
    sink = _PieceSink()
    with pa.ipc.new_stream(sink, batches[0].schema, options=IPC_WRITE_OPTIONS) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return SplitSidecar(sink.pieces)


@dataclass
class ScanSession:
    """A scan in progress on one tablet."""

    scanner_id: bytes
    tablet_id: str
    scanner: Scanner
    output_columns: list[str]
    key_schema: Schema | None  # set for ordered scans: the last key is reported
    last_access: float
    next_call_seq: int = 1
    _batches: Iterator[pa.RecordBatch] | None = field(default=None, init=False)
    _pending: pa.RecordBatch | None = field(default=None, init=False)
    _exhausted: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def next_chunk(self, max_bytes: int) -> ScanChunk:
        """Read up to ``max_bytes`` of rows (at least one row when any remain); blocks on the store."""
        with self._lock:
            taken: list[pa.RecordBatch] = []
            size = 0
            while size < max_bytes:
                batch = self._take(max_bytes - size, first=not taken)
                if batch is None:
                    break
                taken.append(batch)
                size += batch.nbytes
            self._peek()
            return self._chunk(taken)

    def _take(self, budget: int, first: bool) -> pa.RecordBatch | None:
        batch = self._peek()
        if batch is None:
            return None
        if batch.nbytes <= budget:
            self._pending = None
            return batch
        if not first:
            # End the call at the store's batch boundary rather than slice: a sliced batch
            # reaches the client as two short ones (a 4 MiB call of 65,536-row batches
            # became 65,536 + 25,000 rows, then 40,000 + 25,000...), and every batch a
            # reader hands on costs it a fixed price (PySpark's Python data source, Spark's
            # columnar batches).
            return None
        rows = max(1, budget * batch.num_rows // max(1, batch.nbytes))  # one row always fits
        self._pending = batch.slice(rows)
        return batch.slice(0, rows)

    def _peek(self) -> pa.RecordBatch | None:
        """The next non-empty batch without consuming it; None at the end."""
        while self._pending is None and not self._exhausted:
            if self._batches is None:
                self._batches = iter(self.scanner)
            batch = next(self._batches, None)
            if batch is None:
                self._exhausted = True
            elif batch.num_rows:
                self._pending = batch
        return self._pending

    def _chunk(self, taken: list[pa.RecordBatch]) -> ScanChunk:
        has_more = self._pending is not None
        num_rows = sum(b.num_rows for b in taken)
        if not num_rows:
            return ScanChunk(None, 0, has_more, b"")
        last_key = b""
        if self.key_schema is not None:
            last = taken[-1]
            values = [last.column(name)[last.num_rows - 1].as_py() for name in self.key_schema.key_names]
            last_key = encode_key([c.type for c in self.key_schema.key_columns], values)
        out = [b.select(self.output_columns) for b in taken]
        return ScanChunk(_ipc_stream(out), num_rows, has_more, last_key)

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def try_close(self) -> bool:
        """Close unless a call is reading right now (the event loop must not wait for it)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._close_locked()
        finally:
            self._lock.release()
        return True

    def _close_locked(self) -> None:
        self._exhausted = True
        self._pending = None
        self.scanner.close()


class ScannerRegistry:
    """Scanner ids to sessions, with a TTL enforced by a reaper task and on every lookup."""

    def __init__(self, ttl_ms: int, clock: Callable[[], float] | None = None) -> None:
        self.ttl_s = ttl_ms / 1000
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._sessions: dict[bytes, ScanSession] = {}
        self._reaper: asyncio.Task[None] | None = None
        self.expired = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[ScanSession]:
        """The open scanners, for the web pages."""
        return list(self._sessions.values())

    def now(self) -> float:
        """The clock scanners' ``last_access`` is measured on."""
        return self._clock()

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever(), name="scanner-reaper")

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        for session in list(self._sessions.values()):
            self._close(session)

    def register(
        self, tablet_id: str, scanner: Scanner, output_columns: list[str], key_schema: Schema | None
    ) -> ScanSession:
        session = ScanSession(secrets.token_hex(16).encode(), tablet_id, scanner, output_columns, key_schema, 0.0)
        session.last_access = self._clock()
        self._sessions[session.scanner_id] = session
        return session

    def continue_scan(self, scanner_id: bytes, call_seq_id: int) -> ScanSession:
        """The session for a continuation call, checked for expiry and call order."""
        session = self._sessions.get(scanner_id)
        now = self._clock()
        if session is not None and now - session.last_access > self.ttl_s:
            self._expire(session)
            session = self._sessions.get(scanner_id)
        if session is None:
            raise NotFound(f"scanner {scanner_id.decode(errors='replace')!r} expired or does not exist")
        if call_seq_id != session.next_call_seq:
            what = "repeats an earlier call" if call_seq_id < session.next_call_seq else "skips calls"
            raise InvalidArgument(
                f"scan call_seq_id {call_seq_id} {what}; expected {session.next_call_seq} "
                f"(restart the scan, resuming after the last key seen)"
            )
        session.next_call_seq += 1
        session.last_access = now
        return session

    def close(self, scanner_id: bytes) -> None:
        session = self._sessions.get(scanner_id)
        if session is not None:
            self._close(session)

    def close_tablet(self, tablet_id: str) -> None:
        for session in [s for s in self._sessions.values() if s.tablet_id == tablet_id]:
            self._close(session)

    def _close(self, session: ScanSession) -> None:
        self._sessions.pop(session.scanner_id, None)
        session.close()

    def _expire(self, session: ScanSession) -> None:
        if not session.try_close():
            return  # a call is reading from it: it is not idle after all
        self._sessions.pop(session.scanner_id, None)
        self.expired += 1
        log.info("scanner %s of tablet %s expired", session.scanner_id.decode(), session.tablet_id)

    async def _reap_forever(self) -> None:
        interval = min(1.0, self.ttl_s / 2)
        while True:
            await asyncio.sleep(interval)
            now = self._clock()
            for session in [s for s in self._sessions.values() if now - s.last_access > self.ttl_s]:
                self._expire(session)
