"""Byte layouts of segment files, and their encoders and checking decoders.

All integers are little endian; every CRC is CRC32C (Castagnoli).  A segment file is::

    segment header | batch | batch | ... | [footer, only once the segment is closed]

- Segment header: magic ``nyalawal`` (8), format version u16, tablet id length u16, sequence
  number u64, tablet id (UTF-8), CRC32C of all the preceding header bytes (u32).
- Batch: a 16-byte header (magic ``NYB\\x01``, payload length u32, CRC32C of the payload u32,
  CRC32C of the first 12 header bytes u32) followed by the payload.  One group commit writes
  exactly one batch, so a write torn by a crash damages only the last batch.
- Payload: records back to back, each a 24-byte record header (kind u8, pad u8, type u16,
  data length u32, term u64, index u64) followed by the data.  Kind 1 is an entry; kind 2 is
  a truncation marker whose ``index`` field is N in ``truncate_after(N)``.
- Footer: entry count u64, min index u64, max index u64, CRC32C of those 24 bytes, then the
  magic ``nyalaend`` and the footer length u32 (28), so a reader finds it from the end.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from nyala.errors import Corruption, InvalidArgument
from nyala.wal.entry import LogEntry

__all__ = [
    "BATCH_HEADER_SIZE",
    "BATCH_MAGIC",
    "FOOTER_SIZE",
    "KIND_ENTRY",
    "KIND_TRUNCATE",
    "RECORD_HEADER_SIZE",
    "EncodedAppend",
    "Footer",
    "Record",
    "SegmentHeader",
    "batch_header",
    "decode_segment_header",
    "effective_records",
    "encode_append",
    "encode_entries",
    "encode_footer",
    "encode_segment_header",
    "encode_truncate_marker",
    "find_footer",
    "iter_records",
    "parse_segment_name",
    "segment_name",
    "valid_batch_at",
]

FORMAT_VERSION = 1
SEGMENT_MAGIC = b"nyalawal"
BATCH_MAGIC = b"NYB\x01"
FOOTER_MAGIC = b"nyalaend"
MAX_TABLET_ID_BYTES = 1024

KIND_ENTRY = 1
KIND_TRUNCATE = 2

_U32 = struct.Struct("<I")
_HEADER_FIXED = struct.Struct("<8sHHQ")  # magic, version, tablet id length, seqno
_BATCH_PREFIX = struct.Struct("<4sII")  # magic, payload length, payload CRC
_BATCH_HEADER = struct.Struct("<4sIII")  # ... plus the CRC of the 12 bytes above
_RECORD = struct.Struct("<BxHIQQ")  # kind, type, data length, term, index
_FOOTER_BODY = struct.Struct("<QQQ")  # entry count, min index, max index
_FOOTER_TRAILER = struct.Struct("<8sI")  # magic, footer length

BATCH_HEADER_SIZE = _BATCH_HEADER.size
RECORD_HEADER_SIZE = _RECORD.size
_FOOTER_LEN = _FOOTER_BODY.size + _U32.size
FOOTER_SIZE = _FOOTER_LEN + _FOOTER_TRAILER.size

_SEGMENT_NAME = re.compile(r"wal-(\d{9,})")


def segment_name(seqno: int) -> str:
    """File name of segment ``seqno`` (``wal-000000001``)."""
    return f"wal-{seqno:09d}"


def parse_segment_name(name: str) -> int | None:
    """The sequence number in a segment file name, or None for any other file."""
    match = _SEGMENT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """What a segment says about itself; ``size`` is the header's length in bytes."""

    version: int
    seqno: int
    tablet_id: str
    size: int


def encode_segment_header(seqno: int, tablet_id: str) -> bytes:
    raw_id = tablet_id.encode()
    body = _HEADER_FIXED.pack(SEGMENT_MAGIC, FORMAT_VERSION, len(raw_id), seqno) + raw_id
    return body + _U32.pack(crc32c(body))


