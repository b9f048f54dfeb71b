"""Streams a scan's Arrow batches from its own DuckDB connection.

Each read runs through the tablet's :class:`Guard`, so a storage error met while streaming
fails the tablet exactly as one met by a write does.  The scanner gets that guard, not the
tablet, and so does not depend on the store that creates it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import duckdb
import pyarrow as pa

__all__ = ["DuckDBScanner", "Guard"]

T = TypeVar("T")


class Guard(Protocol):
    """Runs a DuckDB action for a tablet; a storage error fails the tablet and is raised."""

    def __call__(self, what: str, action: Callable[[], T], /) -> T: ...


class DuckDBScanner:
    """Streams one query's batches; the query's snapshot lasts until the scanner is closed."""

    def __init__(
        self,
        guard: Guard,
        cursor: duckdb.DuckDBPyConnection,
        reader: pa.RecordBatchReader,
        schema: pa.Schema,
    ) -> None:
        self._guard = guard
        self._cursor = cursor
        self._reader = reader
        self._schema = schema
        # DuckDB marks every field nullable; only a type difference (timestamps) needs a cast.
        self._cast = reader.schema.types != schema.types
        self._open = True

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            while self._open:
                batch = self._guard("scan", self._next)
                if batch is None:
                    break
                yield batch
        finally:
            self.close()

    def _next(self) -> pa.RecordBatch | None:
        try:
            batch = self._reader.read_next_batch()
        except StopIteration:
            return None
        if self._cast:
            return batch.cast(self._schema)
        return pa.RecordBatch.from_arrays(batch.columns, schema=self._schema)  # relabel, no copy

    def read_all(self) -> pa.Table:
        """The remaining rows as one table (read in C++, faster than iterating)."""
        if not self._open:
            return self._schema.empty_table()
        try:
            table = self._guard("scan", self._reader.read_all)
        finally:
            self.close()
        if self._cast:
            return table.cast(self._schema)
        return pa.Table.from_arrays(table.columns, schema=self._schema)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._reader.close()
            self._cursor.close()

    def __enter__(self) -> DuckDBScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
