"""Location awareness end to end: 3 locations x 2 tablet servers, RF 3, real processes.

One cluster for the module; the tests run in file order and the last one kills a whole
location.  Clients of this machine connect from 127.0.0.1, which the cluster's mapping script
places in /dc1/rack2.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import nyala
from nyala.client import Client, Partitioning, ReadMode, ReplicaSelection, schema
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import GET_TABLET_SERVER_STATUS
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.process import ServerProcess
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(180)

LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
CLIENT_LOCATION = "/dc1/rack2"
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1,
        raft_tick_interval_ms=30,
        raft_heartbeat_interval_ms=150,
        heartbeat_interval_ms=100,
        master_flags=("--tserver-unresponsive-timeout-ms", "3000"),
    )
    root = Path(tmp_path_factory.mktemp("locations"))
    with MiniCluster(root, options, locations=LOCATIONS, client_location=CLIENT_LOCATION) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 6, what="six live tablet servers")
        yield c


def rows(start: int, stop: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"v{i}"} for i in range(start, stop)]


def location_of_address(cluster: MiniCluster) -> dict[str, str]:
    return {str(t.address): t.location for t in cluster.tservers}


def test_every_tablet_spreads_one_replica_per_location(cluster: MiniCluster, client: Client) -> None:
    assert client.aio.client_location == CLIENT_LOCATION
    listed = {s.rpc_addresses[0]: s.location for s in client.list_tablet_servers()}
    assert listed == location_of_address(cluster)
    table = client.create_table("spread", SCHEMA, Partitioning().add_hash_partitions("id", 6))
    per_server: dict[str, int] = {}
    for tablet in table.tablets():
        assert sorted(r.location for r in tablet.replicas) == sorted(LOCATIONS)  # 1 + 1 + 1
        for r in tablet.replicas:
            per_server[r.address] = per_server.get(r.address, 0) + 1
    assert sorted(per_server.values()) == [3] * 6  # and even within each location


def scans_served(servers: list[ClusterServer]) -> dict[str, int]:
    async def ask() -> dict[str, int]:
        messenger = Messenger()
        try:
            out = {}
            for s in servers:
                status = await messenger.call(
                    s.address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB(), timeout=10
                )
                out[s.location + " " + str(s.address)] = status.scans_served
            return out
        finally:
            await messenger.close()

    return run(ask())


def test_a_closest_replica_scan_is_served_from_the_clients_location(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("near", SCHEMA, Partitioning().add_hash_partitions("id", 6))
    assert table.insert(rows(0, 600)) == []
    before = scans_served(cluster.tservers)
    count = table.count(replica_selection=ReplicaSelection.CLOSEST_REPLICA, read_mode=ReadMode.READ_YOUR_WRITES)
    assert count == 600
    after = scans_served(cluster.tservers)
    served = {k: after[k] - before[k] for k in before}
    assert all(n == 0 for k, n in served.items() if not k.startswith(CLIENT_LOCATION)), served
    assert sum(served.values()) >= 6, served  # at least one scan per tablet, all in /dc1/rack2


def ksck(cluster: MiniCluster) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        main, ["cluster", "ksck", cluster.master_addresses_flag, "--format", "json", "--timeout-s", "20"]
    )
    return result.exit_code, json.loads(result.stdout)


def test_ksck_lists_locations_and_warns_about_a_policy_violation(cluster: MiniCluster, client: Client) -> None:
    code, report = ksck(cluster)
    assert code == 0, report["problems"] + report["warnings"]
    summary = {loc["location"]: (loc["tservers"], loc["live_tservers"]) for loc in report["locations"]}
    assert summary == {name: (2, 2) for name in LOCATIONS}
    assert all(loc["replicas"] > 0 and loc["rtt_ms"] is not None for loc in report["locations"])
    assert {s["location"] for s in report["tservers"]} == set(LOCATIONS)

    # One replica over three locations is a majority in one of them: no layout can comply.
    single = client.create_table("single", SCHEMA, Partitioning().add_hash_partitions("id", 2), num_replicas=1)
    try:
        code, report = ksck(cluster)
        assert code == 1
        tablet_ids = {t.tablet_id for t in single.tablets()}
        violations = [w for w in report["warnings"] if "of table 'single' placement policy violated" in w]
        assert {w.split()[1] for w in violations} == tablet_ids
        assert all("no layout on this cluster's servers can comply" in w for w in violations)
        assert all(": 1;" in w for w in violations)  # the replica count of the location is named
        assert report["problems"] == []
    finally:
        client.delete_table("single")


def test_a_failing_mapping_refuses_registration_until_it_is_fixed(cluster: MiniCluster, client: Client) -> None:
    host = cluster.location_host(200)  # an address the mapping script does not know
    data = cluster.root / "stranger"
    argv = [sys.executable, "-m", "nyala", "tserver", "start", "--fs-data-dir", str(data)]
    argv += ["--rpc-bind-address", f"{host}:7050", "--master-addresses", cluster.master_addresses_flag]
    stranger = ServerProcess("stranger", [*argv, "--heartbeat-interval-ms", "100"], cluster.root / "logs" / "s.log")
    master_log = cluster.masters[0].process.log_path
    stranger.start()
    try:
        wait_for(
            lambda: f"at {host}: location mapping command" in master_log.read_text(), what="the refusal in the log"
        )
        reason = next(line for line in master_log.read_text().splitlines() if f"at {host}: location" in line)
        assert "refused the registration of tablet server" in reason
        assert f"exited with status 1: no location for host {host}" in reason
        assert all(s.rpc_addresses != (f"{host}:7050",) for s in client.list_tablet_servers())

        cluster.map_host(host, "/dc1/rack1")  # fixed: the next heartbeat registers it
        wait_for(
            lambda: any(
                s.rpc_addresses == (f"{host}:7050",) and s.location == "/dc1/rack1"
                for s in client.list_tablet_servers()
            ),
            what="registration once the mapping works",
        )
    finally:
        stranger.stop()
    wait_for(
        lambda: all(s.live == (s.rpc_addresses != (f"{host}:7050",)) for s in client.list_tablet_servers()),
        what="the stopped server to be dead to the master",
    )


def test_losing_a_whole_location_keeps_every_tablet_readable_and_writable(cluster: MiniCluster, client: Client) -> None:
    table = client.create_table("survive", SCHEMA, Partitioning().add_hash_partitions("id", 6))
    acknowledged: list[int] = []
    after_kill: list[int] = []
    killed = threading.Event()
    done = threading.Event()

    def writer() -> None:
        start = 0
        while not done.is_set() and len(after_kill) < 3000:
            batch = rows(start, start + 200)
            start += 200
            failed = {e.row["id"] for e in table.insert(batch)}
            ok = [r["id"] for r in batch if r["id"] not in failed]
            acknowledged.extend(ok)
            if killed.is_set():
                after_kill.extend(ok)

    # Lose the location leading the most tablets (at least 2 of the 6), so leaders must move.
    leader_locations = [t.leader.location for t in table.tablets() if t.leader is not None]
    doomed = max(LOCATIONS, key=leader_locations.count)
    assert leader_locations.count(doomed) >= 2
    lost = cluster.tservers_in(doomed)
    lost_addresses = {str(s.address) for s in lost}
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        wait_for(lambda: len(acknowledged) >= 2000 or not thread.is_alive(), what="writes before the loss")
        for server in lost:
            cluster.kill(server)
        killed.set()
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert len(after_kill) >= 3000  # writes went on without the lost location

        def every_tablet_has_a_surviving_leader() -> bool:
            table.refresh()
            leaders = [t.leader for t in table.tablets()]
            return all(leader is not None and leader.address not in lost_addresses for leader in leaders)

        wait_for(every_tablet_has_a_surviving_leader, what="a new leader for every tablet")
        stored = set(table.to_arrow(["id"]).column("id").to_pylist())
        assert set(acknowledged) <= stored  # no acknowledged row lost
        near = table.count(replica_selection=ReplicaSelection.CLOSEST_REPLICA, read_mode=ReadMode.READ_YOUR_WRITES)
        assert near == len(stored)
    finally:
        done.set()
        thread.join(timeout=120)
