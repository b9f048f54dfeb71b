"""A cluster whose RPC is TLS: servers talk TLS among themselves, clients need the CA, plain TCP is refused."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

import nyala
from nyala.client import Partitioning, schema
from nyala.errors import InvalidArgument, NyalaError
from nyala.proto import rpc_pb2
from nyala.rpc import Messenger, RpcOptions
from nyala.rpc.loop import run
from nyala.rpc.method import PING
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


def test_required_authentication_refuses_clients_without_a_certificate(tmp_path: Path) -> None:
    options, pki = tls_cluster_options(tmp_path / "pki", num_masters=1, num_tservers=3)
    options = dataclasses.replace(options, rpc_authentication="required")
    with MiniCluster(tmp_path / "cluster", options) as cluster:
        # The servers present their certificates to each other: RF 3 works, Raft and heartbeats included.
        certified = client_context(pki.ca, cert_file=pki.client_cert, key_file=pki.client_key)
        with nyala.connect(cluster.master_addresses_flag, timeout_s=60, ssl_context=certified) as c:
            table = c.create_table("strict", SCHEMA, Partitioning().add_hash_partitions("id", 2), num_replicas=3)
            assert table.insert([{"id": i, "v": "x"} for i in range(20)]) == []
            assert table.count() == 20
        # The CA alone is no longer enough, for the masters or for a tablet server.
        with pytest.raises(NyalaError):
            nyala.connect(cluster.master_addresses_flag, timeout_s=3, ssl_context=client_context(pki.ca))
        with pytest.raises(NyalaError):
            run(_ping(str(cluster.tservers[0].address), client_context(pki.ca)))
        assert run(_ping(str(cluster.tservers[0].address), certified))
        # A certificate from another CA is refused too.
        other = client_context(pki.ca, cert_file=pki.other_ca, key_file=pki.other_ca_key)
        with pytest.raises(NyalaError):
            nyala.connect(cluster.master_addresses_flag, timeout_s=3, ssl_context=other)


async def _ping(address: str, context: ssl.SSLContext) -> bool:
    messenger = Messenger(RpcOptions(connect_timeout_s=3), ssl_context=context)
    try:
        await messenger.call(address, PING, rpc_pb2.PingRequest(), timeout=3)
        return True
    finally:
        await messenger.close()


def test_required_authentication_needs_the_ca_and_a_known_value() -> None:
    with pytest.raises(InvalidArgument, match="needs rpc_ca_certificate_file"):
        ServerOptions(rpc_certificate_file="s.crt", rpc_private_key_file="s.key", rpc_authentication="required")
    with pytest.raises(InvalidArgument, match="must be one of optional, required"):
        ServerOptions(rpc_authentication="sometimes")
