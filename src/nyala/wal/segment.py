"""Segment files on disk: creating (with background preallocation), appending, syncing, closing.

A new segment is first prepared under a temporary name (``wal-000000007.tmp``): its header is
written, the file is preallocated to the segment size with ``posix_fallocate`` and fsynced.  It
is renamed to its real name and the directory fsynced only when the appender swaps it in, after
the previous segment was closed, so at most one segment (the last) lacks a footer.  Closing
writes the footer right after the last batch, truncates the preallocated rest and fsyncs.
"""

from __future__ import annotations

import errno
import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass

from nyala.errors import IOFailure
from nyala.files import fsync_dir
from nyala.wal.format import FOOTER_SIZE, Footer, encode_footer, encode_segment_header, segment_name

__all__ = ["ActiveSegment", "Preallocator", "PreparedSegment", "SegmentInfo", "close_recovered", "segments_from"]

_TMP_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment as listed by :meth:`Log.segments` and returned by :meth:`Log.gc`.

    ``min_index``/``max_index`` span every entry written to it (0 when none), including
    entries that a later truncation superseded, so GC decisions stay conservative.
    """

    seqno: int
    path: str
    size_bytes: int
    closed: bool
    num_entries: int
    min_index: int
    max_index: int


def segments_from(segments: list[SegmentInfo], index: int) -> list[SegmentInfo]:
    """The segments from the one holding entry ``index`` to the active one (the last): what a
    tablet copy ships so that the destination replays every entry after ``index``."""
    if index <= 0:
        return segments
    for i, segment in enumerate(segments[:-1]):
        if segment.max_index >= index:
            return segments[i:]
    return segments[-1:]


@dataclass(frozen=True, slots=True)
class PreparedSegment:
    """A segment file with a durable header, still under its temporary name."""

    seqno: int
    tmp_path: str
    final_path: str
    fd: int
    header_size: int
    allocated_bytes: int


def prepare_segment(directory: str, seqno: int, tablet_id: str, allocate_bytes: int) -> PreparedSegment:
    """Create the file for segment ``seqno`` under its temporary name; raises IOFailure."""
    final_path = os.path.join(directory, segment_name(seqno))
    tmp_path = final_path + _TMP_SUFFIX
    header = encode_segment_header(seqno, tablet_id)
    try:
        fd = os.open(tmp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise IOFailure(f"{tmp_path}: cannot create segment: {exc.strerror}") from exc
    try:
        _pwrite_all(fd, [header], 0)
        allocated = len(header)
        if allocate_bytes > allocated and _try_fallocate(fd, allocate_bytes):
            allocated = allocate_bytes
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        _unlink_quietly(tmp_path)
        raise IOFailure(f"{tmp_path}: cannot prepare segment: {exc.strerror}") from exc
    return PreparedSegment(seqno, tmp_path, final_path, fd, len(header), allocated)


def _try_fallocate(fd: int, size: int) -> bool:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return False  # the filesystem cannot preallocate; appends then use fsync
        raise
    return True


def is_leftover(name: str) -> bool:
    return name.startswith("wal-") and name.endswith(_TMP_SUFFIX)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class ActiveSegment:
    """The segment the appender writes to.  Only the appender thread calls its methods."""

    def __init__(self, prepared: PreparedSegment, dir_fd: int) -> None:
        """Swap a prepared file in: rename it to its real name and make that durable."""
        try:
            os.rename(prepared.tmp_path, prepared.final_path)
            fsync_dir(dir_fd)
        except OSError as exc:
            os.close(prepared.fd)
            raise IOFailure(f"{prepared.final_path}: cannot install segment: {exc.strerror}") from exc
        self.seqno = prepared.seqno
        self.path = prepared.final_path
        self._fd = prepared.fd
        self._allocated = prepared.allocated_bytes
        self._dir_fd = dir_fd
        self.offset = prepared.header_size
        self.has_records = False
        self.num_entries = 0
        self.min_index = 0
        self.max_index = 0

    def write(self, header: bytes, payload: bytes) -> int:
        """Write one batch after the previous one; return its offset.  Raises OSError."""
        offset = self.offset
        size = len(header) + len(payload)
        if os.pwritev(self._fd, [header, payload], offset) != size:
            _pwrite_all(self._fd, [header + payload], offset)  # a short write: redo it whole
        self.offset = offset + size
        self.has_records = True
        return offset

    def sync(self) -> None:
        # Inside the preallocated extent the file size does not change, so fdatasync suffices.
        if self.offset <= self._allocated:
            os.fdatasync(self._fd)
        else:
            os.fsync(self._fd)

    def note_entries(self, first: int, last: int) -> None:
        self.num_entries += last - first + 1
        if self.min_index == 0 or first < self.min_index:
            self.min_index = first
        if last > self.max_index:
            self.max_index = last

    def info(self) -> SegmentInfo:
        return SegmentInfo(self.seqno, self.path, self.offset, False, self.num_entries, self.min_index, self.max_index)

    def finish(self) -> SegmentInfo:
        """Write the footer, cut the preallocated rest, fsync and close.  Raises OSError."""
        footer = Footer(self.num_entries, self.min_index, self.max_index)
        size = _write_footer(self._fd, self.offset, footer)
        os.close(self._fd)
        self._fd = -1
        return SegmentInfo(self.seqno, self.path, size, True, self.num_entries, self.min_index, self.max_index)

    def discard(self) -> None:
        """Remove this segment; only for one that holds no record."""
        assert not self.has_records, "refusing to delete a segment with records"
        os.close(self._fd)
        self._fd = -1
        os.unlink(self.path)
        fsync_dir(self._dir_fd)

    def abandon(self) -> None:
        """Close the file without writing anything more (after a failure); recovery sorts it out."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def close_recovered(path: str, valid_end: int, footer: Footer) -> int:
    """Close a segment found open after a crash: drop what follows ``valid_end``, add the footer."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        return _write_footer(fd, valid_end, footer)
    finally:
        os.close(fd)


def _write_footer(fd: int, offset: int, footer: Footer) -> int:
    _pwrite_all(fd, [encode_footer(footer)], offset)
    os.ftruncate(fd, offset + FOOTER_SIZE)
    os.fsync(fd)
    return offset + FOOTER_SIZE


def _pwrite_all(fd: int, buffers: list[bytes], offset: int) -> None:
    total = sum(len(b) for b in buffers)
    written = os.pwritev(fd, buffers, offset)
    if written == total:
        return
    rest = memoryview(b"".join(buffers))[written:]  # a short write: finish it piece by piece
    offset += written
    while rest:
        written = os.pwrite(fd, rest, offset)
        rest, offset = rest[written:], offset + written


class Preallocator:
    """Prepares the next segment on a short-lived background thread, ahead of need."""

    def __init__(self, directory: str, tablet_id: str, size_bytes: int, enabled: bool) -> None:
        self._directory = directory
        self._tablet_id = tablet_id
        self._size = size_bytes if enabled else 0
        self._enabled = enabled
        self._pending: tuple[int, Future[PreparedSegment]] | None = None

    def start(self, seqno: int) -> None:
        if not self._enabled:
            return
        future: Future[PreparedSegment] = Future()
        self._pending = (seqno, future)
        threading.Thread(target=self._prepare, args=(seqno, future), name="wal-prealloc", daemon=True).start()

    def _prepare(self, seqno: int, future: Future[PreparedSegment]) -> None:
        try:
            future.set_result(prepare_segment(self._directory, seqno, self._tablet_id, self._size))
        except BaseException as exc:
            future.set_exception(exc)

    def take(self, seqno: int) -> PreparedSegment:
        """The prepared segment ``seqno``, waiting for the background work or doing it now."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == seqno:
            return pending[1].result()
        if pending is not None:
            _discard(pending[1])
        return prepare_segment(self._directory, seqno, self._tablet_id, self._size)

    def discard(self) -> None:
        """Drop a prepared segment nobody will use (on close)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            _discard(pending[1])


def _discard(future: Future[PreparedSegment]) -> None:
    try:
        prepared = future.result()
    except Exception:
        return  # nothing was left behind: prepare_segment cleans up after itself
    os.close(prepared.fd)
    _unlink_quietly(prepared.tmp_path)
