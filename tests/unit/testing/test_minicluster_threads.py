"""MiniCluster shares the machine's cores among its tablet servers' DuckDB threads (no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.errors import InvalidArgument
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions


@pytest.mark.parametrize(
    ("cores", "tservers", "given", "expected"),
    [(8, 3, None, 2), (2, 6, None, 1), (2, 1, None, 2), (8, 3, 0, 0), (8, 3, 5, 5)],
)
def test_each_tablet_server_gets_its_share_of_the_cores_unless_told(
    monkeypatch: pytest.MonkeyPatch, cores: int, tservers: int, given: int | None, expected: int
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    options = MiniClusterOptions(num_tservers=tservers, tserver_storage_threads=given)
    assert options.storage_threads == expected


def test_only_tablet_servers_are_started_with_storage_threads(tmp_path: Path) -> None:
    mc = MiniCluster(tmp_path, MiniClusterOptions(num_tservers=2, tserver_storage_threads=3, ip_block=(7, 9)))
    tserver = mc._argv("tserver", mc.tservers[0].address, tmp_path / "ts")
    assert tserver[tserver.index("--storage-threads") + 1] == "3"
    assert "--storage-threads" not in mc._argv("master", mc.masters[0].address, tmp_path / "m")


def test_a_negative_thread_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="tserver_storage_threads must be >= 0"):
        MiniCluster(tmp_path, MiniClusterOptions(tserver_storage_threads=-1))


def test_web_ports_sit_beside_rpc_ports_so_servers_never_collide(tmp_path: Path) -> None:
    mc = MiniCluster(tmp_path, MiniClusterOptions(num_masters=3, ip_block=(7, 9)), locations={"/a": 2, "/b": 1})
    servers = [*mc.masters, *mc.tservers]
    urls = mc.urls()
    assert urls["127.7.9.1:7051"] == "http://127.7.9.1:8051"
    assert urls["127.7.9.10:7051"] == "http://127.7.9.10:8051"  # the second server of location /a
    assert len({s.http_address for s in servers}) == len(servers)
    for server in servers:
        argv = server.process.argv
        assert server.http_address is not None
        assert argv[argv.index("--webserver-port") + 1] == str(server.address.port + 1000)


def test_a_cluster_without_web_servers_disables_them(tmp_path: Path) -> None:
    mc = MiniCluster(tmp_path, MiniClusterOptions(ip_block=(7, 9), webserver=False))
    argv = mc.tservers[0].process.argv
    assert argv[argv.index("--webserver-port") + 1] == "0"
    assert mc.urls() == {}
    with pytest.raises(RuntimeError, match="without a web server"):
        _ = mc.masters[0].url
