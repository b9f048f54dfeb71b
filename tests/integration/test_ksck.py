"""``nyala cluster ksck`` against real processes: checksum scans (clean under writes, a
corrupted replica found) and a killed tablet server's tablets UNDER_REPLICATED, with the
reason per replica.

One cluster (1 master, 3 tablet servers, RF 3) for the module; the tests run in file order,
each on its own table, and the last one kills a tablet server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner, Result

import nyala
from nyala.client import Client, Partitioning, schema
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(180)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(num_masters=1, num_tservers=3, raft_heartbeat_interval_ms=150)
    with MiniCluster(Path(tmp_path_factory.mktemp("ksck")), options) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 3, what="three live tablet servers")
        yield c


def ksck(cluster: MiniCluster, *args: str) -> tuple[Result, dict[str, Any]]:
    result = CliRunner().invoke(
        main, ["cluster", "ksck", cluster.master_addresses_flag, "--format", "json", "--timeout-s", "30", *args]
    )
    report: dict[str, Any] = json.loads(result.stdout) if result.exit_code in (0, 1) and result.stdout else {}
    return result, report


def rows(start: int, stop: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"v{i}"} for i in range(start, stop)]


def healthy(cluster: MiniCluster, table: str) -> bool:
    result, report = ksck(cluster, "--tables", table)
    return result.exit_code == 0 and all(t["status"] == "HEALTHY" for t in report["tablets"])


def test_a_checksum_scan_of_an_unknown_table_is_an_error(cluster: MiniCluster, client: Client) -> None:
    client.create_table("known", SCHEMA, Partitioning().add_hash_partitions("id", 2))
    result, _ = ksck(cluster, "--checksum-scan", "--tables", "known,nope")
    assert result.exit_code == 1
    assert "no such tables: ['nope']" in result.output
    assert client.open_table("known").count() == 0  # nothing was written
    assert not client.table_exists("nope")  # and no table was made


def test_a_checksum_scan_with_writes_going_on_is_clean(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("busy", SCHEMA, Partitioning().add_hash_partitions("id", 2))
    assert table.insert(rows(0, 2000)) == []
    stop = threading.Event()
    written = [2000]
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as own:
                busy = own.open_table("busy")
                while not stop.is_set():
                    start = written[0]
                    assert busy.insert(rows(start, start + 100)) == []
                    written[0] = start + 100
        except BaseException as e:  # the test fails on it below
            errors.append(e)

    thread = threading.Thread(target=writer, name="busy-writer", daemon=True)
    thread.start()
    try:
        wait_for(lambda: written[0] >= 2500 or bool(errors), what="writes to be under way")
        result, report = ksck(cluster, "--checksum-scan", "--tables", "busy")
        during = written[0]
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors
    assert during > 2000
    assert result.exit_code == 0, report.get("problems")
    assert len(report["checksums"]) == 2
    for tablet in report["checksums"]:
        assert tablet["result"] == "OK"
        assert tablet["marker_index"] > 0
        assert len(tablet["replicas"]) == 3
        assert len({(r["checksum"], r["rows"]) for r in tablet["replicas"]}) == 1
    assert sum(t["replicas"][0]["rows"] for t in report["checksums"]) >= 2000


def store_file(server: ClusterServer, tablet_id: str) -> Path:
    (path,) = server.data_dir.rglob(f"{tablet_id}.duckdb")
    return path


def test_a_corrupted_replica_is_a_checksum_mismatch(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("damaged", SCHEMA, Partitioning().add_hash_partitions("id", 2))
    assert table.insert(rows(0, 500)) == []
    wait_for(lambda: healthy(cluster, "damaged"), what="every replica of the table to be healthy")
    result, report = ksck(cluster, "--checksum-scan", "--tables", "damaged")
    assert result.exit_code == 0, report.get("problems")
    tablet_id = table.tablets()[0].tablet_id
    victim = cluster.tservers[2]
    victim.process.stop()  # a clean stop writes the MemRowSet to the file
    with duckdb.connect(str(store_file(victim, tablet_id))) as conn:
        conn.execute("UPDATE rows SET v = 'corrupted' WHERE id = (SELECT min(id) FROM rows)")
    cluster.restart(victim)
    wait_for(lambda: healthy(cluster, "damaged"), what="the restarted replica to be healthy again")

    result, report = ksck(cluster, "--checksum-scan", "--tables", "damaged")
    assert result.exit_code == 1
    by_tablet = {t["tablet_id"]: t for t in report["checksums"]}
    damaged = by_tablet[tablet_id]
    assert damaged["result"] == "MISMATCH"
    sums = {r["uuid"]: r["checksum"] for r in damaged["replicas"]}
    others = {s for u, s in sums.items() if u != victim.uuid}
    assert len(others) == 1
    assert sums[victim.uuid] not in others
    assert len({r["rows"] for r in damaged["replicas"]}) == 1  # the same rows, one value differs
    assert all(t["result"] == "OK" for t in report["checksums"] if t["tablet_id"] != tablet_id)
    assert any(f"tablet {tablet_id} of table 'damaged': CHECKSUM MISMATCH" in p for p in report["problems"])
    text = CliRunner().invoke(
        main, ["cluster", "ksck", cluster.master_addresses_flag, "--checksum-scan", "--tables", "damaged"]
    )
    assert text.exit_code == 1
    assert "MISMATCH" in text.stdout
    assert "CHECKSUM MISMATCH" in text.output


def test_a_killed_tablet_server_leaves_its_tablets_under_replicated(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("survivor", SCHEMA, Partitioning().add_hash_partitions("id", 2))
    assert table.insert(rows(0, 100)) == []
    wait_for(lambda: healthy(cluster, "survivor"), what="every replica of the table to be healthy")
    victim = cluster.tservers[1]
    victim_uuid = victim.uuid
    cluster.kill(victim)

    def under_replicated() -> bool:
        result, report = ksck(cluster, "--tables", "survivor")
        return result.exit_code == 1 and all(t["status"] == "UNDER_REPLICATED" for t in report["tablets"])

    wait_for(under_replicated, what="both tablets to be UNDER_REPLICATED (a new leader where one was lost)")
    _, report = ksck(cluster, "--tables", "survivor")
    assert report["tables"][0]["status"] == "UNDER_REPLICATED"
    for tablet in report["tablets"]:
        replicas = {r["uuid"]: r for r in tablet["replicas"]}
        lost = replicas.pop(victim_uuid)
        assert (lost["state"], lost["health"]) == ("UNREACHABLE", "FAILED")
        assert lost["reasons"][0].startswith("unreachable: ")
        assert all(r["health"] == "HEALTHY" and r["reasons"] == [] for r in replicas.values())
    assert any("is UNDER_REPLICATED: 2 of 3 voters are HEALTHY" in p for p in report["problems"])
    text = CliRunner().invoke(main, ["cluster", "ksck", cluster.master_addresses_flag, "--tables", "survivor"])
    assert text.exit_code == 1
    assert "FAILED: unreachable" in text.stdout
