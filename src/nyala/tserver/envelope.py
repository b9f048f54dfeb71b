"""The payload of a tablet's Raft WRITE entries: one kind byte (:class:`PayloadKind`), then the body.

- ``WRITE`` (1), row operations: the body is the row-operation bytes (an Arrow IPC stream,
  see :mod:`nyala.schema.rowops`) exactly as the client sent them, or the subset of rows that
  fall in the tablet's partition when some did not;
- ``ALTER`` (2), alter schema: the body is ``{"schema": Schema.to_dict(), "version": n}`` as
  JSON;
- ``TRACKED_WRITE`` (3), tracked row operations: a write with a request id (exactly-once).  A
  fixed header (client id length, sequence number, first incomplete sequence number, number
  of dropped rows), the client id, the positions of the rows the leader dropped as outside
  the tablet's partition, then the row operations as in ``WRITE``.  Every replica records the
  write's answer under its request id when it applies the entry, so whichever replica leads
  next can answer a retry without applying it again;
- ``JOINED_WRITE`` (4), joined writes: several client writes the leader received at the same
  time, joined into one entry so that every replica decodes, checks and applies them once.  A
  count, then per write a fixed header (has a request id, row count, client id length,
  sequence number, first incomplete sequence number, number of dropped rows), its client id
  and dropped row positions; then ONE row-operations stream holding every write's rows in
  order.  Applying the rows in order is applying the writes one after another, so the outcome
  is the same;
- ``CHECKSUM`` (5), a checksum marker: no body.  It changes no row; every replica that applies
  it takes a snapshot of its rows at that point of the log and checksums it in the background
  (ksck's checksum scan, see :mod:`nyala.tserver.checksum`).  Being in the log, it falls
  between the same writes on every replica.

The kind byte lets one log carry writes and schema changes, applied in log order, so every
replica changes its schema at the same point between the same writes.  The numbers are part
of the WAL's format: a log written by an earlier version must still decode, so a kind keeps
its number forever and a new kind takes a new one.
"""

from __future__ import annotations

import enum
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from nyala.errors import Corruption, InvalidArgument
from nyala.schema import Schema

__all__ = [
    "AlterPayload",
    "ChecksumPayload",
    "JoinedPayload",
    "JoinedWrite",
    "PayloadKind",
    "RequestId",
    "WritePayload",
    "decode_payload",
    "encode_alter",
    "encode_checksum",
    "encode_joined",
    "encode_tracked_write",
    "encode_write",
]


class PayloadKind(enum.IntEnum):
    """The first byte of a WRITE entry's payload: what its body holds (fixed numbers, see above)."""

    WRITE = 1
    ALTER = 2
    TRACKED_WRITE = 3
    JOINED_WRITE = 4
    CHECKSUM = 5


_WRITE_PREFIX = bytes([PayloadKind.WRITE])
_ALTER_PREFIX = bytes([PayloadKind.ALTER])
# client id length, seq_no, first_incomplete_seq_no, number of dropped rows
_TRACKED_HEADER = struct.Struct("<HqqI")
_COUNT = struct.Struct("<I")
# has a request id, rows, client id length, seq_no, first_incomplete_seq_no, number of dropped rows
_JOINED_HEADER = struct.Struct("<BIHqqI")


@dataclass(frozen=True, slots=True)
class RequestId:
    """Who sent a write and which of its writes it is (see RequestIdPB)."""

    client_id: str
    seq_no: int
    first_incomplete_seq_no: int


@dataclass(frozen=True, slots=True)
class WritePayload:
    """Row operations to apply (still encoded; the store decodes them against its schema).

    For a tracked write, ``request_id`` names it and ``dropped_rows`` are the positions, in
    the client's batch, of the rows the leader answered itself (outside the partition)."""

    row_operations: bytes | memoryview
    request_id: RequestId | None = None
    dropped_rows: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterPayload:
    """A schema change to ``schema`` at ``version``."""

    schema: Schema
    version: int


@dataclass(frozen=True, slots=True)
class ChecksumPayload:
    """A checksum marker: checksum the rows as they are once every earlier entry is applied."""


@dataclass(frozen=True, slots=True)
class JoinedWrite:
    """One client write inside a joined entry: the next ``rows`` rows of the entry's stream."""

    rows: int
    request_id: RequestId | None = None
    dropped_rows: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class JoinedPayload:
    """Client writes joined into one entry; ``row_operations`` holds all their rows, in order."""

    row_operations: bytes | memoryview
    writes: tuple[JoinedWrite, ...]


def encode_write(row_operations: bytes | memoryview) -> bytes:
    return _WRITE_PREFIX + row_operations


