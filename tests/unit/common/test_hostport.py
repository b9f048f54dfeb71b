"""Address parsing as the CLI and catalog spell addresses."""

from __future__ import annotations

import pytest

from nyala.common.hostport import HostPort, parse_address, parse_address_list
from nyala.errors import InvalidArgument


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:7051", HostPort("127.0.0.1", 7051)),
        (" node-1.example:80 ", HostPort("node-1.example", 80)),
        ("[::1]:7050", HostPort("::1", 7050)),
        (("10.0.0.1", 9), HostPort("10.0.0.1", 9)),
    ],
)
def test_parses_host_and_port(text, expected: HostPort) -> None:
    assert parse_address(text) == expected


def test_default_port_applies_only_when_missing() -> None:
    assert parse_address("master-1", default_port=7051) == HostPort("master-1", 7051)
    assert parse_address("master-1:1", default_port=7051) == HostPort("master-1", 1)


def test_prints_ipv6_in_brackets() -> None:
    assert str(HostPort("::1", 7050)) == "[::1]:7050"
    assert str(HostPort("a", 1)) == "a:1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("host", "has no port"),
        ("host:http", "is not a number"),
        (":7051", "empty host"),
        ("host:70000", "out of range"),
        ("[::1:7050", "unterminated"),
    ],
)
def test_bad_addresses_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_address(text)


def test_comma_separated_lists_like_kudu_tools() -> None:
    assert parse_address_list("a:1, b:2,,c:3") == [HostPort("a", 1), HostPort("b", 2), HostPort("c", 3)]
    with pytest.raises(InvalidArgument, match="at least one address"):
        parse_address_list(" , ")
