"""The Raft payload envelope: a kind byte, then row operations or a schema change."""

from __future__ import annotations

import pytest

from nyala.errors import Corruption
from nyala.schema import ColumnSchema
from nyala.tserver.envelope import (
    AlterPayload,
    JoinedPayload,
    JoinedWrite,
    PayloadKind,
    RequestId,
    WritePayload,
    decode_payload,
    encode_alter,
    encode_joined,
    encode_tracked_write,
    encode_write,
)

from .conftest import SCHEMA


def test_the_kind_numbers_are_those_in_existing_logs() -> None:
    # A WAL written before any change to the kinds must still decode: the numbers never change.
    assert {k.name: int(k) for k in PayloadKind} == {
        "WRITE": 1,
        "ALTER": 2,
        "TRACKED_WRITE": 3,
        "JOINED_WRITE": 4,
        "CHECKSUM": 5,
    }


def test_write_payload_keeps_the_client_bytes_unchanged() -> None:
    body = b"arrow ipc bytes"
    payload = encode_write(memoryview(body))
    assert payload[0] == 1
    assert decode_payload(payload) == WritePayload(body)


def test_alter_payload_round_trips_schema_and_version() -> None:
    schema = SCHEMA.add_column(ColumnSchema.of("extra", "int32"))
    decoded = decode_payload(encode_alter(schema, 7))
    assert decoded == AlterPayload(schema, 7)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty payload"),
        (b"\x09abc", "unknown payload kind 9"),
        (b"\x02{not json", "unreadable schema change"),
        (b'\x02{"schema": {"columns": []}, "version": 1}', "unreadable schema change"),
    ],
)
def test_payloads_this_server_never_writes_are_corruption(payload: bytes, message: str) -> None:
    with pytest.raises(Corruption, match=message):
        decode_payload(payload)


def test_joined_payload_round_trips_every_writes_header() -> None:
    rid = RequestId("client-1", 5, 3)
    writes = (JoinedWrite(2), JoinedWrite(3, rid, (0, 4)), JoinedWrite(1, RequestId("c", 1, 0)))
    payload = encode_joined(writes, b"one arrow stream")
    assert payload[0] == 4
    assert decode_payload(payload) == JoinedPayload(b"one arrow stream", writes)


@pytest.mark.parametrize("cut", [1, 3, 6, 20])
def test_a_truncated_joined_payload_is_corruption(cut: int) -> None:
    payload = encode_joined([JoinedWrite(2, RequestId("client-1", 5, 3), (1,))], b"")
    with pytest.raises(Corruption, match="joined write"):
        decode_payload(payload[:cut])


def test_row_operations_are_views_of_the_entry_not_copies() -> None:
    """Every replica decodes every entry, often a megabyte of rows: slicing would copy them."""
    body = b"x" * 100_000
    payloads = [
        encode_write(body),
        encode_tracked_write(RequestId("client-1", 5, 3), (1, 2), body),
        encode_joined([JoinedWrite(2)], body),
    ]
    for payload in payloads:
        decoded = decode_payload(payload)
        assert isinstance(decoded, WritePayload | JoinedPayload)
        rows = decoded.row_operations
        assert isinstance(rows, memoryview)
        assert rows.obj is payload
        assert rows == body
