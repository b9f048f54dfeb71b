"""Shared schema and helpers for the tablet server's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
