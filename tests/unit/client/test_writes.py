"""Writes: splitting by tablet, per-row errors, flush modes, retries and their ambiguity."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pyarrow as pa
import pytest

from nyala.client import Client, FlushMode, Partitioning, Table, UnhandledRowErrors, connect, schema
from nyala.client.meta_cache import TableInfo
from nyala.client.operations import OpBatch, to_op_batches
from nyala.client.writer import split_by_partition
from nyala.errors import (
    AlreadyPresent,
    IllegalState,
    InvalidArgument,
    NotFound,
    NotTheLeader,
    ServiceUnavailable,
    TimedOut,
)
from nyala.schema import OpType, RowFailure
from tests.unit.client.fakes import FakeCluster, FakeTablet
from tests.unit.client.helpers import FAST, count_pauses, hashed, kv_schema, rows


@pytest.fixture
def client(cluster: FakeCluster) -> Iterator[Client]:
    with connect(cluster.master_addresses, options=FAST) as c:
        yield c


def test_rows_are_split_across_tablets_and_each_lands_in_its_own(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(4))
    assert table.insert(rows(0, 200)) == []
    fake = cluster.table("t")
    assert sum(len(t.rows) for t in fake.tablets) == 200
    assert all(len(t.rows) > 0 for t in fake.tablets)  # every bucket got some (the fake refuses misrouted rows)
    writes = sum(ts.calls.get("Write", 0) for ts in cluster.tservers.values())
    assert writes == 4  # one Write per tablet batch


def test_arrow_tables_are_written_with_casts(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    data = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "name": ["a", "b", "c"]})
    assert table.insert(data) == []
    assert cluster.all_rows("t")[(2,)] == {"id": 2, "name": "b", "v": None}


def test_per_row_errors_name_the_row_and_keep_the_rest(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    table.insert(rows(0, 10))
    errors = table.insert(rows(5, 15))
    assert sorted(e.row["id"] for e in errors) == [5, 6, 7, 8, 9]
    assert all(isinstance(e.error, AlreadyPresent) and e.op is OpType.INSERT for e in errors)
    assert not any(e.after_ambiguous_retry for e in errors)
    assert len(cluster.all_rows("t")) == 15
    missing = table.update([{"id": 99, "v": 1.0}])
    assert [type(e.error) for e in missing] == [NotFound]
    assert table.update_ignore([{"id": 99, "v": 1.0}]) == []
    assert table.insert_ignore(rows(0, 3)) == []
    assert table.delete([{"id": 0}, {"id": 1}]) == []
    assert table.delete_ignore([{"id": 0}]) == []
    assert table.upsert([{"id": 0, "name": "back"}]) == []
    assert cluster.all_rows("t")[(0,)]["name"] == "back"


def test_row_errors_beyond_what_a_session_keeps_are_returned_or_raised_never_dropped(cluster: FakeCluster) -> None:
    options = dataclasses.replace(FAST, session_max_pending_errors=3)
    with connect(cluster.master_addresses, options=options) as c:
        table = c.create_table("t", kv_schema(), hashed(2))
        assert table.insert(rows(0, 1_001)) == []
        # A few rows flush in the caller's task, and every error comes back.
        assert sorted(e.row["id"] for e in table.insert(rows(0, 5))) == [0, 1, 2, 3, 4]
        # More go through a session that keeps 3 errors: the rest are counted and raised.
        with pytest.raises(UnhandledRowErrors, match="1001 rows were not written") as caught:
            table.insert(rows(0, 1_001))
    assert {type(e.error) for e in caught.value.errors} == {AlreadyPresent}


def test_rows_outside_every_range_partition_get_not_found(cluster: FakeCluster, client: Client) -> None:
    partitioning = Partitioning().set_range_partition_columns("id").add_range_partition(0, 100)
    table = client.create_table("r", kv_schema(), partitioning)
    errors = table.insert(rows(95, 105))
    assert sorted(e.row["id"] for e in errors) == list(range(100, 105))
    assert all(isinstance(e.error, NotFound) for e in errors)
    assert len(cluster.all_rows("r")) == 5


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"id": 1, "nope": 2}, "unknown column 'nope'"),
        ({"id": None, "name": "x"}, "'id' may not be null"),
        ({"name": "x"}, "primary key column 'id'"),
        ({"id": "one"}, "column 'id'"),
        ({"id": 2**70}, "column 'id'"),
    ],
)
def test_bad_rows_raise_at_the_call_and_write_nothing(
    cluster: FakeCluster, client: Client, bad: dict[str, object], message: str
) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    with pytest.raises(InvalidArgument, match=message):
        table.insert([{"id": 100, "name": "ok"}, bad])
    with pytest.raises(InvalidArgument, match=message):
        table.insert(bad)  # one dict: the path that keeps plain rows as Python values
    assert cluster.all_rows("t") == {}


def test_non_null_columns_without_default_must_be_set_on_insert(client: Client) -> None:
    strict = schema([("id", "int64"), ("must", "string", False)], primary_key="id")
    table = client.create_table("s", strict, hashed(2))
    with pytest.raises(InvalidArgument, match="non-null column 'must'"):
        table.insert([{"id": 1}])
    assert table.update([{"id": 1}]) != []  # updates may leave it out (the row is just missing)


def test_not_the_leader_moves_to_the_hinted_replica(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    table.insert(rows(0, 4))
    for tablet in cluster.table("t").tablets:
        tablet.leader = tablet.replicas[1]  # the master still reports replicas[0]
    assert table.insert(rows(4, 40)) == []
    assert len(cluster.all_rows("t")) == 40
    first = cluster.table("t").tablets[0]
    assert cluster.tservers[first.replicas[0]].calls["Write"] >= 2  # refused with the hint...
    before = cluster.tservers[first.replicas[0]].calls["Write"]
    table.insert(rows(40, 80))
    assert cluster.tservers[first.replicas[0]].calls["Write"] == before  # ...which the cache remembers


def _one_tablet_known_to_the_client(cluster: FakeCluster, client: Client) -> tuple[Table, FakeTablet]:
    """A one-tablet RF 3 table the client has written to, so it knows the tablet's leader."""
    table = client.create_table("t", kv_schema(), Partitioning(), num_replicas=3)
    table.insert(rows(0, 2))
    return table, cluster.table("t").tablets[0]


