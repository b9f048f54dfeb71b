"""Key encoding order, row-to-partition mapping, and partition pruning against brute force."""

from __future__ import annotations

import datetime
import decimal
import itertools
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nyala.errors import InvalidArgument, NotFound
from nyala.schema import (
    ColumnSchema,
    ColumnType,
    HashDimension,
    KeyRange,
    Partitioner,
    PartitionSchema,
    Predicate,
    Schema,
    decode_key,
    encode_key,
)
from nyala.schema.keys import key_successor

UTC = datetime.UTC

KEY_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "int8": st.integers(-128, 127),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "decimal(20, 3)": st.decimals(-(10**16), 10**16, places=3, allow_nan=False, allow_infinity=False),
    "string": st.text(alphabet=st.sampled_from(["\x00", "\x01", "a", "\xff", "é"]), max_size=4),
    "binary": st.binary(max_size=4),
    "date": st.dates(),
    "timestamp": st.datetimes(timezones=st.just(UTC)),
}


@st.composite
def typed_key_pairs(draw: st.DrawFn) -> tuple[list[ColumnType], tuple[Any, ...], tuple[Any, ...]]:
    names = draw(st.lists(st.sampled_from(sorted(KEY_VALUES)), min_size=1, max_size=3))
    types = [ColumnType.parse(n) for n in names]
    a = tuple(t.check(draw(KEY_VALUES[n]), "k") for t, n in zip(types, names, strict=True))
    b = tuple(t.check(draw(KEY_VALUES[n]), "k") for t, n in zip(types, names, strict=True))
    return types, a, b


@settings(max_examples=200, deadline=None)
@given(typed_key_pairs())
def test_key_encoding_order_is_value_order(case) -> None:
    types, a, b = case
    ea, eb = encode_key(types, a), encode_key(types, b)
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)
    assert decode_key(types, ea) == a


@settings(max_examples=300, deadline=None)
@given(typed_key_pairs())
def test_key_successor_is_the_next_key(case) -> None:
    # The successor is above the key and no key lies strictly between them.
    types, a, b = case
    following = key_successor(types, a)
    if following is None:
        assert not b > a
        return
    checked = tuple(t.check(v, "k") for t, v in zip(types, following, strict=True))
    assert encode_key(types, checked) > encode_key(types, a)
    assert not a < b < checked


NEW_YEAR = datetime.datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("type_names", "key", "expected"),
    [
        (["int8"], [5], [6]),
        (["int8"], [127], None),
        (["int8", "int8"], [1, 127], [2, -128]),
        (["int8", "int8"], [127, 127], None),
        (["string"], ["ab"], ["ab\x00"]),
        (["binary", "int16"], [b"x", 2**15 - 1], [b"x\x00", -(2**15)]),
        (["date"], [datetime.date(2024, 2, 28)], [datetime.date(2024, 2, 29)]),
        (
            ["timestamp"],
            [datetime.datetime(2024, 1, 1, tzinfo=UTC)],
            [datetime.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)],
        ),
        (["decimal(38, 2)"], [decimal.Decimal("1.99")], [decimal.Decimal("2.00")]),
        (["decimal(3, 1)"], [decimal.Decimal("99.9")], None),
    ],
)
def test_key_successor_examples(type_names: list[str], key: list[Any], expected: list[Any] | None) -> None:
    assert key_successor([ColumnType.parse(n) for n in type_names], key) == expected


def test_range_bound_types_become_half_open_ranges() -> None:
    schema = Schema.of([ColumnSchema.of("k", "int8", nullable=False)], ["k"])
    p = Partitioner(schema, PartitionSchema((), ("k",)))
    assert p.half_open([1], [10], lower_inclusive=False, upper_inclusive=True) == ([2], [11])
    assert p.half_open([1], [127], upper_inclusive=True) == ([1], None)  # through the largest key: unbounded
    assert p.half_open(None, None, lower_inclusive=False, upper_inclusive=True) == (None, None)
    assert p.bounds([1], [1], upper_inclusive=True) == p.bounds([1], [2])
    with pytest.raises(InvalidArgument, match="exclusive lower bound \\(127\\) is the largest key"):
        p.bounds([127], None, lower_inclusive=False)
    with pytest.raises(InvalidArgument, match="not below"):
        p.bounds([1], [2], lower_inclusive=False)
    with pytest.raises(InvalidArgument, match="not a valid int8"):
        p.half_open([128], None)


