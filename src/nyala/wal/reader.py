"""Reading entries back from segment files, for lagging followers and for replay.

The log index says which batch holds an index; :class:`BatchReader` fetches that batch with
``pread`` (reading ahead, so consecutive batches cost one system call per chunk), checks both
CRCs and returns the payload.  The index only ever lists batches that are durable, so a reader
never sees a half-written batch of the active segment.  Its read-ahead buffer may hold bytes
that were not written yet when it was read, so the caller drops it (:meth:`forget`) each time
it takes new batch positions from the index.
"""

from __future__ import annotations

import os
import struct

from crc32c import crc32c

from nyala.errors import Corruption, IOFailure, NotFound
from nyala.wal.format import BATCH_HEADER_SIZE, BATCH_MAGIC, segment_name

__all__ = ["BatchReader"]

_BATCH_HEADER = struct.Struct("<4sIII")
READ_AHEAD_BYTES = 256 * 1024


class BatchReader:
    """Reads and checks batches of one log directory; not thread-safe (one per read call)."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._fds: dict[int, int] = {}
        self._chunk_seqno = -1
        self._chunk_start = 0
        self._chunk = memoryview(b"")

    def payload(self, seqno: int, offset: int) -> memoryview:
        """The checked payload of the batch at ``offset`` of segment ``seqno``."""
        header = self._read(seqno, offset, BATCH_HEADER_SIZE)
        magic, length, payload_crc, header_crc = _BATCH_HEADER.unpack(header)
        if magic != BATCH_MAGIC or header_crc != crc32c(header[:12]):
            raise Corruption(f"{self.path(seqno)}: damaged batch header at byte offset {offset}")
        payload = self._read(seqno, offset + BATCH_HEADER_SIZE, length)
        if crc32c(payload) != payload_crc:
            raise Corruption(f"{self.path(seqno)}: payload checksum mismatch in the batch at byte offset {offset}")
        return payload

    def path(self, seqno: int) -> str:
        return os.path.join(self._directory, segment_name(seqno))

    def forget(self) -> None:
        """Drop the read-ahead buffer (it may predate batches that became durable since)."""
        self._chunk_seqno = -1
        self._chunk = memoryview(b"")

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _read(self, seqno: int, offset: int, length: int) -> memoryview:
        start = offset - self._chunk_start
        if seqno == self._chunk_seqno and start >= 0 and start + length <= len(self._chunk):
            return self._chunk[start : start + length]
        try:
            data = os.pread(self._fd(seqno), max(length, READ_AHEAD_BYTES), offset)
        except OSError as exc:
            raise IOFailure(f"{self.path(seqno)}: read failed at byte offset {offset}: {exc.strerror}") from exc
        if len(data) < length:
            raise Corruption(f"{self.path(seqno)}: batch at byte offset {offset} extends past the end of the file")
        self._chunk_seqno, self._chunk_start, self._chunk = seqno, offset, memoryview(data)
        return self._chunk[:length]

    def _fd(self, seqno: int) -> int:
        fd = self._fds.get(seqno)
        if fd is None:
            try:
                fd = os.open(self.path(seqno), os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError as exc:
                raise NotFound(f"{self.path(seqno)}: segment was garbage collected while being read") from exc
            except OSError as exc:
                raise IOFailure(f"{self.path(seqno)}: cannot open segment: {exc.strerror}") from exc
            self._fds[seqno] = fd
        return fd