def test_a_replica_naming_the_leader_is_followed_without_a_pause(
    cluster: FakeCluster, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, tablet = _one_tablet_known_to_the_client(cluster, client)
    tablet.leader = tablet.replicas[1]  # elected meanwhile; the client still knows replicas[0]
    pauses = count_pauses(monkeypatch)
    assert table.insert(rows(2, 4)) == []
    assert pauses == []
    assert cluster.tservers[tablet.replicas[1]].calls["Write"] == 1


def test_replicas_naming_each_other_are_followed_once_each_then_backed_off(
    cluster: FakeCluster, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, tablet = _one_tablet_known_to_the_client(cluster, client)
    first, second = tablet.replicas[0], tablet.replicas[1]
    assert tablet.leader == first
    # A stale view: each names the other twice before the first one takes the write.
    cluster.tservers[first].write_failures = [NotTheLeader("no", leader_hint=second) for _ in range(2)]
    cluster.tservers[second].write_failures = [NotTheLeader("no", leader_hint=first) for _ in range(2)]
    pauses = count_pauses(monkeypatch)
    assert table.insert(rows(2, 4)) == []
    assert len(pauses) == 2
    assert all(isinstance(p, NotTheLeader) for p in pauses)


def test_a_dead_leader_is_skipped_for_a_live_replica(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), Partitioning(), num_replicas=3)
    table.insert(rows(0, 2))
    tablet = cluster.table("t").tablets[0]
    old = tablet.leader
    tablet.leader = tablet.replicas[2]
    cluster.stop_tserver(old)
    assert table.insert(rows(2, 10)) == []
    assert len(cluster.all_rows("t")) == 10


def test_service_unavailable_is_retried_until_it_passes(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), Partitioning(), num_replicas=1)
    leader = cluster.tservers[cluster.table("t").tablets[0].leader]
    leader.write_failures = [ServiceUnavailable("configuring"), ServiceUnavailable("configuring")]
    assert table.insert(rows(0, 3)) == []
    assert leader.calls["Write"] == 3