def decode_segment_header(data: bytes, where: str) -> SegmentHeader:
    """Parse and check the header at the start of ``data``; Corruption names ``where``."""
    if len(data) < _HEADER_FIXED.size + _U32.size:
        raise Corruption(f"{where}: segment header is truncated ({len(data)} bytes) at byte offset 0")
    magic, version, id_len, seqno = _HEADER_FIXED.unpack_from(data, 0)
    if magic != SEGMENT_MAGIC:
        raise Corruption(f"{where}: bad segment magic {magic!r} at byte offset 0")
    end = _HEADER_FIXED.size + id_len
    if id_len > MAX_TABLET_ID_BYTES or len(data) < end + _U32.size:
        raise Corruption(f"{where}: segment header length {id_len} is impossible at byte offset 10")
    (stored,) = _U32.unpack_from(data, end)
    if stored != crc32c(memoryview(data)[:end]):
        raise Corruption(f"{where}: segment header checksum mismatch at byte offset {end}")
    if version != FORMAT_VERSION:
        raise Corruption(f"{where}: unsupported segment format version {version} at byte offset 8")
    try:
        tablet_id = data[_HEADER_FIXED.size : end].decode()
    except UnicodeDecodeError as exc:
        raise Corruption(f"{where}: tablet id is not UTF-8 at byte offset {_HEADER_FIXED.size}") from exc
    return SegmentHeader(version, seqno, tablet_id, end + _U32.size)


def batch_header(payload: bytes) -> bytes:
    """The 16-byte header framing ``payload``."""
    prefix = _BATCH_PREFIX.pack(BATCH_MAGIC, len(payload), crc32c(payload))
    return prefix + _U32.pack(crc32c(prefix))


def valid_batch_at(data: bytes | memoryview, pos: int, end: int) -> int | None:
    """Payload length of a fully valid batch starting at ``pos`` (ending by ``end``), else None."""
    if pos + BATCH_HEADER_SIZE > end:
        return None
    magic, length, payload_crc, header_crc = _BATCH_HEADER.unpack_from(data, pos)
    if magic != BATCH_MAGIC:
        return None
    view = memoryview(data)
    if header_crc != crc32c(view[pos : pos + 12]):
        return None
    start = pos + BATCH_HEADER_SIZE
    if start + length > end or payload_crc != crc32c(view[start : start + length]):
        return None
    return int(length)


class Record(NamedTuple):
    """One decoded record; ``start`` and ``length`` locate its data in the payload."""

    kind: int
    type: int
    term: int
    op_index: int
    start: int
    length: int


def iter_records(payload: bytes | memoryview, where: str) -> Iterator[Record]:
    """Decode the records of a payload whose CRC already matched; structure errors are Corruption."""
    pos, end = 0, len(payload)
    unpack = _RECORD.unpack_from
    while pos < end:
        if pos + RECORD_HEADER_SIZE > end:
            raise Corruption(f"{where}: record header cut short at payload offset {pos}")
        kind, etype, length, term, index = unpack(payload, pos)
        start = pos + RECORD_HEADER_SIZE
        if kind not in (KIND_ENTRY, KIND_TRUNCATE) or start + length > end:
            raise Corruption(f"{where}: malformed record (kind {kind}) at payload offset {pos}")
        yield Record(kind, etype, term, index, start, length)
        pos = start + length


def effective_records(payload: bytes | memoryview, where: str) -> list[Record]:
    """The entries of one payload after applying the truncation markers inside it, in order."""
    kept: list[Record] = []
    for record in iter_records(payload, where):
        if record.kind == KIND_ENTRY:
            kept.append(record)
        else:
            while kept and kept[-1].op_index > record.op_index:
                kept.pop()
    return kept


class EncodedAppend(NamedTuple):
    """The records of one append as buffers to write back to back (payloads are not copied).

    ``size`` is their total length; ``runs`` are the append's term runs as (first index, term).
    """

    parts: list[bytes]
    size: int
    runs: list[tuple[int, int]]


def encode_entries(entries: Sequence[LogEntry]) -> tuple[bytes, list[tuple[int, int]]]:
    """:func:`encode_append` joined into one bytes object (for tests and tools)."""
    parts, _, runs = encode_append(entries)
    return b"".join(parts), runs


