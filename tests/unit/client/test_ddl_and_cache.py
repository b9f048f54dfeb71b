"""DDL from Python, the meta cache's TTL and paging, and the thread-safe sync client."""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from nyala.client import (
    Client,
    ColumnSchema,
    Partitioning,
    RangePartition,
    RangePartitionBound,
    connect,
    schema,
    schema_from_arrow,
)
from nyala.errors import AlreadyPresent, InvalidArgument, NotFound
from tests.unit.client.fakes import FakeCluster
from tests.unit.client.helpers import FAST, hashed, kv_schema, rows


@pytest.fixture
def client(cluster: FakeCluster) -> Iterator[Client]:
    with connect(cluster.master_addresses, options=FAST) as c:
        yield c


def locations_calls(cluster: FakeCluster) -> int:
    return cluster.masters[0].calls.get("GetTableLocations", 0)


def test_create_from_an_arrow_schema_with_hash_and_range(cluster: FakeCluster, client: Client) -> None:
    arrow = pa.schema([("v", pa.float64()), ("day", pa.date32()), ("id", pa.int64())])
    parts = (
        Partitioning()
        .add_hash_partitions("id", 3, seed=7)
        .set_range_partition_columns("day")
        .add_range_partition([datetime.date(2024, 1, 1)], [datetime.date(2025, 1, 1)])
        .add_range_partition(datetime.date(2025, 1, 1), None)
    )
    table = client.create_table("events", arrow, parts, primary_key=["id", "day"])
    assert table.schema.key_names == ["id", "day"]  # key moved to the front, made non-null
    assert [c.nullable for c in table.schema.columns] == [False, False, True]
    assert len(table.tablets()) == 6
    assert table.partitioner.partition_schema.hash_dimensions[0].seed == 7
    errors = table.insert(
        [{"id": 1, "day": datetime.date(2024, 5, 1), "v": 1.0}, {"id": 2, "day": datetime.date(2023, 5, 1)}]
    )
    assert [e.row["id"] for e in errors] == [2]  # 2023 is in no range


def test_schema_helpers_refuse_bad_definitions() -> None:
    with pytest.raises(InvalidArgument, match="not among the columns"):
        schema([("a", "int64")], primary_key="b")
    with pytest.raises(InvalidArgument, match="unknown type"):
        schema([("a", "int65")], primary_key="a")
    with pytest.raises(InvalidArgument, match="not in the Arrow schema"):
        schema_from_arrow(pa.schema([("a", pa.int64())]), ["b"])
    with pytest.raises(InvalidArgument, match="set_range_partition_columns"):
        Partitioning().add_range_partition(1, 2).build(kv_schema())
    with pytest.raises(InvalidArgument, match="not in the schema"):
        Partitioning().add_hash_partitions("zzz", 2).build(kv_schema())
    with pytest.raises(InvalidArgument, match="not below"):
        Partitioning().set_range_partition_columns("id").add_range_partition(5, 1).build(kv_schema())


def test_create_conflicts_and_bad_replication_are_reported(client: Client) -> None:
    client.create_table("t", kv_schema(), hashed(2))
    with pytest.raises(AlreadyPresent, match="'t'"):
        client.create_table("t", kv_schema(), hashed(2))
    with pytest.raises(InvalidArgument, match="num_replicas"):
        client.create_table("u", kv_schema(), num_replicas=5)
    with pytest.raises(InvalidArgument, match="primary_key"):
        client.create_table("u", pa.schema([("id", pa.int64())]))
    assert client.list_tables() == ["t"]


def test_a_create_whose_answer_was_lost_is_not_a_conflict(cluster: FakeCluster, client: Client) -> None:
    cluster.lose_ddl_responses = 1  # created, then the answer times out: the retry finds the table
    table = client.create_table("t", kv_schema(), hashed(2))
    assert table.name == "t"
    assert len(cluster.tables) == 1
    cluster.lose_ddl_responses = 1
    client.delete_table("t")  # deleted, answer lost, the retry's NotFound is our own success
    assert client.list_tables() == []
    with pytest.raises(NotFound):
        client.delete_table("t")


