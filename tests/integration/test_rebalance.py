"""``nyala cluster rebalance`` with real processes: 3 locations x 2 tablet servers, RF 3.

The tests run in file order on one cluster: bad input moves nothing; a new location of three
empty tablet servers joins and the rebalancer spreads the tables onto it while rows are being
written (no acknowledged row lost, every table within a skew of 1 in each location); a drain
of two servers is interrupted with SIGINT once a move has started (the moves in flight end,
none is left half done); then the two servers are decommissioned with
``--move-replicas-from-ignored-tservers``, stopped and unregistered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from click.testing import CliRunner, Result

import nyala
from nyala.client import Client, Partitioning, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

from .replica_kit import TabletProbe, Writer

pytestmark = pytest.mark.timeout(420)

LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
NEW_LOCATION = "/dc1/rack4"
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLES = {"written": 6, "quiet": 3}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1,
        raft_tick_interval_ms=50,
        raft_heartbeat_interval_ms=200,
        heartbeat_interval_ms=200,
        master_flags=("--tserver-unresponsive-timeout-ms", "3000"),
        tserver_flags=("--tablet-copy-start-interval-ms", "500"),
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("rebalance")), options, locations=LOCATIONS) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 6, what="six live tablet servers")
        for name, tablets in TABLES.items():
            c.create_table(name, SCHEMA, Partitioning().add_hash_partitions("id", tablets), num_replicas=3)
        yield c


def rebalance(cluster: MiniCluster, *args: str) -> Result:
    argv = ["cluster", "rebalance", cluster.master_addresses_flag, *args, "--timeout-s", "30"]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def layout(client: Client) -> dict[str, dict[str, tuple[tuple[str, str, str], ...]]]:
    """Per table, per tablet: its members (uuid, location, role) as the master knows them."""
    return {
        name: {
            t.tablet_id: tuple(sorted((r.uuid, r.location, r.role) for r in t.replicas))
            for t in client.open_table(name).tablets()
        }
        for name in TABLES
    }


def settled(client: Client) -> dict[str, dict[str, tuple[tuple[str, str, str], ...]]] | None:
    """The layout once every tablet has three voters, one leader and nothing else."""
    current = layout(client)
    for tablets in current.values():
        for members in tablets.values():
            roles = Counter(role for _, _, role in members)
            if len(members) != 3 or roles["LEADER"] != 1 or roles["FOLLOWER"] != 2:
                return None
    return current


def worst_skew_within_locations(client: Client, table: str) -> int:
    servers = [s for s in client.list_tablet_servers() if s.live]
    counts = Counter(r.uuid for t in client.open_table(table).tablets() for r in t.replicas)
    worst = 0
    for location in {s.location for s in servers}:
        here = [counts[s.uuid] for s in servers if s.location == location]
        worst = max(worst, max(here) - min(here))
    return worst


def one_replica_per_location(current: dict[str, Any]) -> bool:
    return all(len({loc for _, loc, _ in members}) == 3 for tablets in current.values() for members in tablets.values())


def test_bad_input_is_refused_and_moves_nothing(cluster: MiniCluster, client: Client) -> None:
    before = wait_for(lambda: settled(client), what="every tablet settled")
    uuid = next(s.uuid for s in client.list_tablet_servers())
    cases = [
        (["--tables", "written,nope"], "no such tables: ['nope']"),
        (["--ignored-tservers", "0" * 32], "not registered"),
        (["--move-replicas-from-ignored-tservers"], "needs --ignored-tservers"),
        (["--ignored-tservers", uuid, "--max-moves-per-server", "0"], "at least 1"),
        (
            ["--disable-policy-fixer", "--disable-cross-location-rebalancing", "--disable-intra-location-rebalancing"],
            "leave nothing to do",
        ),
    ]
    for args, message in cases:
        result = rebalance(cluster, *args)
        assert result.exit_code == 1, (args, result.output)
        assert message in result.output, (args, result.output)
    assert layout(client) == before
    # The report of a balanced cluster plans nothing.
    report = json.loads(rebalance(cluster, "--report-only", "--format", "json").stdout)
    assert report["moves"] == []
    assert {row["location"] for row in report["locations"]} == set(LOCATIONS)


def test_a_new_location_is_filled_under_write_load_with_no_acknowledged_row_lost(
    cluster: MiniCluster, client: Client
) -> None:
    new = cluster.add_location(NEW_LOCATION, 3)
    wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 9, what="nine live tablet servers")
    report = json.loads(rebalance(cluster, "--report-only", "--format", "json").stdout)
    assert {m["phase"] for m in report["moves"]} >= {"cross-location"}
    assert all(m["to_location"] == NEW_LOCATION for m in report["moves"] if m["phase"] == "cross-location")
    with Writer(cluster.master_addresses_flag, "written") as writer:
        writer.wait_for_rows(300, "the first writes")
        result = rebalance(cluster, "--format", "json", "--max-moves-per-server", "2")
        writer.wait_for_rows(300, "writes after rebalancing")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["result"]["reason"] == "BALANCED", out["result"]
    assert out["result"]["failed"] == 0
    assert out["result"]["done"] == len(out["result"]["moves"]) > 0
    assert out["after"]["moves"] == []
    assert writer.failures == [], writer.failures
    current = wait_for(lambda: settled(client), what="every tablet settled")
    assert one_replica_per_location(current)
    on_new = Counter(uuid for tablets in current.values() for ms in tablets.values() for uuid, _, _ in ms)
    assert all(on_new[s.uuid] > 0 for s in new)
    for table in TABLES:
        assert worst_skew_within_locations(client, table) <= 1, layout(client)[table]
    keys: set[int] = set()
    for tablet_id in current["written"]:
        probe = TabletProbe(cluster, client, tablet_id)
        keys.update(probe.scan_ids(probe.leader()))
    missing = sorted(set(writer.acked) - keys)
    assert not missing, f"{len(missing)} acknowledged rows lost, the first {missing[:10]}"


def leaving_servers(cluster: MiniCluster) -> list[str]:
    """The two servers to decommission: one of an old location, one of the new."""
    return [cluster.tservers_in("/dc1/rack1")[1].uuid, cluster.tservers_in(NEW_LOCATION)[0].uuid]


def test_ctrl_c_stops_new_moves_and_leaves_none_half_done(cluster: MiniCluster, client: Client) -> None:
    drain = ("--ignored-tservers", ",".join(leaving_servers(cluster)), "--move-replicas-from-ignored-tservers")
    argv = [sys.executable, "-m", "nyala", "cluster", "rebalance", cluster.master_addresses_flag, *drain]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [*argv, "--max-moves-per-server", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: list[str] = []  # stderr: the progress lines
    printed: list[str] = []  # stdout: the summary

    def read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        for line in stream:
            into.append(line)

    readers = [
        threading.Thread(target=read, args=(process.stderr, lines), daemon=True),
        threading.Thread(target=read, args=(process.stdout, printed), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        wait_for(lambda: any(line.startswith("started:") for line in lines), what="a move started", timeout_s=120)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for reader in readers:
        reader.join(timeout=10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    stdout = "".join(printed)
    assert process.returncode == 130, (stdout, lines)
    assert stdout.startswith("interrupted;"), stdout
    started = [line for line in lines if line.startswith("started:")]
    done = [line for line in lines if line.startswith("DONE")]
    assert any(line.startswith("interrupted: no new move starts") for line in lines), lines
    assert len(done) == len(started), lines  # every move in flight was watched to the end
    # Nothing is left half done: three voters per tablet, no non-voter, no replace mark.
    current = wait_for(lambda: settled(client), what="every tablet settled", timeout_s=30)
    for tablets in current.values():
        for tablet_id in tablets:
            peers = TabletProbe(cluster, client, tablet_id).leader_state().committed_config.peers
            assert not any(p.attrs.replace or p.attrs.promote for p in peers), peers


def test_two_servers_are_drained_then_unregistered(cluster: MiniCluster, client: Client) -> None:
    leaving = [s for s in cluster.tservers if s.uuid in leaving_servers(cluster)]
    uuids = [s.uuid for s in leaving]  # read now: a stopped server's status file is gone
    drain = ("--ignored-tservers", ",".join(uuids), "--move-replicas-from-ignored-tservers")
    result = rebalance(cluster, *drain, "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["result"]["reason"] == "BALANCED", out["result"]
    assert {m["phase"] for m in out["result"]["moves"]} >= {"drain"}
    current = wait_for(lambda: settled(client), what="every tablet settled")
    held = {uuid for tablets in current.values() for ms in tablets.values() for uuid, _, _ in ms}
    assert held.isdisjoint(uuids)
    assert one_replica_per_location(current)
    for server in leaving:
        server.process.stop()

    def gone_dead() -> bool:
        states = {s.uuid: s.live for s in client.list_tablet_servers()}
        return all(not states[uuid] for uuid in uuids)

    wait_for(gone_dead, what="the drained servers seen dead", timeout_s=60)
    for uuid in uuids:
        unregistered = CliRunner().invoke(
            main, ["tserver", "unregister", cluster.master_addresses_flag, uuid, "--timeout-s", "30"]
        )
        assert unregistered.exit_code == 0, unregistered.output
    registered = {s.uuid for s in client.list_tablet_servers()}
    assert registered.isdisjoint(uuids)
    # What is left is balanced: nothing more to plan.
    report = json.loads(rebalance(cluster, "--report-only", "--format", "json").stdout)
    assert report["moves"] == []
