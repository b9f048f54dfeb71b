"""Read-only inspection of a log directory, for ``nyala wal dump``.

Applies the same checks as recovery (every CRC, footers, continuity of indexes, torn tails)
but changes nothing: a torn tail is reported, not truncated, and no lock is taken, so it also
works on the directory of a running log (whose last batch may then look torn).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from nyala.errors import Corruption, NotFound
from nyala.wal.format import KIND_ENTRY, iter_records, segment_name
from nyala.wal.index import LogIndex
from nyala.wal.recovery import Replay, list_segments
from nyala.wal.scan import read_segment_file, scan_segment

__all__ = ["RecordInfo", "SegmentReport", "inspect_log"]


@dataclass(frozen=True, slots=True)
class RecordInfo:
    """One record: an entry (``kind`` "entry") or a truncation marker (``kind`` "truncate")."""

    kind: str
    term: int
    index: int
    type: int
    size: int
    batch_offset: int


@dataclass(slots=True)
class SegmentReport:
    seqno: int
    path: str
    tablet_id: str
    size_bytes: int
    closed: bool
    num_batches: int
    num_entries: int
    min_index: int
    max_index: int
    torn_offset: int | None
    records: list[RecordInfo] = field(default_factory=list)


def inspect_log(directory: str, with_records: bool = True) -> Iterator[SegmentReport]:
    """Check and describe each segment in order; raises Corruption at the first damage found."""
    if not os.path.isdir(directory):
        raise NotFound(f"{directory} is not a directory")
    seqnos = list_segments(directory)
    replay = Replay(LogIndex())
    tablet_id: str | None = None
    for position, seqno in enumerate(seqnos):
        path = os.path.join(directory, segment_name(seqno))
        scan = scan_segment(path, read_segment_file(path), is_last=position == len(seqnos) - 1)
        if scan.header.seqno != seqno:
            raise Corruption(f"{path}: header says sequence number {scan.header.seqno}, the name says {seqno}")
        if tablet_id is not None and scan.header.tablet_id != tablet_id:
            other = scan.header.tablet_id
            raise Corruption(f"{path}: segment belongs to tablet {other!r}, the earlier ones to {tablet_id!r}")
        tablet_id = scan.header.tablet_id
        footer = replay.segment(scan, seqno)
        if scan.footer is not None and scan.footer != footer:
            raise Corruption(f"{path}: footer says {scan.footer} but the segment holds {footer}")
        report = SegmentReport(
            seqno,
            path,
            tablet_id,
            scan.size,
            scan.footer is not None,
            len(scan.batches),
            footer.num_entries,
            footer.min_index,
            footer.max_index,
            scan.torn_offset,
        )
        if with_records:
            for batch in scan.batches:
                for record in iter_records(batch.payload, f"{path}: batch at byte offset {batch.offset}"):
                    kind = "entry" if record.kind == KIND_ENTRY else "truncate"
                    report.records.append(
                        RecordInfo(kind, record.term, record.op_index, record.type, record.length, batch.offset)
                    )
        yield report
