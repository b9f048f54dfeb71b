"""Streams a scan's Arrow batches from its own DuckDB connection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

if TYPE_CHECKING:
    from .store import DuckDBTabletStore

__all__ = ["DuckDBScanner"]


class DuckDBScanner:
    """Streams one query's batches; the query's snapshot lasts until the scanner is closed."""

    def __init__(
        self,
        store: DuckDBTabletStore,
        cursor: duckdb.DuckDBPyConnection,
        reader: pa.RecordBatchReader,
        schema: pa.Schema,
    ) -> None:
        self._store = store
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
                batch = self._store._guard("scan", self._next)
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
            table = self._store._guard("scan", self._reader.read_all)
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
