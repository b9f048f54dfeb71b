"""Shared schema and helpers for the tablet server's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from nyala.schema import ColumnSchema, Partitioner, PartitionSchema, Schema
from nyala.storage import StorageOptions, TabletStoreManager
from nyala.tserver.metadata import DataState, TabletMetadata

SCHEMA = Schema.of(
    [
        ColumnSchema.of("id", "int64", nullable=False),
        ColumnSchema.of("v", "double"),
        ColumnSchema.of("s", "string"),
    ],
    ["id"],
)


def metadata(tablet_id: str = "tablet-1", schema: Schema = SCHEMA) -> TabletMetadata:
    partition_schema = PartitionSchema()
    return TabletMetadata(
        tablet_id=tablet_id,
        table_id="table-1",
        table_name="t",
        partition=Partitioner(schema, partition_schema).partitions[0],
        partition_schema=partition_schema,
        schema=schema,
        schema_version=0,
        data_state=DataState.READY,
    )


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[TabletStoreManager]:
    with TabletStoreManager(str(tmp_path / "stores"), StorageOptions(storage_threads=1)) as manager:
        yield manager


class ListScanner:
    """A store scanner over fixed batches that records whether it was closed."""

    def __init__(self, batches: list[pa.RecordBatch]) -> None:
        self.batches = batches
        self.closed = False

    @property
    def schema(self) -> pa.Schema:
        return self.batches[0].schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        yield from self.batches

    def read_all(self) -> pa.Table:
        return pa.Table.from_batches(self.batches)

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> ListScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def batches(*sizes: int) -> list[pa.RecordBatch]:
    out, start = [], 0
    for n in sizes:
        ids = pa.array(range(start, start + n), pa.int64())
        out.append(pa.record_batch({"id": ids, "v": pa.array([float(i) for i in range(n)])}))
        start += n
    return out
