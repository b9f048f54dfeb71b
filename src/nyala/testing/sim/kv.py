"""The replicated key-value state machine the simulated clients use.

A WRITE entry's payload ``key=value`` sets a key; other payloads (scenario tests propose
arbitrary commands) are applied as no-ops.  Values written by clients are unique, which keeps
linearizability checking cheap.
"""

from __future__ import annotations

__all__ = ["apply_write", "encode_put"]


def encode_put(key: str, value: str) -> bytes:
    return f"{key}={value}".encode()


def apply_write(kv: dict[str, str], payload: bytes) -> None:
    key, sep, value = payload.decode("utf-8", "replace").partition("=")
    if sep:
        kv[key] = value
