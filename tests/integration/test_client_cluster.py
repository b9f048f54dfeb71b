"""The client against real processes: round trip, tablet-leader and master failover, scan resumption."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import nyala
from nyala.client import Client, FlushMode, Partitioning, ReadMode, ReplicaSelection, schema
from nyala.errors import AlreadyPresent, InvalidArgument
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

pytestmark = pytest.mark.timeout(240)

SCHEMA = schema([("id", "int64"), ("name", "string"), ("v", "double")], primary_key="id")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(num_masters=3, num_tservers=3, raft_heartbeat_interval_ms=200)
    with MiniCluster(Path(tmp_path_factory.mktemp("client-cluster")), options) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        yield c


def rows(start: int, stop: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}", "v": float(i)} for i in range(start, stop)]


def server_at(cluster: MiniCluster, address: str) -> ClusterServer:
    return next(s for s in [*cluster.masters, *cluster.tservers] if str(s.address) == address)


def test_round_trip(client: Client) -> None:
    table = client.create_table("round", SCHEMA, Partitioning().add_hash_partitions("id", 3))
    assert table.insert(rows(0, 3000)) == []
    assert [type(e.error) for e in table.insert(rows(5, 6))] == [AlreadyPresent]
    assert table.count() == 3000
    got = table.to_arrow(["id"], [("id", ">=", 100), ("id", "<", 110)], read_mode=ReadMode.READ_YOUR_WRITES)
    assert sorted(got.column("id").to_pylist()) == list(range(100, 110))
    assert client.alter_table("round", add_columns=[("extra", "int32")]) == 1
    assert table.insert([{"id": 5000, "extra": 7}]) == []
    assert table.to_arrow(predicates=[("id", "=", 5000)]).to_pylist()[0]["extra"] == 7
    # A follower may not have applied the last write yet: READ_LATEST there could miss it.
    tokens = table.scan_tokens(
        ["id"], replica_selection=ReplicaSelection.CLOSEST_REPLICA, read_mode=ReadMode.READ_YOUR_WRITES
    )
    assert sum(client.scanner_from_token(t).count() for t in tokens) == 3001
    with pytest.raises(InvalidArgument):
        table.insert([{"id": "x"}])
    client.delete_table("round")
    assert "round" not in client.list_tables()


def test_writes_resume_after_the_tablet_leader_is_killed(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("failover", SCHEMA, num_replicas=3)
    leader = table.tablets()[0].leader
    assert leader is not None
    acknowledged: list[int] = []
    after_kill: list[int] = []
    killed = threading.Event()

    def writer() -> None:
        for start in range(0, 100_000, 200):
            batch = rows(start, start + 200)
            failed = {e.row["id"] for e in table.insert(batch)}
            ok = [r["id"] for r in batch if r["id"] not in failed]
            acknowledged.extend(ok)
            if killed.is_set():
                after_kill.extend(ok)
                if len(after_kill) >= 2000:
                    return

    thread = threading.Thread(target=writer)
    thread.start()
    victim = server_at(cluster, leader.address)
    try:
        # The writer gets going before the crash.
        wait_for(
            lambda: len(acknowledged) >= 2000 or not thread.is_alive(), what="2000 acknowledged rows", timeout_s=60
        )
        cluster.kill(victim)
        killed.set()
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert len(after_kill) >= 2000  # writes went on after the crash
        stored = set(table.to_arrow(["id"]).column("id").to_pylist())
        assert set(acknowledged) <= stored  # no acknowledged row lost
    finally:
        killed.set()
        thread.join(timeout=120)
        cluster.restart(victim)


def test_concurrent_single_row_writes_each_get_their_own_answer(client: Client) -> None:
    # The leader joins writes that arrive together into one Raft entry; each writer must
    # still get its own row's answer, and of writers racing for one key exactly one wins.
    table = client.create_table("joined", SCHEMA, num_replicas=3)
    contested = [1_000_000 + k for k in range(10)]

    def writer(w: int) -> tuple[list[int], list[int]]:
        won: list[int] = []
        lost: list[int] = []
        for i in range(25):
            assert table.insert(rows(w * 100 + i, w * 100 + i + 1)) == []
            key = contested[i % len(contested)]
            errors = table.insert(rows(key, key + 1))
            assert [type(e.error) for e in errors] in ([], [AlreadyPresent])
            (lost if errors else won).append(key)
        return won, lost

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(writer, range(16)))
    winners = [key for won, _ in results for key in won]
    assert sorted(winners) == contested  # each contested key was inserted exactly once
    assert sum(len(lost) for _, lost in results) == 16 * 25 - len(contested)
    stored = sorted(table.to_arrow(["id"], read_mode=ReadMode.READ_YOUR_WRITES).column("id").to_pylist())
    expected = sorted([w * 100 + i for w in range(16) for i in range(25)] + contested)
    assert stored == expected
    client.delete_table("joined")


def test_an_ordered_scan_resumes_after_its_server_is_killed(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("scanresume", SCHEMA, num_replicas=3)
    assert table.insert(rows(0, 20_000)) == []
    scanner = table.scanner(
        ["id", "name"], ordered=True, batch_size_bytes=16 * 1024, read_mode=ReadMode.READ_YOUR_WRITES
    )
    batches = iter(scanner)
    ids = next(batches).column("id").to_pylist()
    leader = table.tablets()[0].leader
    assert leader is not None
    victim = server_at(cluster, leader.address)
    cluster.kill(victim)
    try:
        for batch in batches:
            ids += batch.column("id").to_pylist()
        assert ids == list(range(20_000))
    finally:
        cluster.restart(victim)


def test_catalog_operations_resume_after_the_leader_master_is_killed(cluster: MiniCluster, client: Client) -> None:
    assert client.leader_master is not None
    victim = server_at(cluster, client.leader_master)
    cluster.kill(victim)
    try:
        table = client.create_table("after-master-failover", SCHEMA, num_replicas=3)
        assert table.insert(rows(0, 10)) == []
        assert client.leader_master != str(victim.address)
        assert "after-master-failover" in client.list_tables()
    finally:
        cluster.restart(victim)


def test_a_background_session_under_load(client: Client) -> None:
    table = client.create_table("bulk", SCHEMA, Partitioning().add_hash_partitions("id", 4))
    with table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND) as session:
        for start in range(0, 50_000, 1000):
            session.insert(rows(start, start + 1000))
    assert table.count() == 50_000
