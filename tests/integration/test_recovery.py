"""Majority-loss recovery and replica deletion with real processes, driven through the
``nyala`` commands (click's CliRunner) as an operator would, following docs/recovery.md.

Recovery: 1 master, 4 tablet servers, a tablet of 3 replicas; two of the three replicas'
servers are killed for good, the tablet is unavailable, the most up-to-date survivor is
forced to a config of itself, leads, and keeps every acknowledged row; then the fourth server
is added as a voter, which needs tablet copy (skipped until the tablet servers serve it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import nyala
from nyala import services
from nyala.client import Client, ReadMode, schema
from nyala.errors import NyalaError, ServiceUnavailable, TimedOut
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(300)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
OPTIONS = MiniClusterOptions(num_masters=1, num_tservers=4, raft_heartbeat_interval_ms=200, replica_management=False)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    with MiniCluster(tmp_path / "cluster", OPTIONS) as mc:
        yield mc


@pytest.fixture
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        yield c


def nyala_cli(*argv: str) -> Result:
    return CliRunner().invoke(main, list(argv))


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def state(client: Client, server: ClusterServer, tablet_id: str) -> cpb.ConsensusStatePB | None:
    """The replica's own consensus state, or None when its server does not answer."""
    request = cpb.GetConsensusStateRequestPB(dest_uuid=server.uuid, tablet_ids=[tablet_id])
    try:
        response = client.run(
            client.aio.messenger.call(server.address, services.GET_CONSENSUS_STATE, request, timeout=5)
        )
    except NyalaError:
        return None
    return response.tablets[0] if response.tablets else None


def replica_status(client: Client, server: ClusterServer, tablet_id: str) -> tpb.ListTabletsResponsePB.StatusPB:
    """The server's ListTablets entry for the tablet: state, applied index, row count."""
    response = client.run(
        client.aio.messenger.call(server.address, services.LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=10)
    )
    return next(t for t in response.tablets if t.tablet_id == tablet_id)


def ksck_status(cluster: MiniCluster, tablet_id: str) -> tuple[int, str]:
    result = nyala_cli("cluster", "ksck", cluster.master_addresses_flag, "--format", "json", "--timeout-s", "20")
    report: dict[str, Any] = json.loads(result.stdout)
    statuses = {t["tablet_id"]: t["status"] for t in report["tablets"]}
    return result.exit_code, statuses.get(tablet_id, "")


