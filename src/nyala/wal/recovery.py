"""Opening a log directory: check every segment, rebuild the index, repair a torn tail.

Segments are read in sequence order and every batch's CRCs are checked (:mod:`nyala.wal.scan`
decides what damage means).  Records are replayed into a fresh :class:`LogIndex`; entries must
follow each other and truncation markers must stay inside the log, or the log is corrupt.  A
closed segment's footer must agree with what the scan found.  The last segment, if a crash left
it open, is closed now: a torn tail is cut (with a warning) and a footer written; an open last
segment with no record at all is removed.  Leftover ``.tmp`` files of unfinished preallocations
are deleted.
"""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass, field

from nyala.errors import Corruption, IOFailure
from nyala.files import fsync_dir
from nyala.wal.format import KIND_ENTRY, Footer, iter_records, parse_segment_name, segment_name
from nyala.wal.index import LogIndex
from nyala.wal.scan import SegmentScan, read_segment_file, scan_segment
from nyala.wal.segment import SegmentInfo, close_recovered, is_leftover

__all__ = ["RecoveredLog", "Replay", "list_segments", "recover"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RecoveredLog:
    """The state of a log directory after recovery; all its segments are closed."""

    index: LogIndex = field(default_factory=LogIndex)
    closed: list[SegmentInfo] = field(default_factory=list)
    next_seqno: int = 1


def list_segments(directory: str) -> list[int]:
    """Sequence numbers of the segment files in ``directory``, ascending; gaps are Corruption."""
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise IOFailure(f"{directory}: cannot list the log directory: {exc.strerror}") from exc
    seqnos = sorted(s for s in map(parse_segment_name, names) if s is not None)
    for before, after in itertools.pairwise(seqnos):
        if after != before + 1:
            raise Corruption(f"{directory}: segments {segment_name(before + 1)}..{segment_name(after - 1)} are missing")
    return seqnos


def recover(directory: str, tablet_id: str, dir_fd: int) -> RecoveredLog:
    _remove_leftovers(directory, dir_fd)
    seqnos = list_segments(directory)
    state = RecoveredLog(next_seqno=seqnos[-1] + 1 if seqnos else 1)
    replay = Replay(state.index)
    for position, seqno in enumerate(seqnos):
        path = os.path.join(directory, segment_name(seqno))
        scan = scan_segment(path, read_segment_file(path), is_last=position == len(seqnos) - 1)
        _check_identity(scan, seqno, tablet_id)
        footer = replay.segment(scan, seqno)
        if scan.footer is not None:
            if scan.footer != footer:
                raise Corruption(f"{path}: footer says {scan.footer} but the segment holds {footer}")
            size = scan.size
        elif not scan.batches:
            _remove_empty_tail(path, scan, dir_fd)
            continue
        else:
            size = _close_open_tail(path, scan, footer)
        state.closed.append(
            SegmentInfo(seqno, path, size, True, footer.num_entries, footer.min_index, footer.max_index)
        )
    return state


def _remove_leftovers(directory: str, dir_fd: int) -> None:
    leftovers = [name for name in os.listdir(directory) if is_leftover(name)]
    for name in leftovers:
        os.unlink(os.path.join(directory, name))
    if leftovers:
        fsync_dir(dir_fd)


def _check_identity(scan: SegmentScan, seqno: int, tablet_id: str) -> None:
    if scan.header.seqno != seqno:
        raise Corruption(f"{scan.path}: header says sequence number {scan.header.seqno}, the name says {seqno}")
    if scan.header.tablet_id != tablet_id:
        raise Corruption(f"{scan.path}: segment belongs to tablet {scan.header.tablet_id!r}, not {tablet_id!r}")


def _remove_empty_tail(path: str, scan: SegmentScan, dir_fd: int) -> None:
    if scan.torn_offset is not None:
        log.warning("%s: torn write at byte offset %d in an empty last segment; removing it", path, scan.torn_offset)
    os.unlink(path)
    fsync_dir(dir_fd)


def _close_open_tail(path: str, scan: SegmentScan, footer: Footer) -> int:
    if scan.torn_offset is not None:
        log.warning(
            "%s: torn write at byte offset %d (the last group commit did not finish); truncating %d bytes",
            path,
            scan.torn_offset,
            scan.size - scan.torn_offset,
        )
    try:
        return close_recovered(path, scan.valid_end, footer)
    except OSError as exc:
        raise IOFailure(f"{path}: cannot close the recovered segment: {exc.strerror}") from exc


class Replay:
    """Feeds records into the index in log order, checking that they fit together."""

    def __init__(self, index: LogIndex) -> None:
        self._index = index
        self._started = False  # before the first record, GC may have removed what came earlier

    def segment(self, scan: SegmentScan, seqno: int) -> Footer:
        """Replay one segment; return the footer that describes what it holds."""
        count = min_index = max_index = 0
        for batch in scan.batches:
            where = f"{scan.path}: batch at byte offset {batch.offset}"
            for record in iter_records(batch.payload, where):
                if record.kind == KIND_ENTRY:
                    self._entry(where, seqno, batch.offset, record.op_index, record.term)
                    count += 1
                    min_index = record.op_index if min_index == 0 else min(min_index, record.op_index)
                    max_index = max(max_index, record.op_index)
                else:
                    self._truncate(where, record.op_index)
                self._started = True
        return Footer(count, min_index, max_index)

    def _entry(self, where: str, seqno: int, offset: int, index: int, term: int) -> None:
        expected = self._index.last_index + 1
        if self._started and index != expected:
            raise Corruption(f"{where}: entry {index} where {expected} was expected")
        self._index.add(seqno, offset, index, index, ((index, term),))

    def _truncate(self, where: str, after: int) -> None:
        index = self._index
        if self._started and not index.first_index - 1 <= after <= index.last_index:
            raise Corruption(
                f"{where}: truncation after {after} outside the log ({index.first_index}..{index.last_index})"
            )
        index.truncate_after(after)
