"""Re-replication scenarios on real processes: 3 masters, 3 locations x 2 tablet servers, RF 3.

Tablet servers report a follower silent for 3 s as FAILED, and the masters stop placing
replicas on a server silent for 3 s, so healing starts seconds after a loss.  The tests run in
file order on one cluster and one table (each with its own writer's key range):

1. a server in maintenance mode stays down for several failure timeouts and nothing moves;
   once it leaves maintenance its replicas are replaced;
2. a whole location is lost under writes: every tablet is back to three voters in the two
   remaining locations (the policy cannot be met: one holds two), ksck flags the placement,
   and when the location returns its stale replicas are tombstoned, no acknowledged row lost;
3. the leader master is killed in the middle of re-replicating a lost server's replicas, and
   the new leader finishes the job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import nyala
from nyala.client import Client, Partitioning, schema
from nyala.errors import NyalaError
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

from .replica_kit import (
    Layout,
    TabletProbe,
    Writer,
    check_no_acked_row_lost,
    layout,
    members,
    settled_layout,
    wait_tombstoned,
)

pytestmark = pytest.mark.timeout(240)

LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
FAILURE_S = 3
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "scenarios"
TABLETS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=3,
        raft_tick_interval_ms=50,
        raft_heartbeat_interval_ms=200,
        heartbeat_interval_ms=200,
        master_flags=("--tserver-unresponsive-timeout-ms", str(FAILURE_S * 1000)),
        tserver_flags=(
            *("--follower-unavailable-considered-failed-sec", str(FAILURE_S)),
            *("--tablet-copy-start-interval-ms", "500"),
        ),
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("scenarios")), options, locations=LOCATIONS) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 6, what="six live tablet servers")
        c.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", TABLETS), num_replicas=3)
        yield c


def cli(cluster: MiniCluster, *args: str) -> tuple[int, str]:
    """``nyala GROUP... COMMAND MASTERS ARGS...`` in this process: (exit code, standard output)."""
    groups, command, rest = args[0].split(), args[1], args[2:]
    result = CliRunner().invoke(main, [*groups, command, cluster.master_addresses_flag, *rest, "--timeout-s", "30"])
    return result.exit_code, result.stdout


def busiest(cluster: MiniCluster, found: Layout, among: list[ClusterServer] | None = None) -> ClusterServer:
    """The server holding most replicas of the table (first in cluster order on a tie)."""
    counts = {s.uuid: 0 for s in among or cluster.tservers}
    for uuids in members(found).values():
        for uuid in uuids & counts.keys():
            counts[uuid] += 1
    best = max(counts, key=lambda u: counts[u])
    assert counts[best] > 0, "no replica on any candidate server"
    return next(s for s in cluster.tservers if s.uuid == best)


def committed_indexes(cluster: MiniCluster, client: Client, tablet_ids: list[str]) -> dict[str, int]:
    """Each tablet's committed config index, as its leader has it."""
    return {t: TabletProbe(cluster, client, t).leader_state().committed_config.opid_index for t in tablet_ids}


def locations_of(found: Layout) -> dict[str, list[str]]:
    return {tablet_id: sorted(loc for _, loc, _ in replicas) for tablet_id, replicas in found.items()}


def test_a_server_in_maintenance_is_not_re_replicated_until_it_exits(cluster: MiniCluster, client: Client) -> None:
    before = wait_for(lambda: settled_layout(client, TABLE, 3), what="the table's tablets placed", timeout_s=60)
    victim = busiest(cluster, before)
    victim_uuid = victim.uuid
    hosted = sorted(t for t, uuids in members(before).items() if victim_uuid in uuids)
    indexes = committed_indexes(cluster, client, sorted(before))

    code, output = cli(cluster, "tserver state", "enter-maintenance", victim_uuid)
    assert code == 0, output
    assert next(s for s in client.list_tablet_servers() if s.uuid == victim_uuid).maintenance
    cluster.kill(victim)

    # Every leader of its tablets sees it FAILED (a report the master acts on, but for maintenance)...
    def reported_failed() -> bool:
        return all(TabletProbe(cluster, client, t).health_of(victim_uuid) == cpb.FAILED for t in hosted)

    wait_for(reported_failed, what=f"the leaders of {hosted} to report {victim_uuid} FAILED", timeout_s=60)
    # ...and it stays down for three failure timeouts, the masters hearing from everyone else.
    silent_ms = 3 * FAILURE_S * 1000

    def long_silent() -> bool:
        servers = {s.uuid: s for s in client.list_tablet_servers()}
        return servers[victim_uuid].millis_since_heartbeat >= silent_ms and not servers[victim_uuid].live

    wait_for(long_silent, what=f"{silent_ms} ms without a heartbeat from {victim_uuid}", timeout_s=60)
    assert layout(client, TABLE) == before, "a replica moved while its server was in maintenance"
    assert committed_indexes(cluster, client, sorted(before)) == indexes

    code, output = cli(cluster, "tserver state", "exit-maintenance", victim_uuid)
    assert code == 0, output
    after = wait_for(
        lambda: settled_layout(client, TABLE, 3, gone={victim_uuid}),
        what="the replicas of the server out of maintenance replaced",
        timeout_s=90,
    )
    # Replaced within the victim's location: its sibling was free to take them.
    for tablet_id in hosted:
        assert sorted(locations_of(after)[tablet_id]) == sorted(LOCATIONS), after[tablet_id]

    cluster.restart(victim)  # back for the next tests; what it held is stale now
    wait_tombstoned(client, victim, hosted, f"the stale replicas on {victim_uuid} tombstoned")
    wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 6, what="six live tablet servers")