def test_recovering_a_tablet_that_lost_two_of_its_three_replicas(cluster: MiniCluster, client: Client) -> None:
    masters = cluster.master_addresses_flag
    table = client.create_table("recovered", SCHEMA, num_replicas=3)
    (info,) = table.tablets()
    tablet_id = info.tablet_id
    servers = {s.uuid: s for s in cluster.tservers}
    members = [r.uuid for r in info.replicas]
    spare = next(s for s in cluster.tservers if s.uuid not in members)
    acked = list(range(300))
    for start in range(0, 300, 100):
        assert table.insert([{"id": i, "v": f"r{i}"} for i in range(start, start + 100)]) == []

    # Every replica has applied every acknowledged row: whichever survives keeps them all.
    def all_applied() -> bool:
        states = [state(client, servers[u], tablet_id) for u in members]
        leader = next((s for s in states if s is not None and s.role == common_pb2.LEADER), None)
        return leader is not None and all(s is not None and s.applied_index >= leader.commit_index for s in states)

    wait_for(all_applied, what="all three replicas to apply the writes", timeout_s=60)
    leader = next(u for u in members if (s := state(client, servers[u], tablet_id)) and s.role == common_pb2.LEADER)
    survivor = servers[next(u for u in members if u != leader)]
    lost = [servers[u] for u in members if u != survivor.uuid]
    for server in lost:  # two of three, the leader among them, gone for good
        cluster.kill(server)

    # How it shows: writes do not go through, ksck finds the tablet UNAVAILABLE.
    (failed,) = table.insert([{"id": 10_000, "v": "during the outage"}], timeout_s=3)
    assert isinstance(failed.error, TimedOut | ServiceUnavailable), failed.error
    code, status = ksck_status(cluster, tablet_id)
    assert (code, status) == (1, "UNAVAILABLE")

    # The most up-to-date survivor: the only one that answers, ranked first.
    found = ok(nyala_cli("tablet", "find-most-up-to-date", masters, tablet_id, "--format", "json"))
    ranked = json.loads(found.stdout)["replicas"]
    assert ranked[0]["uuid"] == survivor.uuid
    assert ranked[0]["rank"] == 1
    assert ranked[0]["last_index"] >= ranked[0]["applied_index"] > 0
    assert ranked[0]["last_term"] >= 1
    assert {r["uuid"] for r in ranked[1:]} == {s.uuid for s in lost}
    assert all(r["rank"] is None and r["error"] for r in ranked[1:])

    # Force the survivor to a config of itself; it appends the config at a new term and leads.
    out = ok(nyala_cli("remote-replica", "unsafe-change-config", str(survivor.address), tablet_id, survivor.uuid))
    assert "the replica is campaigning" in out.stdout

    def leads_alone() -> bool:
        cs = state(client, survivor, tablet_id)
        return (
            cs is not None
            and cs.role == common_pb2.LEADER
            and [p.permanent_uuid for p in cs.committed_config.peers] == [survivor.uuid]
        )

    wait_for(leads_alone, what="the survivor to lead a config of one", timeout_s=60)
    forced = state(client, survivor, tablet_id)
    assert forced is not None
    assert forced.committed_config.unsafe_config_change

    # Every acknowledged row is there, and the tablet takes writes again.
    stored = table.to_arrow(["id"], read_mode=ReadMode.READ_YOUR_WRITES).column("id").to_pylist()
    assert set(acked) <= set(stored)
    assert table.insert([{"id": 20_000 + i, "v": "after"} for i in range(50)]) == []
    assert table.count(read_mode=ReadMode.READ_YOUR_WRITES) == len(set(stored)) + 50
    # Available again, below its replication factor: one voter of 3.
    wait_for(
        lambda: ksck_status(cluster, tablet_id) == (1, "UNDER_REPLICATED"),
        what="ksck to find the tablet available and under-replicated",
    )

    # Back towards the replication factor: the fourth server joins as a VOTER, which gives it
    # the tablet by a tablet copy.
    if not hasattr(services, "START_TABLET_COPY"):
        pytest.skip("needs tablet copy")
    ok(nyala_cli("tablet", "change-config", "add-replica", masters, tablet_id, spare.uuid, "VOTER",
                 "--timeout-s", "120"))  # fmt: skip
    rows = table.count(read_mode=ReadMode.READ_YOUR_WRITES)

    def copied() -> bool:
        cs = state(client, spare, tablet_id)
        lead = state(client, survivor, tablet_id)
        return (
            cs is not None
            and lead is not None
            and lead.role == common_pb2.LEADER
            and cs.applied_index >= lead.commit_index
            and replica_status(client, spare, tablet_id).num_rows == rows
        )

    wait_for(copied, what="the new replica to copy the tablet and catch up", timeout_s=120)
    lead = state(client, survivor, tablet_id)
    assert lead is not None
    voters = [p.permanent_uuid for p in lead.committed_config.peers if p.member_type == consensus_pb2.VOTER]
    assert sorted(voters) == sorted([survivor.uuid, spare.uuid])
    assert replica_status(client, survivor, tablet_id).num_rows == rows
    assert table.insert([{"id": 30_000, "v": "two voters"}]) == []


def test_remote_replica_delete_tombstones_a_replica(cluster: MiniCluster, client: Client) -> None:
    masters = cluster.master_addresses_flag
    table = client.create_table("deleted", SCHEMA, num_replicas=3)
    (info,) = table.tablets()
    tablet_id = info.tablet_id
    assert table.insert([{"id": i, "v": "x"} for i in range(20)]) == []
    servers = {s.uuid: s for s in cluster.tservers}
    members = [r.uuid for r in info.replicas]

    def leader() -> str | None:
        return next(
            (u for u in members if (s := state(client, servers[u], tablet_id)) and s.role == common_pb2.LEADER), None
        )

    victim = servers[next(u for u in members if u != wait_for(leader, what="a leader", timeout_s=60))]
    outsider = next(s for s in cluster.tservers if s.uuid not in members)

    # A tablet the server does not host: refused, nothing changes.
    missing = nyala_cli("remote-replica", "delete", str(outsider.address), tablet_id)
    assert missing.exit_code == 1
    assert f"tablet {tablet_id} has no replica on the tablet server at {outsider.address}" in missing.output

    out = ok(nyala_cli("remote-replica", "delete", str(victim.address), tablet_id, "--reason", "disk replaced"))
    assert f"tombstoned the replica of tablet {tablet_id}" in out.stdout
    assert "own Raft config still lists" in out.stderr  # and the tablet counts it until it is removed
    listing = ok(nyala_cli("remote-replica", "list", str(victim.address), "--format", "json"))
    assert {r["tablet_id"]: r["state"] for r in json.loads(listing.stdout)}[tablet_id] == "TOMBSTONED"
    again = ok(nyala_cli("remote-replica", "delete", str(victim.address), tablet_id, "--format", "json"))
    assert json.loads(again.stdout)["already_tombstoned"] is True

    # Two replicas of three still make a majority; removing the tombstoned one settles the config.
    assert table.insert([{"id": 100, "v": "after the delete"}]) == []
    ok(nyala_cli("tablet", "change-config", "remove-replica", masters, tablet_id, victim.uuid))
    assert table.count(read_mode=ReadMode.READ_YOUR_WRITES) == 21
