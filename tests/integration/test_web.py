"""Every server's web pages and metrics on real processes: pages, JSON forms, counters, health."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nyala.client import Partitioning, schema
from nyala.client.sync import Client
from nyala.testing.minicluster import WEB_PORT_OFFSET, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

pytestmark = pytest.mark.timeout(240)

MASTER_PAGES = [
    "/",
    "/status",
    "/healthz",
    "/rpcz",
    "/logs",
    "/tables",
    "/tservers",
    "/masters",
    "/locations",
    "/tasks",
]
TSERVER_PAGES = ["/", "/status", "/healthz", "/rpcz", "/logs", "/tablets", "/scanners", "/maintenance"]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def get_json(url: str) -> dict[str, object]:
    status, body = get(url)
    assert status == 200, f"{url}: {status} {body[:300]}"
    data = json.loads(body)
    assert isinstance(data, dict)
    return data


def labelled(url: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric on a /metrics page, by their labels."""
    status, body = get(url + "/metrics")
    assert status == 200
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == name
    }


def metrics(url: str) -> dict[str, float]:
    """Every sample of a /metrics page, keyed by name and labels, summed over other labels."""
    status, body = get(url + "/metrics")
    assert status == 200
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def wait_tservers_live(cluster: MiniCluster) -> None:
    """Until the leader master counts every tablet server live (a busy machine may delay the
    first heartbeats past the master's warm-up, after which too few servers is a bad request)."""

    def live() -> int:
        status, body = get(cluster.masters[0].url + "/api/tservers")
        return int(json.loads(body)["summary"]["live"]) if status == 200 else 0

    wait_for(lambda: live() == len(cluster.tservers), what="every tablet server to heartbeat to the master")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    with MiniCluster(tmp_path, MiniClusterOptions(num_masters=1, num_tservers=3)) as mc:
        wait_tservers_live(mc)
        yield mc


