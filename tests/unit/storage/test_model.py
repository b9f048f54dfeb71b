"""Property tests: the DuckDB store against a plain in-memory model of Kudu's write semantics.

Random sequences of operations, cut into random entries and random apply groups, must leave
the same rows and report the same row errors as applying every op, in order, to a dict.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nyala.errors import AlreadyPresent, NotFound
from nyala.schema import ColumnSchema, KeyRange, OpType, Predicate, Schema, make_row_operations
from nyala.storage import ApplyEntry, ScanSpec, StorageOptions, TabletStoreManager

SINGLE = Schema.of(
    [
        ColumnSchema.of("k", "int64", nullable=False),
        ColumnSchema.of("v", "double"),
        ColumnSchema.of("n", "int32", nullable=False, default=0),
        ColumnSchema.of("t", "string"),
    ],
    ["k"],
)
COMPOSITE = Schema.of(
    [
        ColumnSchema.of("k", "int32", nullable=False),
        ColumnSchema.of("s", "string", nullable=False),
        ColumnSchema.of("v", "double"),
        ColumnSchema.of("n", "int32", nullable=False, default=0),
        ColumnSchema.of("t", "string"),
    ],
    ["k", "s"],
)
# One integer key column: the store handles these keys as numpy arrays, other keys as
# Python objects; both must behave alike.
INT8_KEY = Schema.of([ColumnSchema.of("k", "int8", nullable=False), *SINGLE.columns[1:]], ["k"])
STRING_KEY = Schema.of([ColumnSchema.of("k", "string", nullable=False), *SINGLE.columns[1:]], ["k"])
SCHEMAS = pytest.mark.parametrize(
    "schema", [SINGLE, INT8_KEY, STRING_KEY, COMPOSITE], ids=["int64-key", "int8-key", "string-key", "composite-key"]
)
NON_KEY = ("v", "n", "t")
_ids = itertools.count()


def _key_values(schema: Schema) -> st.SearchStrategy[dict[str, Any]]:
    if schema is SINGLE:
        # hash(-1) == hash(-2) in Python, and the extremes bound the int64 range.
        return st.fixed_dictionaries({"k": st.sampled_from([-(2**63), -2, -1, 0, 1, 2, 7, 2**63 - 1])})
    if schema is INT8_KEY:
        return st.fixed_dictionaries({"k": st.sampled_from([-128, -1, 0, 3, 127])})
    if schema is STRING_KEY:
        return st.fixed_dictionaries({"k": st.sampled_from(["", "a", "a\x00", "b", "-1"])})
    return st.fixed_dictionaries({"k": st.integers(0, 3), "s": st.sampled_from(["", "a", "a\x00", "b"])})


VALUES = {
    "v": st.one_of(st.none(), st.floats(-10, 10, allow_nan=False)),
    "n": st.integers(-5, 5),
    "t": st.one_of(st.none(), st.text(max_size=3)),
}


@st.composite
def entries(draw: st.DrawFn, schema: Schema) -> tuple[list[OpType], list[dict[str, Any]]]:
    """One entry with random ops; its rows set the same columns, or (with __isset) not."""
    columns = draw(st.lists(st.sampled_from(NON_KEY), unique=True))
    per_row = draw(st.booleans())
    n = draw(st.integers(1, 6))
    ops = draw(st.lists(st.sampled_from(list(OpType)), min_size=n, max_size=n))
    rows = []
    for _ in range(n):
        row = draw(_key_values(schema))
        if per_row:
            columns = draw(st.lists(st.sampled_from(NON_KEY), unique=True))
        for c in columns:
            row[c] = draw(VALUES[c])
        rows.append(row)
    return ops, rows


class Model:
    """Kudu's semantics, one op at a time."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}

    def apply(self, op: OpType, values: dict[str, Any]) -> type | None:
        key = tuple(values[k] for k in self.schema.key_names)
        present = key in self.rows
        base = op.base
        if (base is OpType.INSERT and present) or (base in (OpType.UPDATE, OpType.DELETE) and not present):
            if op.ignores_errors:
                return None
            return AlreadyPresent if base is OpType.INSERT else NotFound
        if base is OpType.DELETE:
            del self.rows[key]
        elif present:
            self.rows[key].update(values)
        else:
            self.rows[key] = {c.name: values.get(c.name, c.default) for c in self.schema.columns}
        return None

    def sorted_rows(self) -> list[dict[str, Any]]:
        return [self.rows[k] for k in sorted(self.rows)]


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory):
    with TabletStoreManager(str(tmp_path_factory.mktemp("model")), _options()) as m:
        yield m


