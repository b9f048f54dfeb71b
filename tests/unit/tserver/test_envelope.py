"""The Raft payload envelope: a kind byte, then row operations or a schema change."""

from __future__ import annotations

import pytest

from nyala.common.errors import Corruption
from nyala.schema import ColumnSchema
from nyala.tserver.envelope import AlterPayload, WritePayload, decode_payload, encode_alter, encode_write

from .conftest import SCHEMA


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
