"""Nyala's exception tree, split by who must act.

::

    NyalaError
    ├── InvalidArgument            the caller sent something wrong; retrying will not help
    ├── NotFound                   the named thing does not exist
    ├── AlreadyPresent             the thing to create exists already
    ├── IllegalState               the request is valid but not now (e.g. the table is being deleted)
    ├── Aborted                    the operation was abandoned (e.g. a config change lost its CAS)
    ├── RetriableError             try again, maybe elsewhere; ``retriable`` is True
    │   ├── ServiceUnavailable     the server is starting, overloaded or shutting down
    │   ├── NotTheLeader           ask another replica; carries ``leader_hint`` when known
    │   ├── TimedOut               the deadline passed; the outcome may be unknown
    │   └── NetworkError           the connection failed or dropped; the outcome may be unknown
    ├── StorageError               the data on disk is damaged or unreadable
    │   ├── Corruption             checksums or structure do not match; never served
    │   └── IOFailure              the operating system refused a read or a write
    └── InternalError              a bug on the remote side ("this should never happen")

On the wire an error travels as a status code and a message; ``nyala.rpc.status`` maps
codes to these classes in both directions, in one place.  A broken internal invariant is an
``AssertionError``, never one of these, and is never swallowed.

This module is layer 0 and pure, so every package, the Raft core and the placement
algorithms included, raises from it; ``from nyala.errors import ...`` is the tree's one
import path.
"""

from __future__ import annotations

__all__ = [
    "Aborted",
    "AlreadyPresent",
    "Corruption",
    "IOFailure",
    "IllegalState",
    "InternalError",
    "InvalidArgument",
    "NetworkError",
    "NotFound",
    "NotTheLeader",
    "NyalaError",
    "RetriableError",
    "ServiceUnavailable",
    "StorageError",
    "TimedOut",
]


class NyalaError(Exception):
    """Root of every error Nyala raises on purpose."""

    retriable: bool = False


class InvalidArgument(NyalaError):
    """The request is malformed, oversized or does not match the schema."""


class NotFound(NyalaError):
    """A table, tablet, column, server or scanner with that name or id does not exist."""


class AlreadyPresent(NyalaError):
    """The thing to be created already exists (a table name, a primary key on INSERT)."""


class IllegalState(NyalaError):
    """The request is well formed but cannot be served in the current state."""


class Aborted(NyalaError):
    """The operation was abandoned before taking effect."""


class RetriableError(NyalaError):
    """A transient condition: the same request may succeed later or on another server."""

    retriable = True


class ServiceUnavailable(RetriableError):
    """The server cannot take the request now (starting, overloaded, shutting down)."""


class NotTheLeader(RetriableError):
    """The request must go to the leader replica; ``leader_hint`` names it when known."""

    def __init__(self, message: str, leader_hint: str = "") -> None:
        super().__init__(message)
        self.leader_hint = leader_hint


class TimedOut(RetriableError):
    """The deadline passed before the operation finished; it may or may not have taken effect."""


class NetworkError(RetriableError):
    """Connecting failed or the connection dropped while a call was in flight."""


class StorageError(NyalaError):
    """Data on disk cannot be used."""


class Corruption(StorageError):
    """Checksums or structure do not match what was written; the data is never served."""


class IOFailure(StorageError):
    """The operating system failed a read, write or sync."""


class InternalError(NyalaError):
    """A bug: an unexpected exception on the remote side, reported with its message."""
