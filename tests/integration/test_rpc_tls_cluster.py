"""A cluster whose RPC is TLS: servers talk TLS among themselves, clients need the CA, plain TCP is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import nyala
from nyala.client import Partitioning, schema
from nyala.errors import InvalidArgument, NyalaError
from nyala.rpc.tls import client_context
from nyala.server import ServerOptions
from nyala.testing.minicluster import MiniCluster
from tests.integration.tls_kit import Pki, tls_cluster_options

pytestmark = pytest.mark.timeout(180)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key=["id"])


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MiniCluster, Pki]]:
    root = Path(tmp_path_factory.mktemp("tls-cluster"))
    # Three tablet servers: the replicas' Raft traffic and the tablet servers' heartbeats are TLS too.
    options, pki = tls_cluster_options(root / "pki", num_masters=1, num_tservers=3)
    with MiniCluster(root / "cluster", options) as mc:
        yield mc, pki


def test_a_client_with_the_ca_writes_and_reads_replicated_rows(tls_cluster: tuple[MiniCluster, Pki]) -> None:
    cluster, _ = tls_cluster
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60, ssl_context=cluster.client_ssl_context()) as c:
        table = c.create_table("secure", SCHEMA, Partitioning().add_hash_partitions("id", 2), num_replicas=3)
        assert table.insert([{"id": i, "v": f"v{i}"} for i in range(100)]) == []
        assert table.count() == 100
        assert sorted(table.to_arrow(["id"], [("id", "<", 5)]).column("id").to_pylist()) == [0, 1, 2, 3, 4]
        c.delete_table("secure")


def test_a_client_with_its_own_certificate_is_accepted(tls_cluster: tuple[MiniCluster, Pki]) -> None:
    cluster, pki = tls_cluster
    context = client_context(pki.ca, cert_file=pki.client_cert, key_file=pki.client_key)
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60, ssl_context=context) as c:
        assert isinstance(c.list_tables(), list)


@pytest.mark.parametrize("how", ["plain TCP", "another CA"])
def test_a_client_without_the_right_ca_is_refused(tls_cluster: tuple[MiniCluster, Pki], how: str) -> None:
    cluster, pki = tls_cluster
    context = None if how == "plain TCP" else client_context(pki.other_ca)
    with pytest.raises(NyalaError):
        nyala.connect(cluster.master_addresses_flag, timeout_s=3, ssl_context=context)


def test_tls_files_are_checked_before_the_server_starts(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="together"):
        ServerOptions(rpc_certificate_file="server.crt")
    with pytest.raises(InvalidArgument, match="needs rpc_certificate_file"):
        ServerOptions(rpc_ca_certificate_file="ca.crt")
    missing = ServerOptions(
        rpc_certificate_file=str(tmp_path / "no.crt"), rpc_private_key_file=str(tmp_path / "no.key")
    )
    with pytest.raises(InvalidArgument, match="cannot load the RPC TLS"):
        missing.rpc_ssl_contexts()