def test_ranges_are_shown_as_people_write_them() -> None:
    schema = Schema.of(
        [ColumnSchema.of("day", "date", nullable=False), ColumnSchema.of("host", "string", nullable=False)],
        ["day", "host"],
    )
    p = Partitioner(schema, PartitionSchema((), ("day", "host")))
    bounds = p.bounds([datetime.date(2024, 1, 1), "a"], None)
    assert p.show_range(bounds) == "[(2024-01-01, 'a'), (+inf))"
    with pytest.raises(InvalidArgument, match=r"lower bound \(2025-01-01, 'b'\) is not below upper bound \(2024"):
        p.bounds([datetime.date(2025, 1, 1), "b"], [datetime.date(2024, 1, 1), "b"])


INT = ColumnSchema.of("a", "int32", nullable=False)
STR = ColumnSchema.of("b", "string", nullable=False)
BIG = ColumnSchema.of("c", "int64", nullable=False)
SCHEMA = Schema.of([INT, STR, BIG, ColumnSchema.of("v", "double")], ["a", "b", "c"])
DOMAIN: dict[str, list[Any]] = {"a": list(range(5)), "b": ["", "x", "x\x00", "y"], "c": list(range(4))}
ROWS = [dict(zip("abc", t, strict=True)) for t in itertools.product(DOMAIN["a"], DOMAIN["b"], DOMAIN["c"])]


@st.composite
def partitioners(draw: st.DrawFn) -> Partitioner:
    keys = ["a", "b", "c"]
    hashed = draw(st.lists(st.sampled_from(keys), unique=True, max_size=3))
    split = draw(st.integers(0, len(hashed)))
    dims = [h for h in (hashed[:split], hashed[split:]) if h]
    hash_dims = tuple(HashDimension(tuple(d), draw(st.integers(2, 4)), draw(st.integers(0, 2**32 - 1))) for d in dims)
    range_cols = tuple(draw(st.permutations(keys))[: draw(st.integers(0, 3))])
    p = Partitioner(SCHEMA, PartitionSchema(hash_dims, range_cols))
    if not range_cols:
        return p
    points = sorted(
        {p.encode_range_key([r[c] for c in range_cols]) for r in draw(st.lists(st.sampled_from(ROWS), max_size=6))}
    )
    bounds = [b"", *(x for x in points if x), b""]
    for lo, hi in itertools.pairwise(bounds):
        if (not hi or lo < hi) and draw(st.booleans()):  # leave random gaps
            p = p.add_range(_bounds(lo, hi))
    return p


def _bounds(lo: bytes, hi: bytes):
    from nyala.schema import RangeBounds

    return RangeBounds(lo, hi)


def predicate_on(column: str) -> st.SearchStrategy[Predicate]:
    values = st.sampled_from(DOMAIN[column])
    return st.one_of(
        st.builds(Predicate.compare, st.just(column), st.sampled_from(["=", "<", "<=", ">", ">=", "!="]), values),
        st.builds(Predicate.in_list, st.just(column), st.lists(values, max_size=3)),
        st.builds(Predicate.is_not_null, st.just(column)),
        st.builds(Predicate.is_null, st.just(column)),
    )


@settings(max_examples=120, deadline=None)
@given(
    partitioner=partitioners(),
    predicates=st.lists(st.sampled_from("abc").flatmap(predicate_on), max_size=4),
    bounds=st.lists(st.sampled_from(ROWS), min_size=2, max_size=2),
    use_range=st.booleans(),
)
def test_pruning_never_drops_a_partition_brute_force_needs(partitioner, predicates, bounds, use_range) -> None:
    bound = [p.bind(SCHEMA) for p in predicates]
    lo, hi = sorted(tuple(r[c] for c in "abc") for r in bounds)
    key_range = KeyRange(lo, hi).bind(SCHEMA) if use_range else None
    needed = set()
    for row in ROWS:
        key = tuple(row[c] for c in "abc")
        if all(p.matches(row[p.column]) for p in bound) and (key_range is None or key_range.contains(key)):
            try:
                needed.add(partitioner.partition_for_row(row))
            except NotFound:
                pass  # no range covers this row
    kept = set(partitioner.prune(bound, key_range))
    assert needed <= kept
    assert kept <= set(partitioner.partitions)


