"""Reads and writes of a cluster whose RPC is TLS, on both read paths, and what a wrong CA gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

import nyala
from nyala.client import Client, Partitioning, schema
from nyala.spark import delete_rows
from nyala.testing.minicluster import MiniCluster
from tests.integration.tls_kit import Pki, tls_cluster_options

pytestmark = pytest.mark.timeout(240)

ROWS = [(i, f"v{i}") for i in range(200)]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MiniCluster, Pki]]:
    root = Path(tmp_path_factory.mktemp("spark-tls"))
    options, pki = tls_cluster_options(root / "pki", num_masters=1, num_tservers=2)
    with MiniCluster(root / "cluster", options) as mc:
        yield mc, pki


@pytest.fixture(scope="module")
def tls_client(tls_cluster: tuple[MiniCluster, Pki]) -> Iterator[Client]:
    cluster, _ = tls_cluster
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60, ssl_context=cluster.client_ssl_context()) as c:
        table = c.create_table(
            "secure",
            schema([("id", "int64"), ("v", "string")], primary_key=["id"]),
            Partitioning().add_hash_partitions("id", 4),
            num_replicas=1,
        )
        assert table.insert([{"id": i, "v": v} for i, v in ROWS]) == []
        yield c


def read(spark: SparkSession, fmt: str, cluster: MiniCluster, table: str, **options: str) -> DataFrame:
    reader = spark.read.format(fmt).option("nyala.master", cluster.master_addresses_flag).option("nyala.table", table)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_both_read_paths_read_a_tls_cluster(
    spark: SparkSession, read_path: str, read_format: str, tls_cluster: tuple[MiniCluster, Pki], tls_client: Client
) -> None:
    cluster, pki = tls_cluster
    df = read(spark, read_format, cluster, "secure", **{"nyala.tlsCaFile": str(pki.ca)})
    if read_path == "columnar":
        assert "NyalaScan" in df._jdf.queryExecution().executedPlan().toString()
    assert sorted(tuple(r) for r in df.collect()) == ROWS
    assert sorted(r.id for r in df.filter("id >= 190").select("id").collect()) == list(range(190, 200))


def test_both_read_paths_present_a_client_certificate(
    spark: SparkSession, read_format: str, tls_cluster: tuple[MiniCluster, Pki], tls_client: Client
) -> None:
    cluster, pki = tls_cluster
    options = {
        "nyala.tlsCaFile": str(pki.ca),
        "nyala.tlsCertFile": str(pki.client_cert),
        "nyala.tlsKeyFile": str(pki.client_key),
    }
    # The servers check a certificate a client presents: a wrong one would fail the handshake.
    assert read(spark, read_format, cluster, "secure", **options).count() == len(ROWS)


def test_writes_through_the_nyala_name_reach_a_tls_cluster(
    spark: SparkSession, tls_cluster: tuple[MiniCluster, Pki], tls_client: Client
) -> None:
    cluster, pki = tls_cluster
    df = spark.createDataFrame([(1000 + i, "w") for i in range(10)], "id long, v string")
    writer = df.write.format("nyala").mode("append").option("nyala.master", cluster.master_addresses_flag)
    writer.option("nyala.table", "secure").option("nyala.tlsCaFile", str(pki.ca)).save()
    assert tls_client.open_table("secure").count() == len(ROWS) + 10
    delete_rows(df, "secure", master=cluster.master_addresses_flag, tlsCaFile=str(pki.ca))
    assert tls_client.open_table("secure").count() == len(ROWS)


def test_a_wrong_ca_is_refused_naming_the_certificate(
    spark: SparkSession, read_format: str, tls_cluster: tuple[MiniCluster, Pki], tls_client: Client
) -> None:
    cluster, pki = tls_cluster
    options = {"nyala.tlsCaFile": str(pki.other_ca), "nyala.operationTimeoutMs": "3000"}
    # The columnar path fails in load() (its planner reads the schema), the Python path in collect().
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        read(spark, read_format, cluster, "secure", **options).collect()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nyala.tlsCaFile": "/no/such/ca.pem"}, "option 'nyala.tlsCaFile': cannot read the file '/no/such/ca.pem'"),
        ({"nyala.tlsKeyFile": "key.pem"}, "option 'nyala.tlsKeyFile' needs 'nyala.tlsCertFile'"),
        ({"nyala.tlsCheckHostname": "maybe"}, "option 'nyala.tlsCheckHostname' must be true or false"),
    ],
)
def test_bad_tls_options_are_refused_on_the_driver(
    spark: SparkSession, read_format: str, tls_cluster: tuple[MiniCluster, Pki], options: dict[str, str], message: str
) -> None:
    cluster, _ = tls_cluster
    with pytest.raises(Exception, match=message):
        read(spark, read_format, cluster, "secure", **options).collect()


def open_jvm_connection(spark: SparkSession, address: str, ca_file: str) -> None:
    """Open (and close) the columnar reader's RpcConnection to ``address`` with TLS trusting ``ca_file``.

    The planner reaches the masters with the Python client first, so a read with a wrong CA
    never gets as far as the JVM's own connections: this opens one directly, by reflection
    (the classes are package-private).
    """
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    assert jvm is not None
    assert gateway is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()

    def constructor(name: str, arity: int) -> object:
        cls = jvm.java.lang.Class.forName(f"nyala.spark.columnar.{name}", True, loader)
        found = next(c for c in cls.getDeclaredConstructors() if c.getParameterCount() == arity)
        found.setAccessible(True)
        return found

    def new(ctor: object, *values: object) -> object:
        args = gateway.new_array(jvm.java.lang.Object, len(values))
        for i, value in enumerate(values):
            args[i] = value
        return ctor.newInstance(args)  # type: ignore[attr-defined]

    tls = new(constructor("RpcTls", 4), ca_file, None, None, True)
    connection = new(constructor("RpcConnection", 3), address, jvm.java.lang.Integer(5000), tls)
    close = connection.getClass().getDeclaredMethod("close", gateway.new_array(jvm.java.lang.Class, 0))  # type: ignore[attr-defined]
    close.setAccessible(True)
    close.invoke(connection, gateway.new_array(jvm.java.lang.Object, 0))


def test_the_jvm_connection_checks_the_tablet_servers_certificate(
    spark: SparkSession, tls_cluster: tuple[MiniCluster, Pki]
) -> None:
    cluster, pki = tls_cluster
    address = str(cluster.tservers[0].address)
    open_jvm_connection(spark, address, str(pki.ca))
    with pytest.raises(Exception, match=rf"TLS handshake with tablet server {address} failed: PKIX") as raised:
        open_jvm_connection(spark, address, str(pki.other_ca))
    assert "nyala.tlsCaFile" in str(raised.value)
