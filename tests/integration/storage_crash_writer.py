"""Applies entries to one tablet forever, printing each applied index; the crash test kills it.

Usage: storage_crash_writer.py DATA_DIR TABLET_ID ROWS_PER_ENTRY [FLUSH_THRESHOLD_ROWS]
Entry i inserts keys [(i-1)*R, i*R) with v=i and upserts the first half of entry i-1's keys
with v=i, so the expected rows for any applied index are easy to compute.  With a flush
threshold the new keys are upserted too (same rows): an entry of one operation type applied
alone goes to the MemRowSet, which then flushes in its own thread.
"""

from __future__ import annotations

import dataclasses
import random
import sys

from nyala.errors import NotFound
from nyala.schema import ColumnSchema, OpType, Schema, make_row_operations
from nyala.storage import ApplyEntry, StorageOptions, TabletStoreManager

SCHEMA = Schema.of(
    [ColumnSchema.of("id", "int64", nullable=False), ColumnSchema.of("v", "int64"), ColumnSchema.of("pad", "string")],
    ["id"],
)


def entry(i: int, r: int, new_keys_op: OpType) -> bytes:
    rows = [{"id": k, "v": i, "pad": "x" * 40} for k in range((i - 1) * r, i * r)]
    ops = [new_keys_op] * len(rows)
    if i > 1:
        rows += [{"id": k, "v": i, "pad": "y" * 40} for k in range((i - 2) * r, (i - 2) * r + r // 2)]
        ops += [OpType.UPSERT] * (r // 2)
    return make_row_operations(SCHEMA, ops, rows)


def main() -> None:
    data_dir, tablet_id, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
    options, new_keys_op = StorageOptions(storage_threads=1), OpType.INSERT
    if len(sys.argv) > 4:
        options, new_keys_op = dataclasses.replace(options, flush_threshold_rows=int(sys.argv[4])), OpType.UPSERT
    manager = TabletStoreManager(data_dir, options)
    try:
        store = manager.open_tablet(tablet_id)
    except NotFound:
        store = manager.create_tablet(tablet_id, SCHEMA)
    rng = random.Random(store.applied_index())
    i = store.applied_index() + 1
    while True:
        group = [ApplyEntry(i + j, entry(i + j, r, new_keys_op)) for j in range(rng.randint(1, 3))]
        for result in store.apply(group):
            if result.row_failures or result.error is not None:
                raise SystemExit(f"unexpected result {result}")
        i += len(group)
        print(store.durable_index(), flush=True)


if __name__ == "__main__":
    main()
