"""Reading a whole segment file and deciding what its bytes mean (Kudu's ScanForValidEntryHeaders).

The scan walks batches from the header on.  It stops at the footer of a closed segment, or at
the first place where no valid batch starts.  What that place means:

- all zero bytes from there on, in the last segment: preallocated space, the normal end;
- anything else in the last segment, with no valid batch anywhere after it: a torn write from
  a crash (the last group commit never finished), reported as ``torn_offset`` so recovery
  truncates it;
- a valid batch somewhere after it, or any damage in a closed segment (one with a footer) or
  in a segment that is not the last: Corruption naming the file and the byte offset.  Data that
  was once acknowledged is never dropped silently.

Because a group commit writes exactly one batch and the next group is only written after the
previous one was synced, a valid batch after damage proves the damage hit synced data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nyala.errors import Corruption, IOFailure
from nyala.wal.format import (
    BATCH_HEADER_SIZE,
    BATCH_MAGIC,
    FOOTER_SIZE,
    Footer,
    SegmentHeader,
    decode_segment_header,
    find_footer,
    valid_batch_at,
)

__all__ = ["ScannedBatch", "SegmentScan", "read_segment_file", "scan_segment"]


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """A batch whose CRCs matched: its offset in the file and its payload."""

    offset: int
    payload: memoryview


@dataclass(slots=True)
class SegmentScan:
    """What a segment file holds; ``valid_end`` is where the last valid batch ends."""

    path: str
    size: int
    header: SegmentHeader
    footer: Footer | None
    batches: list[ScannedBatch] = field(default_factory=list)
    valid_end: int = 0
    torn_offset: int | None = None


def read_segment_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise IOFailure(f"{path}: cannot read segment: {exc.strerror}") from exc


def scan_segment(path: str, data: bytes, is_last: bool) -> SegmentScan:
    """Check every CRC of a segment and classify its end; see the module docstring for the rules."""
    header = decode_segment_header(data, path)
    found = find_footer(data, header.size)
    footer, end = (found[0], found[1]) if found else (None, len(data))
    if footer is None and not is_last:
        raise Corruption(
            f"{path}: no valid footer at byte offset {max(len(data) - FOOTER_SIZE, 0)} but this is not the last segment"
        )
    scan = SegmentScan(path, len(data), header, footer)
    view = memoryview(data)
    pos = header.size
    while pos < end:
        length = valid_batch_at(data, pos, end)
        if length is None:
            break
        start = pos + BATCH_HEADER_SIZE
        scan.batches.append(ScannedBatch(pos, view[start : start + length]))
        pos = start + length
    scan.valid_end = pos
    if pos < end:
        _classify_damage(scan, data, pos, end, is_last)
    return scan


def _classify_damage(scan: SegmentScan, data: bytes, pos: int, end: int, is_last: bool) -> None:
    if scan.footer is not None:
        raise Corruption(f"{scan.path}: damaged batch at byte offset {pos} inside a closed segment")
    if _all_zero(data, pos, end):
        return  # preallocated space after the last batch
    later = _next_valid_batch(data, pos, end)
    if later is not None:
        raise Corruption(
            f"{scan.path}: damaged batch at byte offset {pos} is followed by a valid batch at byte offset {later}"
        )
    if not is_last:  # pragma: no cover - a non-last segment without footer was refused above
        raise Corruption(f"{scan.path}: damaged batch at byte offset {pos} in a segment that is not the last")
    scan.torn_offset = pos


def _all_zero(data: bytes, pos: int, end: int) -> bool:
    chunk = 1 << 20
    zeros = bytes(chunk)
    view = memoryview(data)
    for start in range(pos, end, chunk):
        stop = min(start + chunk, end)
        if view[start:stop] != zeros[: stop - start]:
            return False
    return True


def _next_valid_batch(data: bytes, pos: int, end: int) -> int | None:
    candidate = data.find(BATCH_MAGIC, pos + 1, end)
    while candidate != -1:
        if valid_batch_at(data, candidate, end) is not None:
            return candidate
        candidate = data.find(BATCH_MAGIC, candidate + 1, end)
    return None