def test_a_retry_after_a_lost_response_flags_its_errors_ambiguous(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), Partitioning(), num_replicas=1)
    leader = cluster.tservers[cluster.table("t").tablets[0].leader]
    leader.lose_write_responses = 1  # applied, then the answer is lost: the client retries
    errors = table.insert(rows(0, 3))
    assert len(cluster.all_rows("t")) == 3
    assert {e.row["id"] for e in errors} == {0, 1, 2}
    assert all(isinstance(e.error, AlreadyPresent) and e.after_ambiguous_retry for e in errors)
    assert "unknown outcome" in str(errors[0])
    leader.lose_write_responses = 1
    assert table.insert_ignore(rows(3, 6)) == []  # the idempotent op makes retries harmless


def test_every_attempt_of_a_write_carries_the_same_request_id(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), Partitioning(), num_replicas=1)
    leader = cluster.tservers[cluster.table("t").tablets[0].leader]
    leader.lose_write_responses = 1
    table.insert(rows(0, 3))
    table.insert(rows(3, 6))
    ids = [(r.client_id, r.seq_no, r.first_incomplete_seq_no, r.attempt_no) for r in leader.request_ids]
    client_id = ids[0][0]
    assert len(client_id) == 32
    # A retry repeats the id (the tablet can answer it without applying it again); the next
    # write takes the next number and tells the tablet that everything before it completed.
    assert ids == [(client_id, 1, 1, 1), (client_id, 1, 1, 2), (client_id, 2, 2, 1)]


def test_errors_past_the_deadline_are_row_errors_not_silence(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), Partitioning(), num_replicas=1)
    leader = cluster.tservers[cluster.table("t").tablets[0].leader]
    leader.write_failures = [ServiceUnavailable("busy")] * 1000
    errors = table.insert(rows(0, 3), timeout_s=0.3)
    assert len(errors) == 3
    # Which step the deadline cuts short (a master lookup or a retry of the write) depends
    # on the machine's speed; either way every row gets the TimedOut.
    assert all(isinstance(e.error, TimedOut) for e in errors), [str(e.error) for e in errors]


