"""Schemas, types and row operations: validation errors name the problem; round trips hold."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa
import pytest

from nyala.errors import InvalidArgument
from nyala.schema import (
    ISSET_COLUMN,
    OP_COLUMN,
    ColumnSchema,
    ColumnType,
    KeyRange,
    OpType,
    Predicate,
    RowOperationOptions,
    Schema,
    decode_row_operations,
    encode_row_operations,
    make_row_operations,
)

UTC = datetime.UTC


def col(name: str, type: str, **kw) -> ColumnSchema:
    return ColumnSchema.of(name, type, **kw)


SCHEMA = Schema.of(
    [
        col("id", "int64", nullable=False),
        col("name", "string", nullable=False),
        col("price", "decimal(10, 2)", default=decimal.Decimal("1.50")),
        col("at", "timestamp"),
        col("day", "date"),
        col("blob", "binary"),
        col("ok", "bool", nullable=False, default=True),
        col("f", "float"),
    ],
    ["id", "name"],
)


@pytest.mark.parametrize(
    ("columns", "key", "message"),
    [
        ([col("a", "int64", nullable=False), col("a", "int32")], ["a"], "duplicate column name 'a'"),
        ([col("a", "int64", nullable=False), col("A", "int32")], ["a"], "duplicate column name 'A'"),
        ([col("a", "int64")], ["a"], "primary key column 'a' must not be nullable"),
        ([col("a", "double", nullable=False)], ["a"], "primary key column 'a' cannot be of type double"),
        ([col("a", "int64", nullable=False), col("b", "int8", default=300)], ["a"], "default of column 'b'"),
        ([col("a", "int64", nullable=False), col("b", "string", default=5)], ["a"], "default of column 'b'"),
        ([col("a", "int64", nullable=False), col("b", "int64", nullable=False)], ["b"], "must be the leading"),
        ([col("a", "int64", nullable=False)], [], "at least one column"),
        ([col("__op", "int64", nullable=False)], ["__op"], "reserved"),
        ([col("", "int64", nullable=False)], [""], "non-empty"),
    ],
)
def test_bad_schemas_are_refused_with_the_column_named(columns, key, message) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Schema.of(columns, key)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("varchar", "unknown type 'varchar'"),
        ("decimal(50, 2)", "precision"),
        ("decimal(5, 6)", "scale"),
        ("decimal", "precision, scale"),
    ],
)
def test_bad_types_are_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        ColumnType.parse(text)


def test_schema_round_trips_through_json_and_arrow() -> None:
    assert Schema.from_json(SCHEMA.to_json()) == SCHEMA
    back = Schema.from_arrow(SCHEMA.to_arrow(), ["id", "name"])
    assert [(c.name, c.type, c.nullable) for c in back.columns] == [
        (c.name, c.type, c.nullable) for c in SCHEMA.columns
    ]
    assert SCHEMA.to_arrow().field("at").type == pa.timestamp("us", tz="UTC")


def test_alterations_keep_column_ids() -> None:
    added = SCHEMA.add_column(col("extra", "int32", nullable=False, default=4))
    renamed = added.rename_column("extra", "more")
    dropped = renamed.drop_column("price")
    assert renamed.column("more").id == added.column("extra").id == max(c.id for c in SCHEMA.columns) + 1
    assert "price" not in dropped.names
    with pytest.raises(InvalidArgument, match="cannot drop primary key column 'id'"):
        SCHEMA.drop_column("id")
    with pytest.raises(InvalidArgument, match="needs a default"):
        SCHEMA.add_column(col("x", "int32", nullable=False))
    with pytest.raises(InvalidArgument, match="duplicate column name 'name'"):
        SCHEMA.rename_column("f", "name")


def test_values_are_checked_against_their_types() -> None:
    t = ColumnType.parse("decimal(4, 1)")
    assert t.check(decimal.Decimal("123.4"), "x") == decimal.Decimal("123.4")
    for bad in (decimal.Decimal("1234.5"), decimal.Decimal("1.25"), 1.5):
        with pytest.raises(InvalidArgument, match="x"):
            t.check(bad, "x")
    with pytest.raises(InvalidArgument, match="time zone"):
        ColumnType.parse("timestamp").check(datetime.datetime(2020, 1, 1), "at")
    with pytest.raises(InvalidArgument):
        ColumnType.parse("int8").check(True, "b")


def row(**kw: Any) -> dict[str, Any]:
    base = {"id": 1, "name": "a"}
    base.update(kw)
    return base


def test_row_operations_round_trip() -> None:
    rows = [
        row(price=decimal.Decimal("2.25"), at=datetime.datetime(2021, 5, 1, tzinfo=UTC), blob=None, f=None),
        row(id=2, price=None, at=None, blob=b"\x00\xff", f=1.5),
    ]
    payload = make_row_operations(SCHEMA, [OpType.INSERT, OpType.UPSERT_IGNORE], rows)
    ops = decode_row_operations(payload, SCHEMA)
    assert ops.ops.to_pylist() == [1, 8]
    assert ops.data.column("price").to_pylist() == [decimal.Decimal("2.25"), None]
    assert len(ops) == 2


def _raw(columns: dict[str, pa.Array]) -> bytes:
    return encode_row_operations(pa.record_batch(columns))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"not arrow", "not a valid Arrow IPC stream"),
        (_raw({"id": pa.array([1], pa.int64())}), "'__op' as their first column"),
        (_raw({OP_COLUMN: pa.array([9], pa.int8()), "id": pa.array([1], pa.int64())}), "unknown op codes"),
        (_raw({OP_COLUMN: pa.array([1], pa.int8()), "id": pa.array([1], pa.int64())}), "primary key column 'name'"),
        (
            _raw({OP_COLUMN: pa.array([1], pa.int8()), "id": pa.array([1], pa.int32()), "name": pa.array(["a"])}),
            "column 'id' has type int32, expected int64",
        ),
        (
            _raw({OP_COLUMN: pa.array([1], pa.int8()), "id": pa.array([None], pa.int64()), "name": pa.array(["a"])}),
            "column 'id' is not nullable",
        ),
        (
            _raw(
                {
                    OP_COLUMN: pa.array([1], pa.int8()),
                    "id": pa.array([1], pa.int64()),
                    "name": pa.array(["a"]),
                    "nope": pa.array([1]),
                }
            ),
            "unknown column 'nope'",
        ),
        (
            _raw(
                {OP_COLUMN: pa.array([1], pa.int8()), "id": pa.array([1], pa.int64()), "name": pa.array(["x" * 70000])}
            ),
            "column 'name' has a cell of 70000 bytes",
        ),
    ],
)
def test_bad_row_operations_are_refused(payload: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        decode_row_operations(payload, SCHEMA)


def test_rows_that_set_different_columns_split_into_groups() -> None:
    rows = [row(price=decimal.Decimal("1.00")), row(id=2, f=2.5), row(id=3)]
    ops = decode_row_operations(make_row_operations(SCHEMA, OpType.UPSERT, rows), SCHEMA)
    groups = {tuple(g.columns): g.positions.to_pylist() for g in ops.by_column_set() if g.positions is not None}
    assert groups == {("id", "name", "price"): [0], ("id", "name", "f"): [1], ("id", "name"): [2]}
    bad_width = _raw(
        {
            OP_COLUMN: pa.array([1], pa.int8()),
            "id": pa.array([1], pa.int64()),
            "name": pa.array(["a"]),
            ISSET_COLUMN: pa.array([b"\x03\x00"], pa.binary(2)),
        }
    )
    with pytest.raises(InvalidArgument, match="must be fixed_size_binary\\(1\\)"):
        decode_row_operations(bad_width, SCHEMA)
    no_key = _raw(
        {
            OP_COLUMN: pa.array([1, 1], pa.int8()),
            "id": pa.array([1, 2], pa.int64()),
            "name": pa.array(["a", "b"]),
            ISSET_COLUMN: pa.array([b"\x03", b"\x01"], pa.binary(1)),
        }
    )
    with pytest.raises(InvalidArgument, match="do not set primary key column 'name'"):
        decode_row_operations(no_key, SCHEMA)


def test_oversized_batches_and_missing_required_columns_are_refused() -> None:
    payload = make_row_operations(SCHEMA, OpType.INSERT, [row()])
    with pytest.raises(InvalidArgument, match="exceed the limit"):
        decode_row_operations(payload, SCHEMA, RowOperationOptions(max_row_operations_bytes=10))
    strict = Schema.of([col("id", "int64", nullable=False), col("must", "int32", nullable=False)], ["id"])
    with pytest.raises(InvalidArgument, match="must set non-null column 'must'"):
        decode_row_operations(make_row_operations(strict, OpType.UPSERT, [{"id": 1}]), strict)
    decode_row_operations(make_row_operations(strict, OpType.UPDATE, [{"id": 1}]), strict)  # updates may omit it


def test_predicates_bind_and_serialise() -> None:
    p = Predicate.compare("price", "<", decimal.Decimal("3")).bind(SCHEMA)
    assert Predicate.from_dict(p.to_dict(SCHEMA), SCHEMA) == p
    q = Predicate.in_list("at", [datetime.datetime(2020, 1, 1, tzinfo=UTC)]).bind(SCHEMA)
    assert Predicate.from_dict(q.to_dict(SCHEMA), SCHEMA) == q
    with pytest.raises(InvalidArgument, match="unknown column 'zzz'"):
        Predicate.is_null("zzz").bind(SCHEMA)
    with pytest.raises(InvalidArgument, match="predicate on column 'id'"):
        Predicate.compare("id", "=", "one").bind(SCHEMA)
    with pytest.raises(InvalidArgument, match="use IS NULL"):
        Predicate.compare("id", "=", None).bind(SCHEMA)
    r = KeyRange((1, "a"), (5, "b")).bind(SCHEMA)
    assert KeyRange.from_dict(r.to_dict(SCHEMA), SCHEMA) == r
    with pytest.raises(InvalidArgument, match="key range lower bound"):
        KeyRange((1,), None).bind(SCHEMA)


def test_large_in_lists_are_checked_like_small_ones() -> None:
    values = [5, 3, 3, *range(100, 200)]
    assert Predicate.in_list("id", values).bind(SCHEMA).values == tuple(sorted(set(values)))
    names = [f"n{i}" for i in range(100)]
    assert Predicate.in_list("name", names).bind(SCHEMA).values == tuple(sorted(names))
    for bad in ([*range(100), 2**63], [*range(100), True], [*range(100), "7"]):
        with pytest.raises(InvalidArgument, match="predicate on column 'id'"):
            Predicate.in_list("id", bad).bind(SCHEMA)
    with pytest.raises(InvalidArgument, match="predicate on column 'name'"):
        Predicate.in_list("name", [*names, "\ud800"]).bind(SCHEMA)


def test_arrow_schema_of_a_column_subset_follows_the_order_given_and_refuses_unknown_names() -> None:
    subset = SCHEMA.arrow_schema_of(("price", "id"))
    assert subset.names == ["price", "id"]
    assert subset.types == [pa.decimal128(10, 2), pa.int64()]
    assert SCHEMA.arrow_schema_of(("price", "id")) is subset, "remembered, not rebuilt"
    with pytest.raises(InvalidArgument, match="unknown column 'nope'"):
        SCHEMA.arrow_schema_of(("id", "nope"))


def _two(names: list[str], columns: list[pa.Array]) -> bytes:
    return encode_row_operations(pa.RecordBatch.from_arrays(columns, names=names))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        # A repeated column, and a key column given twice instead of the other key column.
        (
            _two([OP_COLUMN, "id", "name", "name"], [pa.array([1], pa.int8()), pa.array([1]), *[pa.array(["a"])] * 2]),
            "repeat column 'name'",
        ),
        (_two([OP_COLUMN, "id", "id"], [pa.array([1], pa.int8()), *[pa.array([1])] * 2]), "repeat column 'id'"),
        (_raw({OP_COLUMN: pa.array([0], pa.int8()), "id": pa.array([1]), "name": pa.array(["a"])}), "unknown op codes"),
        (  # past the few rows checked in Python
            _raw(
                {
                    OP_COLUMN: pa.array([1] * 99 + [9], pa.int8()),
                    "id": pa.array(range(100)),
                    "name": pa.array(["a"] * 100),
                }
            ),
            "unknown op codes",
        ),
        (  # a nullable column's cells are bounded too
            _raw(
                {
                    OP_COLUMN: pa.array([1], pa.int8()),
                    "id": pa.array([1]),
                    "name": pa.array(["a"]),
                    "blob": pa.array([b"x" * 70000]),
                }
            ),
            "column 'blob' has a cell of 70000 bytes",
        ),
    ],
)
def test_more_bad_row_operations_are_refused(payload: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        decode_row_operations(payload, SCHEMA)


def test_row_operations_may_give_columns_in_any_order_and_nulls_where_allowed() -> None:
    payload = _raw(
        {
            OP_COLUMN: pa.array([4] * 70, pa.int8()),
            "f": pa.array([None] * 70, pa.float32()),
            "name": pa.array(["n"] * 70),
            "id": pa.array(range(70)),
        }
    )
    ops = decode_row_operations(payload, SCHEMA)
    assert ops.only_op is OpType.UPSERT
    assert ops.columns == ["f", "name", "id"]


def test_a_schema_pickles_and_copies_without_its_remembered_arrow_schemas() -> None:
    import copy
    import pickle

    SCHEMA.arrow_schema_of(("id", "name"))
    for clone in (pickle.loads(pickle.dumps(SCHEMA)), copy.copy(SCHEMA), copy.deepcopy(SCHEMA)):
        assert clone == SCHEMA
        assert clone.next_column_id == SCHEMA.next_column_id
        assert clone.index_of("price") == 2
        assert clone.arrow_schema_of(("id", "name")).names == ["id", "name"]
    assert b"arrow" not in pickle.dumps(SCHEMA).lower(), "the cache of Arrow schemas stays behind"