def encode_tracked_write(
    request_id: RequestId, dropped_rows: Sequence[int], row_operations: bytes | memoryview
) -> bytes:
    client = request_id.client_id.encode()
    header = _TRACKED_HEADER.pack(len(client), request_id.seq_no, request_id.first_incomplete_seq_no, len(dropped_rows))
    dropped = struct.pack(f"<{len(dropped_rows)}i", *dropped_rows)
    return b"".join((bytes([PayloadKind.TRACKED_WRITE]), header, client, dropped, row_operations))


def encode_joined(writes: Sequence[JoinedWrite], row_operations: bytes) -> bytes:
    parts = [bytes([PayloadKind.JOINED_WRITE]), _COUNT.pack(len(writes))]
    for write in writes:
        rid = write.request_id
        client = rid.client_id.encode() if rid is not None else b""
        seq, first = (rid.seq_no, rid.first_incomplete_seq_no) if rid is not None else (0, 0)
        dropped = write.dropped_rows
        parts.append(_JOINED_HEADER.pack(rid is not None, write.rows, len(client), seq, first, len(dropped)))
        parts.append(client)
        parts.append(struct.pack(f"<{len(dropped)}i", *dropped))
    parts.append(row_operations)
    return b"".join(parts)


def encode_alter(schema: Schema, version: int) -> bytes:
    body = json.dumps({"schema": schema.to_dict(), "version": version}, separators=(",", ":"), sort_keys=True)
    return _ALTER_PREFIX + body.encode()


def encode_checksum() -> bytes:
    return bytes([PayloadKind.CHECKSUM])


def decode_payload(payload: bytes) -> WritePayload | JoinedPayload | AlterPayload | ChecksumPayload:
    """Split an entry's payload; Corruption when it is not one this server writes.

    The row operations are a view of ``payload``, not a copy: a slice of bytes copies it, and
    an entry's rows are often a megabyte, decoded on every replica."""
    if not payload:
        raise Corruption("tablet log entry has an empty payload")
    try:
        kind = PayloadKind(payload[0])
    except ValueError:
        raise Corruption(f"tablet log entry has unknown payload kind {payload[0]}") from None
    if kind is PayloadKind.WRITE:
        return WritePayload(memoryview(payload)[1:])
    if kind is PayloadKind.TRACKED_WRITE:
        return _decode_tracked(payload)
    if kind is PayloadKind.JOINED_WRITE:
        return _decode_joined(payload)
    if kind is PayloadKind.CHECKSUM:
        if len(payload) != 1:
            raise Corruption(f"tablet log entry holds a checksum marker with {len(payload) - 1} unexpected bytes")
        return ChecksumPayload()
    if kind is PayloadKind.ALTER:
        try:
            body = json.loads(payload[1:])
            return AlterPayload(Schema.from_dict(body["schema"]), int(body["version"]))
        except (ValueError, KeyError, TypeError, InvalidArgument) as e:
            raise Corruption(f"tablet log entry holds an unreadable schema change: {e}") from e
    assert_never(kind)


def _decode_tracked(payload: bytes) -> WritePayload:
    offset = 1 + _TRACKED_HEADER.size
    try:
        client_len, seq_no, first_incomplete, n_dropped = _TRACKED_HEADER.unpack_from(payload, 1)
        client = payload[offset : offset + client_len].decode()
        offset += client_len
        dropped = struct.unpack_from(f"<{n_dropped}i", payload, offset)
    except (struct.error, UnicodeDecodeError) as e:
        raise Corruption(f"tablet log entry holds an unreadable write header: {e}") from e
    offset += 4 * n_dropped
    return WritePayload(memoryview(payload)[offset:], RequestId(client, seq_no, first_incomplete), tuple(dropped))


def _decode_joined(payload: bytes) -> JoinedPayload:
    writes: list[JoinedWrite] = []
    try:
        (count,) = _COUNT.unpack_from(payload, 1)
        offset = 1 + _COUNT.size
        for _ in range(count):
            has_id, rows, client_len, seq_no, first, n_dropped = _JOINED_HEADER.unpack_from(payload, offset)
            offset += _JOINED_HEADER.size
            client = payload[offset : offset + client_len].decode()
            offset += client_len
            dropped = struct.unpack_from(f"<{n_dropped}i", payload, offset)
            offset += 4 * n_dropped
            rid = RequestId(client, seq_no, first) if has_id else None
            writes.append(JoinedWrite(rows, rid, tuple(dropped)))
    except (struct.error, UnicodeDecodeError) as e:
        raise Corruption(f"tablet log entry holds unreadable joined write headers: {e}") from e
    if not writes or offset > len(payload):
        raise Corruption("tablet log entry holds a joined write without writes or rows")
    return JoinedPayload(memoryview(payload)[offset:], tuple(writes))