def test_pruning_is_exact_for_points_and_single_column_ranges() -> None:
    p = Partitioner(SCHEMA, PartitionSchema((HashDimension(("b",), 3, 7),), ("a",)))
    for lo, hi in [(0, 2), (2, 3), (4, None)]:  # [3, 4) is a gap
        p = p.add_range(p.bounds([lo], None if hi is None else [hi]))
    assert len(p.partitions) == 9
    point = [Predicate.compare("a", "=", 2).bind(SCHEMA), Predicate.compare("b", "=", "x").bind(SCHEMA)]
    assert p.prune(point) == [p.partition_for_row({"a": 2, "b": "x", "c": 0})]
    ranged = p.prune([Predicate.compare("a", ">=", 2).bind(SCHEMA), Predicate.compare("a", "<", 4).bind(SCHEMA)])
    assert {x.range for x in ranged} == {p.bounds([2], [3])}
    assert p.prune([Predicate.compare("a", "=", 3).bind(SCHEMA)]) == []  # in the gap
    assert p.prune([Predicate.is_null("a").bind(SCHEMA)]) == []
    with pytest.raises(NotFound, match="no range partition covers"):
        p.partition_for_row({"a": 3, "b": "x", "c": 0})


def test_ranges_add_drop_and_serialise() -> None:
    p = Partitioner(SCHEMA, PartitionSchema((), ("a", "b")))
    first = p.bounds([0, ""], [5, "m"])
    p = p.add_range(first)
    with pytest.raises(InvalidArgument, match="overlaps"):
        p.add_range(p.bounds([5, "a"], [6, ""]))
    p = p.add_range(p.bounds([5, "m"], None))
    assert Partitioner.from_json(p.to_json()).partitions == p.partitions
    p = p.drop_range(first)
    assert [r for r in p.ranges] == [p.bounds([5, "m"], None)]
    with pytest.raises(NotFound):
        p.drop_range(first)
    with pytest.raises(InvalidArgument, match="must be a primary key column"):
        Partitioner(SCHEMA, PartitionSchema((HashDimension(("v",), 2),)))


def test_partition_keys_are_stable() -> None:
    """The bucket function is part of the on-disk and wire contract: it must never change."""
    p = Partitioner(SCHEMA, PartitionSchema((HashDimension(("a", "b"), 16, 0),), ()))
    buckets = [p.bucket(0, [a, "x"]) for a in range(8)]
    assert buckets == [p.bucket(0, [a, "x"]) for a in range(8)]
    assert len(set(p.bucket(0, [a, "k"]) for a in range(200))) == 16
    assert decimal.Decimal("1.5") == ColumnType.parse("decimal(3,1)").check(decimal.Decimal("1.5"), "x")


@settings(max_examples=80, deadline=None)
@given(partitioner=partitioners(), rows=st.lists(st.sampled_from(ROWS), max_size=30))
def test_batch_partitioning_matches_row_by_row(partitioner: Partitioner, rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(rows, SCHEMA.to_arrow().remove(3)) if rows else SCHEMA.to_arrow().empty_table()
    want = []
    for row in rows:
        try:
            want.append(partitioner.partitions.index(partitioner.partition_for_row(row)))
        except NotFound:
            want.append(-1)
    assert partitioner.partition_indices(table).tolist() == want
    assert [partitioner.index_of(partitioner.partition_key(row)) for row in rows] == want


def test_batch_hashing_of_dates_and_timestamps_matches_row_by_row() -> None:
    schema = Schema.of(
        [ColumnSchema.of("d", "date", nullable=False), ColumnSchema.of("t", "timestamp", nullable=False)], ["d", "t"]
    )
    p = Partitioner(schema, PartitionSchema((HashDimension(("d",), 7, 3), HashDimension(("t",), 5, 9)), ("t",)))
    split = datetime.datetime(1990, 1, 1, tzinfo=UTC)
    p = p.add_range(p.bounds(None, [split])).add_range(p.bounds([split + datetime.timedelta(days=900)], None))
    rows = [
        {"d": datetime.date(1900 + i, 1 + i % 12, 1), "t": datetime.datetime(1960 + i, 2, 3, 4, 5, 6, i, tzinfo=UTC)}
        for i in range(100)
    ]
    table = pa.Table.from_pylist(rows, schema.to_arrow())
    want = []
    for row in rows:
        try:
            want.append(p.partitions.index(p.partition_for_row(row)))
        except NotFound:
            want.append(-1)
    assert -1 in want
    assert p.partition_indices(table).tolist() == want