def encode_append(entries: Sequence[LogEntry]) -> EncodedAppend:
    """Encode the record headers of one append; the payloads are referenced, not copied.

    Copying is left to whoever writes the group (the appender thread), so an asyncio caller
    pays only a 24-byte pack per entry, however large the payloads.  Raises InvalidArgument
    for an empty list, a non-entry, non-consecutive indexes, a term that goes down, a
    negative or oversized field, or a payload that is not ``bytes`` (immutable, so a
    reference is safe to keep).
    """
    if len(entries) == 1:  # the common case on the hot path, checked without the loop
        entry = entries[0]
        if (
            type(entry) is LogEntry
            and type(entry.payload) is bytes
            and type(entry.index) is int
            and entry.index >= 1
            and type(entry.term) is int
        ):
            payload = entry.payload
            try:
                header = _RECORD.pack(KIND_ENTRY, entry.type, len(payload), entry.term, entry.index)
            except struct.error:
                pass  # the general path below names the bad field
            else:
                return EncodedAppend([header, payload], RECORD_HEADER_SIZE + len(payload), [(entry.index, entry.term)])
    if not entries:
        raise InvalidArgument("an append needs at least one entry")
    parts: list[bytes] = []
    runs: list[tuple[int, int]] = []
    pack = _RECORD.pack
    expected = _first_index(entries[0])
    last_term = -1
    size = 0
    for entry in entries:
        if type(entry) is not LogEntry:
            raise InvalidArgument(f"expected a LogEntry, got {type(entry).__name__}")
        payload = entry.payload
        if type(payload) is not bytes:
            raise InvalidArgument(f"entry {entry.index}: payload must be bytes, not {type(payload).__name__}")
        if entry.index != expected:
            raise InvalidArgument(f"indexes of one append must be consecutive: {entry.index} follows {expected - 1}")
        if entry.term != last_term:
            if type(entry.term) is int and entry.term < last_term:
                raise InvalidArgument(f"entry {entry.index}: term {entry.term} is below the previous {last_term}")
            runs.append((entry.index, entry.term))
            last_term = entry.term
        try:
            parts.append(pack(KIND_ENTRY, entry.type, len(payload), entry.term, entry.index))
        except struct.error as exc:
            raise InvalidArgument(f"entry {entry.index}: {_field_problem(entry)}") from exc
        parts.append(payload)
        size += RECORD_HEADER_SIZE + len(payload)
        expected += 1
    return EncodedAppend(parts, size, runs)


def _first_index(entry: LogEntry) -> int:
    if type(entry) is not LogEntry:
        raise InvalidArgument(f"expected a LogEntry, got {type(entry).__name__}")
    index = entry.index
    if type(index) is not int or index < 1:
        raise InvalidArgument(f"entry index must be an integer >= 1, got {index!r}")
    return index


def _field_problem(entry: LogEntry) -> str:
    if type(entry.term) is not int or not 0 <= entry.term < 2**64:
        return f"term must be an integer in [0, 2**64), got {entry.term!r}"
    if type(entry.type) is not int or not 0 <= entry.type <= 0xFFFF:
        return f"type must be an integer in [0, 65535], got {entry.type!r}"
    return f"index must be below 2**64 and the payload below 4 GiB (index {entry.index!r})"


def encode_truncate_marker(after_index: int) -> bytes:
    return _RECORD.pack(KIND_TRUNCATE, 0, 0, 0, after_index)


@dataclass(frozen=True, slots=True)
class Footer:
    """What a closed segment says it holds; min and max are 0 when it holds no entry."""

    num_entries: int
    min_index: int
    max_index: int


def encode_footer(footer: Footer) -> bytes:
    body = _FOOTER_BODY.pack(footer.num_entries, footer.min_index, footer.max_index)
    return body + _U32.pack(crc32c(body)) + _FOOTER_TRAILER.pack(FOOTER_MAGIC, _FOOTER_LEN)


def find_footer(data: bytes, header_size: int) -> tuple[Footer, int] | None:
    """The footer of a closed segment and the offset where it starts, or None when there is none."""
    start = len(data) - FOOTER_SIZE
    if start < header_size:
        return None
    magic, length = _FOOTER_TRAILER.unpack_from(data, len(data) - _FOOTER_TRAILER.size)
    if magic != FOOTER_MAGIC or length != _FOOTER_LEN:
        return None
    (stored,) = _U32.unpack_from(data, start + _FOOTER_BODY.size)
    if stored != crc32c(memoryview(data)[start : start + _FOOTER_BODY.size]):
        return None
    return Footer(*_FOOTER_BODY.unpack_from(data, start)), start
