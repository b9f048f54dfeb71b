"""A checksum of a tablet's rows that depends only on the rows, never on how they are stored.

The checksum is the sum, modulo 2**64, of a 64-bit hash of every row, so it does not depend
on the order in which rows come (MemRowSet first or DuckDB first, one row group or another),
and two replicas holding the same rows get the same checksum whatever their MemRowSet, flush
and checkpoint history.  A row's hash is DuckDB's ``hash`` of its column values in schema
order, computed on the scanner's Arrow batches, whose types are the tablet schema's whatever
layer the row came from: DuckDB's hash takes no seed, so it is the same in every process (of
the pinned DuckDB version), and it hashes an integer by value whatever its width.  Kudu's
checksum scan sums a CRC of every row the same way, for the same reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import duckdb
import pyarrow as pa

from .sql import quote

__all__ = ["RowsChecksum", "checksum_batches"]

_MASK = (1 << 64) - 1


@dataclasses.dataclass(frozen=True, slots=True)
class RowsChecksum:
    """How many rows were checksummed and the checksum of them (0 for no rows)."""

    num_rows: int
    checksum: int


def checksum_batches(batches: Iterable[pa.RecordBatch]) -> RowsChecksum:
    """The checksum of the rows of ``batches`` (every column of the tablet, in schema order)."""
    total = rows = 0
    # A private in-memory database with one thread: the tablet server's instance keeps its
    # threads for writes and scans, and a checksum is a background task.
    with duckdb.connect(":memory:", config={"threads": 1}) as conn:
        for batch in batches:
            if not batch.num_rows:
                continue
            conn.register("_nyala_batch", batch)
            columns = ", ".join(quote(name) for name in batch.schema.names)
            ((batch_sum,),) = conn.execute(f"SELECT sum(hash({columns})) FROM _nyala_batch").fetchall()
            conn.unregister("_nyala_batch")
            total = (total + int(batch_sum)) & _MASK
            rows += batch.num_rows
    return RowsChecksum(rows, total)
