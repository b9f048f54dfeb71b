"""`nyala local-cluster` and MiniCluster: real server processes on loopback, always cleaned up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nyala.server.fs import ServerStatus
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.process import pid_alive
from tests.integration.tls_kit import make_pki

pytestmark = pytest.mark.timeout(180)


def nyala(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nyala", *args], capture_output=True, text=True, timeout=120)


def server_pids(root: Path) -> list[int]:
    pids = []
    for server_dir in root.iterdir():
        status = ServerStatus.read(server_dir) if server_dir.is_dir() else None
        if status is not None:
            pids.append(status.pid)
    return pids


def test_local_cluster_outlives_the_command_and_stops_from_another(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    try:
        # A private IP block would be nicer, but local-cluster's fixed 127.0.0.x addresses are
        # the user-facing behaviour under test; no other test binds them.
        prometheus = tmp_path / "prometheus" / "prometheus.yml"
        started = nyala("local-cluster", "start", "--masters", "1", "--tservers", "2", "--dir", str(root),
                        "--prometheus-config", str(prometheus))  # fmt: skip
        assert started.returncode == 0, started.stderr
        assert "masters:  127.0.0.1:7051" in started.stdout
        assert "http://127.0.0.1:8051" in started.stdout
        assert "http://127.0.0.11:8050" in started.stdout
        scrape = prometheus.read_text()
        assert '      - targets: ["127.0.0.1:8051"]' in scrape
        assert '      - targets: ["127.0.0.10:8050", "127.0.0.11:8050"]' in scrape
        assert "NyalaTabletWithoutLeader" in (prometheus.parent / "nyala-alerts.yml").read_text()
        again_config = nyala("local-cluster", "prometheus-config", "--dir", str(root), "--output",
                             str(tmp_path / "again.yml"))  # fmt: skip
        assert again_config.returncode == 0, again_config.stderr
        assert (tmp_path / "again.yml").read_text() == scrape
        pids = server_pids(root)
        assert len(pids) == 3
        assert all(pid_alive(p) for p in pids)  # still running after the command exited

        status = nyala("local-cluster", "status", "--dir", str(root), "--format", "json")
        described = json.loads(status.stdout)
        assert described["masters"] == ["127.0.0.1:7051"]
        assert described["tservers"] == ["127.0.0.10:7050", "127.0.0.11:7050"]
        assert described["http"] == {
            "127.0.0.1:7051": "http://127.0.0.1:8051",
            "127.0.0.10:7050": "http://127.0.0.10:8050",
            "127.0.0.11:7050": "http://127.0.0.11:8050",
        }
        assert all(described["running"].values())

        again = nyala("local-cluster", "start", "--dir", str(root))
        assert again.returncode != 0
        assert "already running" in again.stderr

        stopped = nyala("local-cluster", "stop", "--dir", str(root))
        assert stopped.returncode == 0, stopped.stderr
        assert not any(pid_alive(p) for p in pids)
    finally:
        if (root / "cluster.json").exists():
            MiniCluster.load(root).stop()


def test_local_cluster_serves_tls_when_given_the_files(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    pki = make_pki(tmp_path / "pki", ["127.0.0.1", "127.0.0.10"])
    try:
        started = nyala("local-cluster", "start", "--masters", "1", "--tservers", "1", "--dir", str(root),
                        "--rpc-certificate-file", str(pki.server_cert), "--rpc-private-key-file", str(pki.server_key),
                        "--rpc-ca-certificate-file", str(pki.ca))  # fmt: skip
        assert started.returncode == 0, started.stderr
        assert f"clients: nyala --rpc-ca-certificate-file {pki.ca}" in started.stdout
        secure = nyala("--rpc-ca-certificate-file", str(pki.ca), "cluster", "ksck", "127.0.0.1:7051")
        assert secure.returncode == 0, secure.stdout + secure.stderr
        plain = nyala("cluster", "ksck", "127.0.0.1:7051", "--timeout-s", "2")
        assert plain.returncode == 1
        # A restart keeps the files the cluster was started with.
        assert nyala("local-cluster", "stop", "--dir", str(root)).returncode == 0
        again = nyala("local-cluster", "start", "--dir", str(root))
        assert again.returncode == 0, again.stderr
        secure = nyala("--rpc-ca-certificate-file", str(pki.ca), "table", "list", "127.0.0.1:7051")
        assert secure.returncode == 0, secure.stderr
    finally:
        if (root / "cluster.json").exists():
            MiniCluster.load(root).stop()


def test_local_cluster_refuses_half_its_tls_flags(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", ["127.0.0.1"])
    target = str(tmp_path / "c")
    alone = nyala("local-cluster", "start", "--dir", target, "--rpc-certificate-file", str(pki.server_cert))
    assert alone.returncode == 2
    assert "must be given together" in alone.stderr
    ca_only = nyala("local-cluster", "start", "--dir", target, "--rpc-ca-certificate-file", str(pki.ca))
    assert ca_only.returncode == 2
    assert "needs rpc_certificate_file" in ca_only.stderr
    assert not (tmp_path / "c" / "cluster.json").exists()


def test_status_of_a_directory_without_a_cluster_is_a_clear_error(tmp_path: Path) -> None:
    result = nyala("local-cluster", "status", "--dir", str(tmp_path))
    assert result.returncode != 0
    assert "no local cluster in" in result.stderr


def test_minicluster_kills_pauses_and_restarts_servers(tmp_path: Path) -> None:
    options = MiniClusterOptions(num_masters=1, num_tservers=2)
    with MiniCluster(tmp_path / "mc", options) as cluster:
        victim = cluster.tservers[0]
        pid = victim.process.pid
        assert pid is not None
        cluster.kill(victim)
        assert not pid_alive(pid)
        cluster.restart(victim)
        assert victim.process.pid != pid
        cluster.pause(cluster.tservers[1])
        assert cluster.tservers[1].process.paused
        cluster.resume(cluster.tservers[1])
        uuids = {t.uuid for t in cluster.tservers}
        assert len(uuids) == 2
        pids = server_pids(tmp_path / "mc")
        assert len(pids) == 3
    assert not any(pid_alive(p) for p in pids)
