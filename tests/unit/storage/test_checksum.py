"""The rows checksum: the same for the same rows whatever the layout, different otherwise."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pytest

from nyala.schema import ColumnSchema, OpType, Schema, make_row_operations
from nyala.storage import (
    ApplyEntry,
    RowsChecksum,
    ScanSpec,
    StorageOptions,
    TabletStore,
    TabletStoreManager,
    checksum_batches,
)

pytestmark = pytest.mark.timeout(60)

SCHEMA = Schema.of(
    [
        ColumnSchema.of("ts", "timestamp", nullable=False),
        ColumnSchema.of("d", "decimal(12, 3)", nullable=False),
        ColumnSchema.of("b", "binary"),
        ColumnSchema.of("f", "double"),
        ColumnSchema.of("s", "string"),
    ],
    ["ts", "d"],
)
BASE = datetime.datetime(2024, 2, 29, 23, 59, 59, tzinfo=datetime.UTC)


def rows(ids: range, s: str = "s") -> list[dict[str, object]]:
    return [
        {
            "ts": BASE + datetime.timedelta(microseconds=i),
            "d": decimal.Decimal(i).scaleb(-3),
            "b": bytes([i % 256, 0]) if i % 3 else None,
            "f": i / 4,
            "s": f"{s}{i}",
        }
        for i in ids
    ]


def apply(store: TabletStore, index: int, op: OpType, batch: list[dict[str, object]]) -> None:
    (result,) = store.apply([ApplyEntry(index, make_row_operations(SCHEMA, op, batch))])
    assert result.error is None
    assert result.row_failures == []


def checksum(store: TabletStore) -> RowsChecksum:
    with store.scan(ScanSpec()) as scanner:
        return checksum_batches(scanner)


def build(root: Path, flush_threshold_rows: int, flush: bool) -> RowsChecksum:
    """200 rows written in three entries, one row updated, one deleted; then the checksum."""
    options = StorageOptions(storage_threads=1, flush_threshold_rows=flush_threshold_rows)
    with TabletStoreManager(str(root), options) as manager:
        store = manager.create_tablet("t", SCHEMA)
        apply(store, 1, OpType.INSERT, rows(range(100)))
        apply(store, 2, OpType.UPSERT, rows(range(100, 200)))
        apply(store, 3, OpType.UPSERT, rows(range(5, 6), s="changed"))
        if flush:
            store.flush()
        apply(store, 4, OpType.DELETE, [{"ts": BASE, "d": decimal.Decimal(0)}])
        return checksum(store)


def test_the_same_rows_give_the_same_checksum_in_any_layout(tmp_path: Path) -> None:
    in_memory = build(tmp_path / "mrs", flush_threshold_rows=1_000_000, flush=False)
    flushed = build(tmp_path / "flushed", flush_threshold_rows=1_000_000, flush=True)
    on_disk = build(tmp_path / "direct", flush_threshold_rows=0, flush=False)
    assert in_memory.num_rows == 199
    assert in_memory == flushed == on_disk


def test_order_and_batching_do_not_matter_but_values_do() -> None:
    table = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", None, "c"]})
    whole = checksum_batches(table.to_batches())
    assert whole.num_rows == 3
    reversed_split = checksum_batches([*table.slice(2).to_batches(), *table.slice(0, 2).to_batches()])
    assert reversed_split == whole
    changed = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", None, "C"]})
    assert checksum_batches(changed.to_batches()) != whole
    swapped = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", "c", None]})  # same values, other rows
    assert checksum_batches(swapped.to_batches()) != whole
    assert checksum_batches([]) == RowsChecksum(0, 0)
