"""The master re-replicates lost replicas (3-4-3), with real processes: 3 locations x 2 tablet
servers, RF 3, writes going on.

The tablet servers report a follower silent for 3 s as FAILED and the master stops placing
replicas on a server silent for 3 s, so healing starts seconds after a kill, not minutes.  The
tests run in file order on one cluster: a server is killed for good and every tablet heals to
three voters, one per location, with no acknowledged row lost; then it comes back and its stale
replicas are tombstoned; then an operator adds a fourth voter and the master evicts one so that
the placement policy still holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import nyala
from nyala import services
from nyala.client import Client, Partitioning, schema
from nyala.errors import NyalaError
from nyala.proto import tserver_pb2 as tpb
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

from .replica_kit import TabletProbe, Writer

pytestmark = pytest.mark.timeout(300)

LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "healing"
TABLETS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1,
        raft_tick_interval_ms=50,
        raft_heartbeat_interval_ms=200,
        heartbeat_interval_ms=200,
        master_flags=("--tserver-unresponsive-timeout-ms", "3000"),
        tserver_flags=("--follower-unavailable-considered-failed-sec", "3", "--tablet-copy-start-interval-ms", "500"),
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("re-replication")), options, locations=LOCATIONS) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 6, what="six live tablet servers")
        yield c


def voters_by_tablet(client: Client) -> dict[str, list[tuple[str, str]]]:
    """Each tablet's voters as the master knows them: (uuid, location)."""
    return {
        t.tablet_id: sorted((r.uuid, r.location) for r in t.replicas if r.role in ("LEADER", "FOLLOWER"))
        for t in client.open_table(TABLE).tablets()
    }


def healed(client: Client, dead: str) -> dict[str, list[tuple[str, str]]] | None:
    """The voters once every tablet has 3, none on ``dead``, one per location (else None)."""
    try:
        voters = voters_by_tablet(client)
        infos = client.open_table(TABLE).tablets()
    except NyalaError:
        return None
    for tablet in infos:
        if len(tablet.replicas) != 3:  # a non-voter still in the config: the move is not over
            return None
    for members in voters.values():
        if len(members) != 3 or dead in {u for u, _ in members} or len({loc for _, loc in members}) != 3:
            return None
    return voters


def leader_states(cluster: MiniCluster, client: Client) -> list[str]:
    """Each tablet's leader's consensus state, for a failure message."""
    states = []
    for tablet in client.open_table(TABLE).tablets():
        state = TabletProbe(cluster, client, tablet.tablet_id).leader_state()
        states.append(str(state).replace("\n", " "))
    return states


def server_by_uuid(cluster: MiniCluster, uuid: str) -> ClusterServer:
    return next(s for s in cluster.tservers if s.uuid == uuid)


def test_a_lost_server_is_replaced_in_its_location_with_no_acknowledged_row_lost(
    cluster: MiniCluster, client: Client
) -> None:
    table = client.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", TABLETS), num_replicas=3)
    before = voters_by_tablet(client)
    victim = cluster.tservers[0]
    victim_uuid, victim_location = victim.uuid, victim.location
    hosted = [t for t, members in before.items() if victim_uuid in {u for u, _ in members}]
    assert hosted, "placement put no replica on the first server"
    with Writer(cluster.master_addresses_flag, table.name) as writer:
        writer.wait_for_rows(500, "the first writes")
        cluster.kill(victim)
        try:
            voters = wait_for(lambda: healed(client, victim_uuid), what="every tablet back to 3 voters", timeout_s=120)
        except AssertionError:
            raise AssertionError(f"not healed; the leaders' states: {leader_states(cluster, client)}") from None
        writer.wait_for_rows(500, "writes after healing")
    assert writer.failures == [], writer.failures
    # Each lost replica was replaced by the other server of its location (the policy kept).
    sibling = next(s.uuid for s in cluster.tservers if s.location == victim_location and s is not victim)
    for tablet_id in hosted:
        assert (sibling, victim_location) in voters[tablet_id]
    for tablet_id in voters:
        TabletProbe(cluster, client, tablet_id).check_replicas_agree([])
    keys: set[int] = set()
    for tablet_id in voters:
        probe = TabletProbe(cluster, client, tablet_id)
        keys.update(probe.scan_ids(probe.leader()))
    missing = sorted(set(writer.acked) - keys)
    assert not missing, f"{len(missing)} acknowledged rows lost, the first {missing[:10]}"
    # Every tablet healthy, and every replica holding the same rows at one Raft index (ksck
    # still exits 1: the dead server is registered and unreachable).
    ksck = CliRunner().invoke(
        main,
        ["cluster", "ksck", cluster.master_addresses_flag, "--checksum-scan", "--tables", TABLE, "--format", "json"],
    )
    report = json.loads(ksck.output)
    assert {t["status"] for t in report["tables"]} == {"HEALTHY"}, ksck.output
    assert [c["result"] for c in report["checksums"]] == ["OK"] * TABLETS, ksck.output


def test_a_returning_server_has_its_replaced_replicas_tombstoned(cluster: MiniCluster, client: Client) -> None:
    victim = cluster.tservers[0]
    cluster.restart(victim)
    voters = voters_by_tablet(client)
    assert all(victim.uuid not in {u for u, _ in members} for members in voters.values())

    def states() -> dict[str, tpb.TabletStatePB] | None:
        with nyala.connect(cluster.master_addresses_flag, timeout_s=30) as c:
            response = c.run(
                c.aio.messenger.call(victim.address, services.LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=10)
            )
        found = {t.tablet_id: t.state for t in response.tablets if t.tablet_id in voters}
        return found if found and all(s == tpb.TOMBSTONED for s in found.values()) else None

    found = wait_for(states, what="the returning server's stale replicas tombstoned", timeout_s=60)
    assert found
    # The cluster still has every tablet at 3 voters: the returned server took nothing back.
    assert voters_by_tablet(client) == voters


def test_an_extra_voter_is_evicted_so_that_the_policy_still_holds(cluster: MiniCluster, client: Client) -> None:
    voters = voters_by_tablet(client)
    tablet_id, members = next(iter(voters.items()))
    holders = {u for u, _ in members}
    extra = next(s for s in cluster.tservers if s.uuid not in holders and cluster.running(s))
    result = CliRunner().invoke(
        main,
        ["tablet", "change-config", "add-replica", cluster.master_addresses_flag, tablet_id, extra.uuid, "VOTER"],
    )
    assert result.exit_code == 0, result.output

    def back_to_three() -> list[tuple[str, str]] | None:
        now = voters_by_tablet(client)[tablet_id]
        return now if len(now) == 3 and len({loc for _, loc in now}) == 3 else None

    # 4 voters, 2 in the extra's location: the master evicts one of those two, never one of
    # the locations holding a single voter.
    final = wait_for(back_to_three, what="the tablet back to 3 voters, one per location", timeout_s=60)
    crowded = extra.location
    assert {u for u, loc in final if loc != crowded} == {u for u, loc in members if loc != crowded}
