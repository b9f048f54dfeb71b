"""The payload of a tablet's Raft WRITE entries: one kind byte, then the body.

- kind 1, row operations: the body is the row-operation bytes (an Arrow IPC stream, see
  :mod:`nyala.schema.rowops`) exactly as the client sent them, or the subset of rows that
  fall in the tablet's partition when some did not;
- kind 2, alter schema: the body is ``{"schema": Schema.to_dict(), "version": n}`` as JSON.

The kind byte lets one log carry both, applied in log order, so every replica changes its
schema at the same point between the same writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nyala.common.errors import Corruption, InvalidArgument
from nyala.schema import Schema

__all__ = ["AlterPayload", "WritePayload", "decode_payload", "encode_alter", "encode_write"]

KIND_WRITE = 1
KIND_ALTER = 2
_WRITE_PREFIX = bytes([KIND_WRITE])
_ALTER_PREFIX = bytes([KIND_ALTER])


@dataclass(frozen=True, slots=True)
class WritePayload:
    """Row operations to apply (still encoded; the store decodes them against its schema)."""

    row_operations: bytes


@dataclass(frozen=True, slots=True)
class AlterPayload:
    """A schema change to ``schema`` at ``version``."""

    schema: Schema
    version: int


def encode_write(row_operations: bytes | memoryview) -> bytes:
    return _WRITE_PREFIX + row_operations


def encode_alter(schema: Schema, version: int) -> bytes:
    body = json.dumps({"schema": schema.to_dict(), "version": version}, separators=(",", ":"), sort_keys=True)
    return _ALTER_PREFIX + body.encode()


def decode_payload(payload: bytes) -> WritePayload | AlterPayload:
    """Split an entry's payload; Corruption when it is not one this server writes."""
    if not payload:
        raise Corruption("tablet log entry has an empty payload")
    kind = payload[0]
    if kind == KIND_WRITE:
        return WritePayload(payload[1:])
    if kind == KIND_ALTER:
        try:
            body = json.loads(payload[1:])
            return AlterPayload(Schema.from_dict(body["schema"]), int(body["version"]))
        except (ValueError, KeyError, TypeError, InvalidArgument) as e:
            raise Corruption(f"tablet log entry holds an unreadable schema change: {e}") from e
    raise Corruption(f"tablet log entry has unknown payload kind {kind}")