def _options() -> StorageOptions:
    return StorageOptions(storage_threads=2, storage_memory_limit_bytes=512 << 20)


@SCHEMAS
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_batches_match_the_model(manager: TabletStoreManager, schema: Schema, data: st.DataObject) -> None:
    batches = data.draw(st.lists(entries(schema), min_size=1, max_size=8), label="entries")
    cuts = data.draw(st.lists(st.integers(1, 4), min_size=len(batches), max_size=len(batches)), label="groups")
    store = manager.create_tablet(f"model{next(_ids)}", schema)
    model = Model(schema)
    expected: list[list[tuple[int, type]]] = []
    for ops, rows in batches:
        errors = [(i, e) for i, (op, row) in enumerate(zip(ops, rows, strict=True)) if (e := model.apply(op, row))]
        expected.append(errors)
    payloads = [ApplyEntry(i + 1, make_row_operations(schema, ops, rows)) for i, (ops, rows) in enumerate(batches)]
    got: list[list[tuple[int, type]]] = []
    position = 0
    for size in cuts:
        group = payloads[position : position + size]
        if not group:
            break
        position += len(group)
        for result in store.apply(group):
            assert result.error is None
            got.append([(e.row, type(e.error)) for e in result.row_failures])
    assert got == expected
    assert store.applied_index() == len(batches)
    rows = store.scan(ScanSpec(ordered=True)).read_all().to_pylist()
    assert rows == model.sorted_rows()
    store.close()


PREDICATES = st.one_of(
    st.builds(Predicate.compare, st.just("k"), st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.integers(-1, 8)),
    st.builds(Predicate.compare, st.just("v"), st.sampled_from(["<", ">=", "="]), st.floats(-10, 10, allow_nan=False)),
    st.builds(Predicate.in_list, st.just("n"), st.lists(st.integers(-5, 5), max_size=4)),
    st.builds(Predicate.is_null, st.sampled_from(["v", "t"])),
    st.builds(Predicate.is_not_null, st.sampled_from(["v", "t"])),
    st.builds(Predicate.compare, st.just("t"), st.sampled_from(["<", ">"]), st.text(max_size=2)),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=entries(SINGLE),
    predicates=st.lists(PREDICATES, max_size=3),
    limit=st.one_of(st.none(), st.integers(0, 5)),
    key_range=st.one_of(
        st.none(),
        st.builds(
            KeyRange,
            st.one_of(st.none(), st.tuples(st.integers(-1, 8))),
            st.one_of(st.none(), st.tuples(st.integers(-1, 8))),
            st.booleans(),
        ),
    ),
)
def test_scans_filter_like_the_model(
    manager: TabletStoreManager,
    batch: tuple[list[OpType], list[dict[str, Any]]],
    predicates: list[Predicate],
    limit: int | None,
    key_range: KeyRange | None,
) -> None:
    store = manager.create_tablet(f"scan{next(_ids)}", SINGLE)
    model = Model(SINGLE)
    ops, rows = batch
    for op, row in zip(ops, rows, strict=True):
        model.apply(op, row)
    store.apply([ApplyEntry(1, make_row_operations(SINGLE, ops, rows))])
    bound = [p.bind(SINGLE) for p in predicates]
    want = [
        r
        for r in model.sorted_rows()
        if all(p.matches(r[p.column]) for p in bound) and (key_range is None or key_range.contains((r["k"],)))
    ]
    spec = ScanSpec(
        projection=["k", "v", "t"], predicates=bound, key_range=key_range, ordered=True, limit=limit, batch_size_rows=2
    )
    got = store.scan(spec).read_all().to_pylist()
    assert got == [{c: r[c] for c in ("k", "v", "t")} for r in want][:limit]
    store.close()


