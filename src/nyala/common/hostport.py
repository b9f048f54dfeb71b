"""Parsing and printing of ``host:port`` addresses, as the CLI and the catalog write them."""

from __future__ import annotations

from typing import NamedTuple

from nyala.errors import InvalidArgument

__all__ = ["HostPort", "parse_address", "parse_address_list"]


class HostPort(NamedTuple):
    """A network address; IPv6 hosts are printed in brackets."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str | HostPort | tuple[str, int], default_port: int | None = None) -> HostPort:
    """Parse ``host:port`` (or ``[v6]:port``, or ``host`` with a default port) into a HostPort."""
    if isinstance(text, tuple):
        host, port = text
        return _checked(str(host), port, text)
    raw = text.strip()
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep:
            raise InvalidArgument(f"address {text!r}: unterminated '[' in IPv6 host")
        port_text = rest[1:] if rest.startswith(":") else rest
    elif raw.count(":") == 1:
        host, _, port_text = raw.partition(":")
    else:
        host, port_text = raw, ""
    if not port_text:
        if default_port is None:
            raise InvalidArgument(f"address {text!r} has no port; expected host:port")
        return _checked(host, default_port, text)
    if not port_text.isdigit():
        raise InvalidArgument(f"address {text!r}: port {port_text!r} is not a number")
    return _checked(host, int(port_text), text)


def parse_address_list(text: str, default_port: int | None = None) -> list[HostPort]:
    """Parse a comma-separated list of addresses, as Kudu's tools take master addresses."""
    parts = [p for p in (s.strip() for s in text.split(",")) if p]
    if not parts:
        raise InvalidArgument("expected at least one address (comma-separated host:port)")
    return [parse_address(p, default_port) for p in parts]


def _checked(host: str, port: int, original: object) -> HostPort:
    if not host:
        raise InvalidArgument(f"address {original!r} has an empty host")
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"address {original!r}: port {port} is out of range 0-65535")
    return HostPort(host, port)