def test_auto_flush_sync_returns_errors_per_call(client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    session = table.new_session()
    assert session.insert(rows(0, 5)) == []
    errors = session.apply(table.new_insert({"id": 1, "name": "dup"}), table.new_insert({"id": 50, "name": "new"}))
    assert [e.row["id"] for e in errors] == [1]
    assert session.pending_errors() == []  # already returned
    assert session.close() == []
    with pytest.raises(IllegalState, match="closed"):
        session.insert(rows(9, 10))


def test_manual_flush_buffers_until_flush_and_refuses_overflow(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    session = table.new_session(FlushMode.MANUAL_FLUSH, buffer_bytes=4000, timeout_s=9.0)
    assert (session.table_name, session.buffer_bytes, session.timeout_s) == ("t", 4000, 9.0)
    assert session.insert(rows(0, 20)) == []
    assert cluster.all_rows("t") == {}
    assert 0 < session.buffered_bytes <= 4000
    with pytest.raises(IllegalState, match="call flush"):
        session.insert(rows(20, 400))
    session.insert(rows(0, 1))  # a duplicate, reported by flush
    errors = session.flush()
    assert [e.row["id"] for e in errors] == [0]
    assert len(cluster.all_rows("t")) == 20
    assert session.buffered_bytes == 0
    assert not session.closed
    assert session.close() == []
    assert session.closed


def test_background_flush_collects_errors_and_keeps_per_key_order(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(3))
    session = table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND, buffer_bytes=2000)
    for i in range(60):  # many small flushes in flight: insert, update, update again per key
        session.insert([{"id": i, "name": "a", "v": 0.0}])
        session.update([{"id": i, "name": "b"}])
        session.upsert([{"id": i, "v": float(i)}])
    session.insert(rows(0, 2))
    errors = session.flush()
    assert sorted(e.row["id"] for e in errors) == [0, 1]
    stored = cluster.all_rows("t")
    assert all(stored[(i,)] == {"id": i, "name": "b", "v": float(i)} for i in range(60))


def test_leaving_a_session_block_with_uncollected_errors_raises(client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    table.insert(rows(0, 3))
    session = table.new_session(FlushMode.MANUAL_FLUSH)
    with pytest.raises(UnhandledRowErrors, match="2 rows were not written") as caught, session:
        session.insert(rows(1, 3))
    assert len(caught.value.errors) == 2


def test_a_write_with_a_stale_schema_is_re_encoded_after_refresh(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    with connect(cluster.master_addresses, options=FAST) as other:
        other.alter_table("t", add_columns=[("extra", "int32")])
    assert table.schema_version == 0
    assert table.insert(rows(0, 4)) == []  # refused for the old version, refreshed, sent again
    assert table.schema_version == 1
    assert cluster.all_rows("t")[(1,)]["extra"] is None


def test_big_batches_are_split_to_fit_one_write(cluster: FakeCluster) -> None:
    options = dataclasses.replace(FAST, write_batch_max_bytes=3000)
    with connect(cluster.master_addresses, options=options) as c:
        table = c.create_table("t", kv_schema(), Partitioning(), num_replicas=1)
        assert table.insert(rows(0, 1000)) == []
    writes = sum(ts.calls.get("Write", 0) for ts in cluster.tservers.values())
    assert writes >= 1000 * 20 // 3000  # about 20 bytes a row: many writes, each under the limit
    assert len(cluster.all_rows("t")) == 1000


def test_writes_wait_for_a_tablet_being_created_and_fail_for_a_dropped_range(
    cluster: FakeCluster, client: Client
) -> None:
    parts = Partitioning().set_range_partition_columns("id").add_range_partition(0, 10).add_range_partition(10, 20)
    table = client.create_table("r", kv_schema(), parts)
    second = next(t for t in cluster.table("r").tablets if t.partition.range.lower)
    cluster.creating_tablets.add(second.id)
    cluster.loop.call_soon_threadsafe(cluster.loop.call_later, 0.3, cluster.creating_tablets.clear)
    table.refresh()
    assert table.insert(rows(0, 20)) == []
    with connect(cluster.master_addresses, options=FAST) as other:
        other.alter_table("r", drop_range_partitions=[(10, 20)])
    errors = table.insert(rows(15, 16))  # the client still believes in [10, 20)
    assert [type(e.error) for e in errors] == [NotFound]
    assert "dropped" in str(errors[0].error)


@pytest.mark.parametrize("rows_in_batch", [1, 5, 32, 33, 200])
def test_small_and_large_batches_map_rows_to_the_same_partitions(rows_in_batch: int) -> None:
    # Up to 32 rows the client maps rows in Python, above it column-wise in Arrow: same answers.
    table_schema = schema([("h", "int64"), ("r", "string"), ("v", "double")], primary_key=["h", "r"])
    partitioning = (
        Partitioning()
        .add_hash_partitions("h", 3)
        .set_range_partition_columns("r")
        .add_range_partition(None, "m")
        .add_range_partition("m", "t")
    )
    partitioner = partitioning.build(table_schema)
    info = TableInfo("t", "t", table_schema, partitioner, 0, 3)
    keys = [{"h": i * 7919, "r": "aemtz"[i % 5] + str(i)} for i in range(rows_in_batch)]
    [batch] = to_op_batches(table_schema, OpType.UPSERT, keys)
    work, uncovered = split_by_partition(info, [batch])
    placed = {
        (row["h"], row["r"]): partitioner.partitions.index(w.partition)
        for w in work
        for b in w.batches
        for row in b.data.to_pylist()
    }
    expected = {(k["h"], k["r"]): partitioner.index_of(partitioner.partition_key(k)) for k in keys}
    assert placed == {k: i for k, i in expected.items() if i >= 0}
    assert sorted(str(row["r"]) for b in uncovered for row in b.data.to_pylist()) == sorted(
        str(k["r"]) for k in keys if expected[(k["h"], k["r"])] < 0
    )


def test_single_dict_rows_map_to_the_partitions_arrow_rows_do() -> None:
    table_schema = schema([("h", "int64"), ("r", "string"), ("v", "double")], primary_key=["h", "r"])
    partitioning = Partitioning().add_hash_partitions("h", 3).set_range_partition_columns("r")
    partitioner = partitioning.add_range_partition(None, "m").add_range_partition("m", "t").build(table_schema)
    info = TableInfo("t", "t", table_schema, partitioner, 0, 3)
    for i in range(60):
        key = {"h": i * 7919 - 100_000, "r": "aemtz\u00e9"[i % 6] + str(i)}
        [batch] = to_op_batches(table_schema, OpType.UPSERT, key)
        assert batch.rows is not None  # kept as Python values
        [arrow_batch] = to_op_batches(table_schema, OpType.UPSERT, pa.Table.from_pylist([key]))
        work, uncovered = split_by_partition(info, [batch])
        arrow_work, arrow_uncovered = split_by_partition(info, [arrow_batch])
        assert [w.partition for w in work] == [w.partition for w in arrow_work]
        assert len(uncovered) == len(arrow_uncovered)


@pytest.mark.parametrize("count", [1, 5, 100])
def test_rows_given_as_dicts_count_the_bytes_arrow_rows_do(count: int) -> None:
    # Dict rows take their size from their buffers' total, not Table.nbytes: the same within
    # Arrow's few bytes of padding, so buffer accounting and splitting treat them alike.
    table_schema = schema([("id", "int64"), ("payload", "string")], primary_key="id")
    dicts = [{"id": i, "payload": "x" * (i % 90)} for i in range(count)]
    [from_dicts] = to_op_batches(table_schema, OpType.INSERT, dicts)
    [from_arrow] = to_op_batches(table_schema, OpType.INSERT, pa.Table.from_pylist(dicts))
    assert from_dicts.data.equals(from_arrow.data)
    assert from_arrow.nbytes <= from_dicts.nbytes <= from_arrow.nbytes + 16


WIDE = schema(
    [
        ("id", "int64"),
        ("b", "bool"),
        ("i8", "int8"),
        ("i16", "int16"),
        ("i32", "int32"),
        ("f", "float"),
        ("d", "double"),
        ("s", "string"),
        ("bin", "binary"),
        ("must", "string", False),
    ],
    primary_key="id",
)
PLAIN_ROW = {"id": -(2**63), "b": True, "i8": -128, "i16": 32767, "i32": -(2**31), "d": 1e300,
             "s": "h\u00e9llo \U0001f600", "bin": b"\x00\xff", "must": "x"}  # fmt: skip


@pytest.mark.parametrize(
    "row",
    [
        PLAIN_ROW,
        {"must": "m", "id": 7},  # columns in any order, some left out
        {"id": 1, "b": None, "i8": None, "f": None, "d": None, "s": None, "bin": None, "must": ""},
        {"id": 2**63 - 1, "i8": 127, "must": "y" * (64 * 1024)},  # limits, inclusive
    ],
)
def test_a_plain_dict_row_waits_as_python_values_and_converts_as_arrow_would(row: dict[str, object]) -> None:
    [batch] = to_op_batches(WIDE, OpType.INSERT, row)
    [reference] = to_op_batches(WIDE, OpType.INSERT, pa.Table.from_pylist([row], WIDE.arrow_schema_of(tuple(row))))
    assert batch.rows == [row]
    assert batch.data.equals(reference.data)
    assert batch.ops.equals(reference.ops)
    # Never below Arrow's size (limits are checked on it), and not far above.
    assert reference.nbytes <= batch.nbytes <= reference.nbytes + 17 * len(row)
    gone = [RowFailure(0, NotFound("gone"))]
    assert batch.errors_at(gone)[0].row == reference.errors_at(gone)[0].row


@pytest.mark.parametrize(
    "change",
    [
        {"d": 1},  # an int for a double: Arrow makes it 1.0
        {"f": 0.1},  # a float column rounds to 32 bits
        {"i32": 1.0},  # a float for an int: Arrow refuses it
        {"i8": True},  # a bool for an int
        {"i16": 2**15},  # out of range
        {"i8": -129},
        {"s": b"bytes"},
        {"bin": "text"},
        {"s": "\ud800"},  # a lone surrogate has no UTF-8 form
        {"s": "z" * (64 * 1024 + 1)},  # over the cell limit
        {"must": None},
        {"id": None},
    ],
)
def test_a_dict_row_that_arrow_would_change_or_refuse_takes_the_full_path(change: dict[str, object]) -> None:
    row = {**PLAIN_ROW, **change}
    try:
        full = to_op_batches(WIDE, OpType.INSERT, [row])  # a list of dicts: always converted at once
    except InvalidArgument as exc:
        refusal = str(exc)
    else:
        refusal = ""
    if refusal:
        with pytest.raises(InvalidArgument) as raised:
            to_op_batches(WIDE, OpType.INSERT, row)
        assert str(raised.value) == refusal
        return
    [batch] = to_op_batches(WIDE, OpType.INSERT, row)
    assert batch.rows is None  # converted at once, as before
    assert batch.data.equals(full[0].data)


def test_joined_dict_rows_never_count_fewer_bytes_than_arrow_takes() -> None:
    # A column with one null among many rows gets a validity bitmap for all of them.
    columns = [("k", "int8"), *((f"c{i}", "int8") for i in range(20)), ("dec", "decimal(20, 2)")]
    table_schema = schema(columns, primary_key="k")
    rows = [{"k": i - 128, **{f"c{c}": None if i == 0 else 1 for c in range(20)}, "dec": None} for i in range(256)]
    batches = [to_op_batches(table_schema, OpType.INSERT, row)[0] for row in rows]
    assert all(b.rows is not None for b in batches)
    joined = OpBatch.joined(batches)
    assert joined.nbytes >= joined.data.nbytes + joined.num_rows


def test_a_dict_changed_after_it_was_applied_is_written_as_it_was(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(2))
    row = {"id": 1, "name": "first", "v": 1.0}
    with table.new_session(FlushMode.MANUAL_FLUSH) as session:
        session.insert(row)
        row["name"] = "changed"
        assert session.flush() == []
    assert [r["name"] for r in cluster.all_rows("t").values()] == ["first"]


def test_plain_dict_rows_joined_convert_once_in_order() -> None:
    table_schema = kv_schema()
    ops = [OpType.INSERT, OpType.UPSERT, OpType.UPDATE]
    lazy = [to_op_batches(table_schema, op, {"id": i, "name": f"n{i}"})[0] for i, op in enumerate(ops)]
    converted = to_op_batches(table_schema, OpType.UPSERT, pa.table({"id": [9], "name": ["n9"]}))[0]
    all_lazy = OpBatch.joined(lazy)
    assert all_lazy.rows is not None
    assert len(all_lazy.rows) == 3
    mixed = OpBatch.joined([*lazy, converted])
    assert mixed.rows is None
    assert mixed.data.to_pylist() == [*(r for b in lazy for r in b.data.to_pylist()), {"id": 9, "name": "n9"}]
    assert mixed.ops.to_pylist() == [*(c for b in lazy for c in b.ops.to_pylist()), int(OpType.UPSERT)]
    assert all_lazy.data.equals(pa.concat_tables([b.data for b in lazy]).combine_chunks())
