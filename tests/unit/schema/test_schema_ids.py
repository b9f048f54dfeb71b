"""Column ids are never reused, whatever is dropped and added, and survive the JSON form."""

from __future__ import annotations

import pyarrow as pa

from nyala.schema import ColumnSchema, ColumnType, OpType, Schema, decode_row_operations, make_row_operations


def base() -> Schema:
    return Schema.of(
        [
            ColumnSchema.of("id", ColumnType.parse("int64"), nullable=False),
            ColumnSchema.of("v", ColumnType.parse("string")),
        ],
        ["id"],
    )


def test_dropping_the_highest_column_then_adding_one_takes_a_fresh_id() -> None:
    schema = base()
    dropped_id = schema.column("v").id
    schema = schema.drop_column("v")
    schema = schema.add_column(ColumnSchema.of("w", ColumnType.parse("string")))
    assert schema.column("w").id > dropped_id


def test_next_column_id_survives_json_across_separate_alters() -> None:
    schema = base().drop_column("v")
    reloaded = Schema.from_json(schema.to_json())  # as the catalog stores it between two alters
    assert reloaded.next_column_id == schema.next_column_id
    added = reloaded.add_column(ColumnSchema.of("w", ColumnType.parse("string")))
    assert added.column("w").id == schema.next_column_id
    assert added.next_column_id == schema.next_column_id + 1


def test_make_row_operations_takes_a_multi_chunk_arrow_table() -> None:
    schema = base()
    table = pa.concat_tables(
        [
            pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}),
            pa.table({"id": pa.array([2], pa.int64()), "v": ["b"]}),
        ]
    )
    assert table.column("id").num_chunks == 2
    decoded = decode_row_operations(make_row_operations(schema, OpType.INSERT, table), schema)
    assert decoded.data.column("id").to_pylist() == [1, 2]
