"""The admin CLI against a cluster whose RPC is TLS: `nyala --rpc-ca-certificate-file CA ...`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import nyala
from nyala.client import Partitioning, schema
from nyala.testing.minicluster import MiniCluster
from tests.integration.tls_kit import Pki, tls_cluster_options

pytestmark = pytest.mark.timeout(180)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NYALA_RPC_")}
    command = [sys.executable, "-m", "nyala", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env={**clean, **(env or {})})


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MiniCluster, Pki]]:
    root = Path(tmp_path_factory.mktemp("cli-tls"))
    options, pki = tls_cluster_options(root / "pki", num_masters=1, num_tservers=1)
    with MiniCluster(root / "cluster", options) as mc:
        with nyala.connect(mc.master_addresses_flag, timeout_s=60, ssl_context=mc.client_ssl_context()) as client:
            columns = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
            client.create_table("over_tls", columns, Partitioning().add_hash_partitions("id", 2), num_replicas=1)
        yield mc, pki


def test_commands_reach_masters_and_tablet_servers_with_the_ca(tls_cluster: tuple[MiniCluster, Pki]) -> None:
    cluster, pki = tls_cluster
    ca = ["--rpc-ca-certificate-file", str(pki.ca)]
    listed = cli(*ca, "table", "list", cluster.master_addresses_flag)
    assert listed.returncode == 0, listed.stderr
    assert "over_tls" in listed.stdout
    checked = cli(*ca, "cluster", "ksck", cluster.master_addresses_flag)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A tablet server, through the CLI's own messenger rather than a client.
    replicas = cli(*ca, "remote-replica", "list", str(cluster.tservers[0].address))
    assert replicas.returncode == 0, replicas.stderr
    assert replicas.stdout.count("RUNNING") == 2


def test_the_files_may_come_from_the_environment_and_with_a_client_certificate(
    tls_cluster: tuple[MiniCluster, Pki],
) -> None:
    cluster, pki = tls_cluster
    env = {
        "NYALA_RPC_CA_CERTIFICATE_FILE": str(pki.ca),
        "NYALA_RPC_CERTIFICATE_FILE": str(pki.client_cert),
        "NYALA_RPC_PRIVATE_KEY_FILE": str(pki.client_key),
    }
    listed = cli("table", "list", cluster.master_addresses_flag, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "over_tls" in listed.stdout


@pytest.mark.parametrize("how", ["plain TCP", "another CA"])
def test_without_the_right_ca_a_command_fails_with_an_error(tls_cluster: tuple[MiniCluster, Pki], how: str) -> None:
    cluster, pki = tls_cluster
    ca = [] if how == "plain TCP" else ["--rpc-ca-certificate-file", str(pki.other_ca)]
    listed = cli(*ca, "table", "list", cluster.master_addresses_flag, "--timeout-s", "2")
    assert listed.returncode == 1
    assert "Error:" in listed.stderr
    assert "Traceback" not in listed.stderr


def test_bad_tls_flags_are_refused_before_any_call(tmp_path: Path, tls_cluster: tuple[MiniCluster, Pki]) -> None:
    _, pki = tls_cluster
    alone = cli("--rpc-certificate-file", str(pki.client_cert), "table", "list", "127.0.0.1:1")
    assert alone.returncode == 2
    assert "--rpc-certificate-file and --rpc-private-key-file go together" in alone.stderr
    missing = cli("--rpc-ca-certificate-file", str(tmp_path / "no-ca.pem"), "table", "list", "127.0.0.1:1")
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    unreadable = cli("--rpc-ca-certificate-file", str(garbage), "table", "list", "127.0.0.1:1")
    assert unreadable.returncode == 2
    assert "cannot load the RPC TLS files" in unreadable.stderr