def test_a_lost_location_is_re_replicated_and_its_stale_replicas_tombstoned_on_return(
    cluster: MiniCluster, client: Client
) -> None:
    lost_location = "/dc1/rack3"
    lost = cluster.tservers_in(lost_location)
    lost_uuids = {s.uuid for s in lost}
    before = wait_for(lambda: settled_layout(client, TABLE, 3), what="the table settled", timeout_s=60)
    hosted = {s.uuid: sorted(t for t, uuids in members(before).items() if s.uuid in uuids) for s in lost}
    assert all(hosted.values()), f"a server of {lost_location} holds no replica: {hosted}"
    with Writer(cluster.master_addresses_flag, TABLE, first_key=1_000_000) as writer:
        writer.wait_for_rows(300, "the first writes")
        for server in lost:
            cluster.kill(server)
        during = wait_for(
            lambda: settled_layout(client, TABLE, 3, gone=lost_uuids),
            what=f"every tablet back to 3 voters without {lost_location}",
            timeout_s=120,
        )
        writer.wait_for_rows(300, "writes after healing")
        # Best effort: two locations left for three replicas, so one holds two of them.
        for tablet_id, locations in locations_of(during).items():
            assert set(locations) == set(LOCATIONS) - {lost_location}, (tablet_id, locations)

        # While the location is down it does not count for the policy (Kudu's rule, the
        # master's too: docs/placement.md, "Which locations count"): ksck warns about the
        # unreachable location, not about the tablets' placement.
        code, output = cli(cluster, "cluster", "ksck", "--format", "json")
        assert code == 1, output
        warnings = json.loads(output)["warnings"]
        assert any(lost_location in w and "unreachable" in w for w in warnings), warnings
        assert not any("placement policy violated" in w for w in warnings), warnings

        cluster.restart(*lost)
        for server in lost:
            wait_tombstoned(client, server, hosted[server.uuid], f"the stale replicas on {server.uuid} tombstoned")

        # Back, the location counts again, and every tablet crowded into two is flagged.
        def placement_flagged() -> bool:
            _, output = cli(cluster, "cluster", "ksck", "--format", "json")
            warnings = json.loads(output)["warnings"]
            return all(any(t in w and "placement policy violated" in w for w in warnings) for t in during)

        wait_for(
            placement_flagged, what="ksck to flag every tablet's placement once the location is back", timeout_s=60
        )
        writer.wait_for_rows(300, "writes after the location returned")
    assert writer.failures == [], writer.failures
    # The returned servers took nothing back, and the rest of the cluster is sound.
    assert layout(client, TABLE) == during

    def no_problem() -> bool:
        # Warnings are not checked: the placement stays violated (nothing moves replicas back),
        # and a location's round trip may look slow on a busy machine.
        _, output = cli(cluster, "cluster", "ksck", "--format", "json")
        return not json.loads(output)["problems"]

    wait_for(no_problem, what="ksck to find no problem once the location is back", timeout_s=60)
    check_no_acked_row_lost(cluster, client, sorted(during), writer.acked)


def leader_master(cluster: MiniCluster, client: Client) -> ClusterServer:
    def find() -> ClusterServer | None:
        leaders = [m for m in client.list_masters() if m.role == "LEADER"]
        if len(leaders) != 1:
            return None
        return next(s for s in cluster.masters if str(s.address) in leaders[0].rpc_addresses)

    return wait_for(find, what="one leader master", timeout_s=60, retry_on=(NyalaError,))


def test_a_new_leader_master_finishes_re_replication(cluster: MiniCluster, client: Client) -> None:
    before = wait_for(lambda: settled_layout(client, TABLE, 3), what="the table settled", timeout_s=60)
    victim = busiest(cluster, before)
    victim_uuid = victim.uuid
    hosted = sorted(t for t, uuids in members(before).items() if victim_uuid in uuids)
    old_leader = leader_master(cluster, client)
    with Writer(cluster.master_addresses_flag, TABLE, first_key=2_000_000) as writer:
        writer.wait_for_rows(300, "the first writes")
        cluster.kill(victim)

        def mid_way() -> Layout | None:
            """The layout once some tablet has its replacement added and another is not yet healed."""
            try:
                found = layout(client, TABLE)
            except NyalaError:
                return None
            started = any(len(r) > 3 or any(kind == "NON_VOTER" for _, _, kind in r) for r in found.values())
            unfinished = any(victim_uuid in members(found)[t] for t in hosted)
            return found if started and unfinished else None

        seen = wait_for(mid_way, what="re-replication under way", timeout_s=60)
        cluster.kill(old_leader)
        new_leader = leader_master(cluster, client)
        assert new_leader is not old_leader
        after = wait_for(
            lambda: settled_layout(client, TABLE, 3, gone={victim_uuid}),
            what=f"the new leader master to finish re-replication (it began at {seen})",
            timeout_s=120,
        )
        writer.wait_for_rows(300, "writes after healing")
    assert writer.failures == [], writer.failures
    cluster.restart(old_leader)
    check_no_acked_row_lost(cluster, client, sorted(after), writer.acked)
