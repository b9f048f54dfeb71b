"""``nyala local-replica``: reading peers for rewrite-raft-config (the commands run in tests/integration)."""

from __future__ import annotations

import pytest

from nyala.errors import InvalidArgument
from nyala.tools.cmd_local_replica import parse_peer

UUID = "0123456789abcdef0123456789abcdef"


def test_a_peer_is_a_uuid_with_an_optional_address() -> None:
    assert parse_peer(UUID) == UUID
    assert parse_peer(f"{UUID}:127.0.0.1:7050") == UUID
    assert parse_peer(f" {UUID}:ts-1.example.com:7050 ") == UUID


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ts-1:127.0.0.1:7050", "expected UUID\\[:HOST:PORT\\] with a 32-hex-digit server uuid"),
        (UUID.upper(), "32-hex-digit server uuid"),
        (f"{UUID}:127.0.0.1", "has no port"),
        (f"{UUID}:127.0.0.1:x", "port 'x' is not a number"),
    ],
)
def test_a_bad_peer_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_peer(text)
