"""The whole cluster through the client: restart of every process, and bad input that changes nothing."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import nyala
from nyala import errors
from nyala.client import Partitioning, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions

pytestmark = pytest.mark.timeout(240)

OPTIONS = MiniClusterOptions(num_masters=3, num_tservers=3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    with MiniCluster(tmp_path_factory.mktemp("e2e"), OPTIONS) as running:
        yield running


def kv_table(client: nyala.client.Client, name: str) -> nyala.client.Table:
    kv = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
    return client.create_table(name, kv, Partitioning().add_hash_partitions("id", 3), num_replicas=3)


def test_every_process_restarted_brings_every_row_and_table_back(cluster: MiniCluster) -> None:
    with nyala.connect(cluster.master_addresses_flag) as client:
        table = kv_table(client, "survivor")
        rows = pa.table({"id": pa.array(range(5000), pa.int64()), "v": [f"v{i}" for i in range(5000)]})
        assert table.insert(rows) == []
    for server in [*cluster.tservers, *cluster.masters]:
        cluster.kill(server)  # every process at once, as in a power cut of the whole cluster
    cluster.restart(*cluster.masters, *cluster.tservers)
    with nyala.connect(cluster.master_addresses_flag) as client:
        assert "survivor" in client.list_tables()
        table = client.open_table("survivor")
        back = table.scanner(["id", "v"]).to_arrow().sort_by("id")
        assert back.column("id").to_pylist() == list(range(5000))
        assert back.column("v").to_pylist() == [f"v{i}" for i in range(5000)]
        assert table.insert([{"id": 5000, "v": "after"}]) == []  # and it takes writes again


def test_bad_input_gets_a_clear_error_and_changes_nothing(cluster: MiniCluster) -> None:
    with nyala.connect(cluster.master_addresses_flag) as client:
        with pytest.raises(errors.NotFound, match="no_such_table"):
            client.open_table("no_such_table")
        table = kv_table(client, "strict")
        with pytest.raises(errors.InvalidArgument, match="'id'"):
            table.insert([{"id": "not a number", "v": "x"}])
        with pytest.raises(errors.InvalidArgument, match="'id'"):
            table.insert([{"id": None, "v": "x"}])
        with pytest.raises(errors.InvalidArgument, match="nope"):
            table.insert([{"id": 1, "nope": "x"}])
        with pytest.raises(errors.InvalidArgument, match=r"cell over the limit of 65536 bytes"):
            table.insert([{"id": 2, "v": "x" * (1 << 20)}])
        assert table.count() == 0  # none of the refused calls wrote anything
        with pytest.raises(errors.InvalidArgument, match="replication factor must be odd"):
            client.create_table("two", schema([("id", "int64")], primary_key=["id"]), None, num_replicas=2)
        assert "two" not in client.list_tables()


def test_garbage_on_every_rpc_port_leaves_the_servers_serving(cluster: MiniCluster) -> None:
    rng = random.Random(5)
    for server in [*cluster.masters, *cluster.tservers]:
        for _ in range(5):
            with socket.create_connection((server.address.host, server.address.port), timeout=5) as sock:
                sock.sendall(rng.randbytes(rng.randrange(1, 4096)))
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(5)
                while sock.recv(65536):  # the server closes the connection on us
                    pass
    for server in [*cluster.masters, *cluster.tservers]:
        assert server.process.running, cluster.logs([server])
    with nyala.connect(cluster.master_addresses_flag) as client:
        table = kv_table(client, "after_garbage")
        assert table.insert([{"id": 1, "v": "ok"}]) == []
        assert table.count() == 1


def test_the_cluster_logs_no_traceback_from_bad_input(cluster: MiniCluster, tmp_path: Path) -> None:
    logs = cluster.logs(lines=100_000)
    assert "Traceback" not in logs, logs[-4000:]