def test_alter_table_steps(cluster: FakeCluster, client: Client) -> None:
    parts = Partitioning().set_range_partition_columns("id").add_range_partition(0, 100)
    table = client.create_table("t", kv_schema(), parts)
    version = client.alter_table(
        "t",
        add_columns=[("score", "int32", False, 0), ColumnSchema.of("note", "string")],
        drop_columns=["v"],
        rename_columns={"name": "title"},
        add_range_partitions=[(100, 200)],
    )
    assert version == 1
    table.refresh()
    assert table.schema.names == ["id", "title", "score", "note"]
    assert len(table.tablets()) == 2
    client.alter_table("t", drop_range_partitions=[(0, 100)], rename_to="t2")
    assert client.list_tables() == ["t2"]
    assert len(client.open_table("t2").tablets()) == 1
    with pytest.raises(InvalidArgument, match="needs a default"):
        client.alter_table("t2", add_columns=[("bad", "int32", False)])
    with pytest.raises(InvalidArgument, match="nothing to change"):
        client.alter_table("t2")
    with pytest.raises(InvalidArgument, match="range bound"):
        client.alter_table("t2", add_range_partitions=[("x", None)])


def test_range_partitions_with_bound_types(cluster: FakeCluster, client: Client) -> None:
    inclusive, exclusive = RangePartitionBound.INCLUSIVE_BOUND, RangePartitionBound.EXCLUSIVE_BOUND
    parts = Partitioning().set_range_partition_columns("id").add_range_partition(0, 9, upper_bound_type=inclusive)
    client.create_table("t", kv_schema(), parts)
    ranges = cluster.table("t").partitioner
    assert ranges.ranges == [ranges.bounds([0], [10])]
    client.alter_table("t", add_range_partitions=[RangePartition(9, 19, exclusive, inclusive)])
    assert cluster.table("t").partitioner.ranges[1] == ranges.bounds([10], [20])
    client.alter_table("t", drop_range_partitions=[RangePartition(-1, 10, lower_bound_type=exclusive)])
    assert cluster.table("t").partitioner.ranges == [ranges.bounds([10], [20])]
    with pytest.raises(InvalidArgument, match="RangePartition or a \\(lower, upper\\) pair"):
        client.alter_table("t", add_range_partitions=[(1, 2, 3)])  # type: ignore[list-item]


def test_locations_are_cached_until_their_ttl(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(4))
    table.insert(rows(0, 10))
    after_first = locations_calls(cluster)
    for i in range(5):
        table.insert(rows(10 + i, 11 + i))
        table.count()
    assert locations_calls(cluster) == after_first
    cluster.ttl_millis = 1
    table.refresh()  # fetches locations again, now with a 1 ms TTL
    table.count()
    before = locations_calls(cluster)
    for _ in range(2):
        # Expiry is what is under test: let the 1 ms TTL pass for certain, however fast the
        # machine is (two counts within the same millisecond rightly share one fetch).
        time.sleep(0.01)
        table.count()
    assert locations_calls(cluster) >= before + 2


def test_locations_are_fetched_page_by_page(cluster: FakeCluster) -> None:
    options = dataclasses.replace(FAST, locations_fetch_batch=2)
    with connect(cluster.master_addresses, options=options) as c:
        table = c.create_table("t", kv_schema(), hashed(7))
        table.insert(rows(0, 70))
        assert len(table.tablets()) == 7
        assert table.count() == 70
        assert len(cluster.all_rows("t")) == 70


def test_one_sync_client_shared_by_many_threads(cluster: FakeCluster, client: Client) -> None:
    table = client.create_table("t", kv_schema(), hashed(4))
    failures: list[BaseException] = []
    counts: list[int] = []

    def worker(n: int) -> None:
        try:
            session = table.new_session()
            for i in range(n * 100, n * 100 + 100, 10):
                assert session.insert(rows(i, i + 10)) == []
            counts.append(table.count([("id", ">=", n * 100), ("id", "<", n * 100 + 100)]))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert counts == [100] * 8
    assert len(cluster.all_rows("t")) == 800
