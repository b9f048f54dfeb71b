"""The tablet store interface: small on purpose, so another engine could replace DuckDB.

A row an entry could not apply is a :class:`~nyala.schema.RowFailure` (its position in the
entry's batch and the error), the same value the tablet server answers Write with; the
``RowError`` a client's user sees is built from it on the client, which alone holds the row's
values (see :mod:`nyala.schema.rowops`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Protocol

import pyarrow as pa

from nyala.errors import NyalaError
from nyala.schema import KeyRange, Predicate, RowFailure, Schema

__all__ = ["ApplyEntry", "EntryResult", "ScanSpec", "Scanner", "TabletSnapshot", "TabletStore"]


@dataclasses.dataclass(frozen=True, slots=True)
class ApplyEntry:
    """One committed Raft entry: its index and its row-operations payload."""

    index: int
    payload: bytes | memoryview


@dataclasses.dataclass(slots=True)
class EntryResult:
    """What applying one entry did.  ``error`` is set when the whole payload was rejected.

    ``row_failures`` are the rows not applied, by position in the entry's batch, in order:
    AlreadyPresent (INSERT) or NotFound (UPDATE, DELETE)."""

    index: int
    row_failures: list[RowFailure] = dataclasses.field(default_factory=list)
    error: NyalaError | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ScanSpec:
    """What to read.  Predicates must be bound to the tablet's schema (``Predicate.bind``)."""

    projection: Sequence[str] | None = None  # None: every column, in schema order
    predicates: Sequence[Predicate] = ()
    key_range: KeyRange | None = None
    limit: int | None = None
    batch_size_rows: int = 65_536
    ordered: bool = False  # primary-key order


class Scanner(Protocol):
    """A stream of record batches over one consistent state of the tablet."""

    @property
    def schema(self) -> pa.Schema: ...

    def __iter__(self) -> Iterator[pa.RecordBatch]: ...

    def read_all(self) -> pa.Table: ...

    def close(self) -> None: ...

    def __enter__(self) -> Scanner: ...

    def __exit__(self, *exc: object) -> None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class TabletSnapshot:
    """Files that recreate a tablet elsewhere, and the Raft index they include."""

    tablet_id: str
    applied_index: int
    schema: Schema
    files: tuple[str, ...]


class TabletStore(Protocol):
    """One tablet's rows.  ``apply``, ``alter_schema``, ``flush``, ``checkpoint`` and
    ``snapshot`` serialise on the tablet; scans run concurrently from any thread.

    ``applied_index`` is what scans see; ``durable_index`` (at most as far) is what survives
    a crash, so the owner replays its log after it on restart."""

    @property
    def tablet_id(self) -> str: ...

    @property
    def schema(self) -> Schema: ...

    def applied_index(self) -> int: ...

    def durable_index(self) -> int: ...

    def apply(self, entries: Sequence[ApplyEntry]) -> list[EntryResult]: ...

    def alter_schema(self, new_schema: Schema, index: int) -> None: ...

    def scan(self, spec: ScanSpec) -> Scanner: ...

    def flush(self, older_than_s: float = 0.0) -> bool: ...

    def checkpoint(self) -> bool: ...

    def snapshot(self, dest_dir: str) -> TabletSnapshot: ...

    def close(self) -> None: ...