def test_every_page_answers_in_html_and_json_and_counters_move(cluster: MiniCluster) -> None:
    master, tserver = cluster.masters[0], cluster.tservers[0]
    client = Client(cluster.master_addresses_flag)
    try:
        kv = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
        for name in ("kv", "other"):
            client.create_table(name, kv, Partitioning().add_hash_partitions("id", 2), num_replicas=3)
        before = metrics(tserver.url)
        table = client.open_table("kv")
        table.insert([{"id": i, "v": "x"} for i in range(500)])
        table.upsert([{"id": i, "v": "y"} for i in range(10)])
        table.delete([{"id": i} for i in range(5)])
        assert table.scanner(["id"]).to_arrow().num_rows == 495
        after = metrics(tserver.url)
        written = {"insert": 0.0, "upsert": 0.0, "delete": 0.0}
        for t in cluster.tservers:
            for labels, value in labelled(t.url, "nyala_tablet_rows_written_total").items():
                written[dict(labels)["op"]] = written.get(dict(labels)["op"], 0.0) + value
        scanned = sum(metrics(t.url)["nyala_tablet_rows_scanned_total"] for t in cluster.tservers)
    finally:
        client.close()

    # Rows count once, on the leader that answered the write; the scan read them all.
    assert (written["insert"], written["upsert"], written["delete"]) == (500, 10, 5)
    assert scanned >= 495
    master_metrics = metrics(master.url)
    assert master_metrics["nyala_master_heartbeats_total"] > 0
    created = labelled(master.url, "nyala_master_catalog_operations_total")
    assert created[(("operation", "create_table"), ("outcome", "ok"))] == 2
    placements = labelled(master.url, "nyala_master_placement_decisions_total")
    assert placements[(("kind", "new_tablet"), ("outcome", "policy_met"))] == 4
    health = labelled(master.url, "nyala_master_tablets")
    wait_for(lambda: labelled(master.url, "nyala_master_tablets")[(("health", "healthy"),)] == 4,
             what="every tablet healthy in the master's metrics")  # fmt: skip
    assert health[(("health", "leaderless"),)] == 0
    assert labelled(master.url, "nyala_master_tablet_servers")[(("liveness", "live"), ("state", "NONE"))] == 3
    assert sum(metrics(t.url)["nyala_tablets"] for t in cluster.tservers) == 12
    assert master_metrics["nyala_event_loop_lag_seconds_count"] >= 0
    assert "nyala_process_open_fds" in master_metrics

    for base, pages in ((master.url, MASTER_PAGES), (tserver.url, TSERVER_PAGES)):
        for path in pages:
            status, body = get(base + path)
            assert status == 200, f"{base}{path}: {status} {body[:300]}"
            assert get_json(base + "/api" + (path if path != "/" else ""))
            assert get_json(base + path + "?format=json")

    # The master's pages name the tables, their tablets and where each replica is.
    tables = get_json(master.url + "/api/tables")["tables"]
    assert isinstance(tables, list)
    assert sorted(t["name"] for t in tables) == ["kv", "other"]
    kv_id = next(t["id"] for t in tables if t["name"] == "kv")
    tablets = get_json(master.url + f"/api/tables/{kv_id}")["tablets"]
    assert isinstance(tablets, list)
    assert len(tablets) == 2
    assert all(len(t["replicas"]) == 3 for t in tablets)
    servers = get_json(master.url + "/api/tservers")["tservers"]
    assert isinstance(servers, list)
    assert {s["liveness"] for s in servers} == {"live"}
    server_status = get_json(master.url + "/status")["server"]
    assert isinstance(server_status, dict)
    assert server_status["role"] == "LEADER"
    assert server_status["http_address"] == str(master.http_address)

    # The tablet server's pages: its four replicas, one tablet's peers.
    listed = get_json(tserver.url + "/api/tablets")["tablets"]
    assert isinstance(listed, list)
    assert len(listed) == 4
    one = get_json(tserver.url + f"/api/tablets/{listed[0]['tablet_id']}")
    assert isinstance(one["peers"], list)
    assert len(one["peers"]) == 3

    # Writes, scans, elections and the WAL show in the counters.
    assert after["nyala_rpc_calls_total"] > before["nyala_rpc_calls_total"]
    assert after["nyala_wal_appends_total"] > before["nyala_wal_appends_total"]
    assert after["nyala_wal_fsync_duration_seconds_count"] > before["nyala_wal_fsync_duration_seconds_count"]
    assert after["nyala_rpc_received_bytes_total"] > before["nyala_rpc_received_bytes_total"]
    leaders = sum(metrics(t.url)["nyala_raft_elections_won_total"] for t in cluster.tservers)
    assert leaders >= 4  # every tablet elected a leader somewhere
    assert sum(metrics(t.url).get("nyala_raft_replicas", 0) for t in cluster.tservers) == 12
    assert metrics(master.url)["nyala_process_resident_memory_bytes"] > 0

    # Bad input: 400 naming the parameter, 404 naming the id; RPC keeps serving.
    status, body = get(master.url + "/tables?limit=abc")
    assert status == 400
    assert "'limit' must be an integer" in body
    status, body = get(master.url + "/api/tables/no-such-table")
    assert status == 404
    assert "no-such-table" in json.loads(body)["error"]
    status, body = get(tserver.url + "/tablets/unknown")
    assert status == 404
    assert "unknown" in body
    status, body = get(master.url + "/no/such/page")
    assert status == 404
    assert "no page" in body
    status, _ = get(master.url + "/tables?limit=" + "9" * 9000)  # beyond the request-line limit
    assert status == 400
    status, body = get(master.url + "/tables?offset=%ZZ&x=1")
    assert status == 400
    status, body = get(tserver.url + "/tablets?state=NOT_A_STATE")
    assert status == 400
    assert "'state'" in body
    # A client that sends half a request and waits holds a connection, nothing more.
    host, port = str(master.http_address).rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as slow:
        slow.sendall(b"GET /tables HTTP/1.1\r\nHost: x\r\n")
        again = Client(cluster.master_addresses_flag)
        try:
            assert again.open_table("kv").scanner(["id"]).to_arrow().num_rows == 495
        finally:
            again.close()
        assert get(master.url + "/healthz")[0] == 200

    # A tablet server that loses every master says so on /healthz.
    assert get(tserver.url + "/healthz")[0] == 200
    cluster.kill(master)
    wait_for(lambda: get(tserver.url + "/healthz")[0] == 503, what="the tablet server to turn unready", timeout_s=60)
    assert "no master answers" in get(tserver.url + "/healthz?format=json")[1]


def test_a_disabled_web_server_serves_nothing(tmp_path: Path) -> None:
    with MiniCluster(tmp_path, MiniClusterOptions(num_masters=1, num_tservers=1, webserver=False)) as mc:
        assert mc.urls() == {}
        server = mc.tservers[0]
        web_port = server.address.port + WEB_PORT_OFFSET  # where the cluster would have put it
        with pytest.raises(OSError):
            socket.create_connection((server.address.host, web_port), timeout=5).close()
        status = json.loads((Path(server.data_dir) / "server.json").read_text())
        assert status.get("http_address", "") == ""


def test_servers_with_metrics_off_serve_and_export_nothing(tmp_path: Path) -> None:
    off = ("--no-metrics-enabled",)
    options = MiniClusterOptions(num_masters=1, num_tservers=1, master_flags=off, tserver_flags=off)
    with MiniCluster(tmp_path, options) as mc:
        wait_tservers_live(mc)
        client = Client(mc.master_addresses_flag)
        try:
            kv = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
            client.create_table("kv", kv, Partitioning().add_hash_partitions("id", 2), num_replicas=1)
            table = client.open_table("kv")
            table.insert([{"id": i, "v": "x"} for i in range(50)])
            assert table.scanner(["id"]).to_arrow().num_rows == 50
        finally:
            client.close()
        for server in (*mc.masters, *mc.tservers):
            status, body = get(server.url + "/metrics")
            assert status == 200
            assert [f.name for f in text_string_to_metric_families(body)] == []
            assert get(server.url + "/tables" if server in mc.masters else server.url + "/tablets")[0] == 200