FAST_OPS = [OpType.INSERT, OpType.INSERT_IGNORE, OpType.UPSERT, OpType.UPSERT_IGNORE]


@st.composite
def mostly_in_memory_entries(draw: st.DrawFn, schema: Schema) -> tuple[list[OpType], list[dict[str, Any]]]:
    """Entries the MemRowSet takes (one op of inserts or whole-row upserts), now and then
    an entry of any kind, which sends the group through DuckDB."""
    if draw(st.integers(0, 4)) == 0:
        return draw(entries(schema))
    op = draw(st.sampled_from(FAST_OPS))
    n = draw(st.integers(1, 5))
    rows = []
    for _ in range(n):
        row = draw(_key_values(schema))
        for c in NON_KEY if op.base is OpType.UPSERT else draw(st.lists(st.sampled_from(NON_KEY), unique=True)):
            row[c] = draw(VALUES[c])
        rows.append(row)
    return [op] * n, rows


@SCHEMAS
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_memrowset_flushes_and_replay_match_the_model(
    tmp_path_factory: pytest.TempPathFactory, schema: Schema, data: st.DataObject
) -> None:
    """Applies that stay in memory, flushes at random points (and by size), scans in between,
    then a restart that loses the MemRowSet and replays the entries after the durable index."""
    batches = data.draw(st.lists(mostly_in_memory_entries(schema), min_size=1, max_size=10), label="entries")
    flush_after = data.draw(st.sets(st.integers(1, len(batches))), label="flush after")
    threshold = data.draw(st.sampled_from([4, 1000]), label="flush threshold rows")
    payloads = [ApplyEntry(i + 1, make_row_operations(schema, ops, rows)) for i, (ops, rows) in enumerate(batches)]
    model = Model(schema)
    directory = str(tmp_path_factory.mktemp("mrs"))
    options = StorageOptions(storage_threads=1, flush_threshold_rows=threshold)
    first_results: dict[int, list[tuple[int, type]]] = {}
    with TabletStoreManager(directory, options) as manager:
        store = manager.create_tablet("t", schema)
        for entry, (ops, rows) in zip(payloads, batches, strict=True):
            outcomes = [model.apply(op, row) for op, row in zip(ops, rows, strict=True)]
            expected = [(i, e) for i, e in enumerate(outcomes) if e is not None]
            (result,) = store.apply([entry])
            first_results[entry.index] = [(e.row, type(e.error)) for e in result.row_failures]
            assert first_results[entry.index] == expected
            assert store.scan(ScanSpec(ordered=True)).read_all().to_pylist() == model.sorted_rows()
            if entry.index in flush_after:
                store.flush()
                assert store.durable_index() == entry.index
        durable_before_close = store.durable_index()
        assert durable_before_close <= store.applied_index() == len(batches)
    with TabletStoreManager(directory, options) as manager:  # the MemRowSet is gone
        store = manager.open_tablet("t")
        durable = store.applied_index()
        # A background flush still running at the close may have committed meanwhile.
        assert durable_before_close <= durable <= len(batches)
        for entry in payloads[durable:]:
            (result,) = store.apply([entry])
            assert [(e.row, type(e.error)) for e in result.row_failures] == first_results[entry.index]
        assert store.scan(ScanSpec(ordered=True)).read_all().to_pylist() == model.sorted_rows()
        ordered_keys = store.scan(ScanSpec(projection=schema.key_names, ordered=True, limit=3)).read_all()
        assert ordered_keys.to_pylist() == [{k: r[k] for k in schema.key_names} for r in model.sorted_rows()][:3]
