"""Re-replication on other shapes of cluster, with real processes.

- The placement policy of seed 000 holds through re-replication when the remaining servers
  allow it: RF 5 over three locations (no location holds a majority: at most 2 replicas) and
  RF 3 over two locations (at most floor(3/2)+1 = 2).  Each location shape leaves a wrong
  choice open after the loss: with /a:3 /b:2 /c:2 and RF 5, a tablet laid out 2+2+1 that
  loses a replica in a location of two could take a third replica in /a; with /a:3 /b:2 and
  RF 3, a tablet laid out 2+1 that loses its /b replica could take a third in /a.
- A server that flaps (killed and restarted within the failure timeout, a few times) moves
  no replica: every committed config, and its index, is unchanged at the end.

Each test has its own cluster, stopped when it ends.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import nyala
from nyala.client import Client, Partitioning, schema
from nyala.placement import location_limit
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

from .replica_kit import Layout, TabletProbe, Writer, check_no_acked_row_lost, members, settled_layout

pytestmark = pytest.mark.timeout(180)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "topology"


def options(failure_s: int) -> MiniClusterOptions:
    return MiniClusterOptions(
        raft_tick_interval_ms=50,
        raft_heartbeat_interval_ms=200,
        heartbeat_interval_ms=200,
        master_flags=("--tserver-unresponsive-timeout-ms", str(failure_s * 1000)),
        tserver_flags=(
            *("--follower-unavailable-considered-failed-sec", str(failure_s)),
            *("--tablet-copy-start-interval-ms", "500"),
        ),
    )


def counts(found: Layout, tablet_id: str) -> dict[str, int]:
    """Replicas of the tablet per location."""
    per: dict[str, int] = {}
    for _, location, _ in found[tablet_id]:
        per[location] = per.get(location, 0) + 1
    return per


def crowded_victim(cluster: MiniCluster, found: Layout, limit: int) -> ClusterServer:
    """The server whose loss leaves a wrong choice open for most tablets: another location of
    the tablet is at the policy's limit and still has a free server.  Ties go to the server
    with most replicas."""
    by_uuid = {s.uuid: s for s in cluster.tservers}
    servers_in = {loc: len(cluster.tservers_in(loc)) for loc in cluster.locations}
    score = {s.uuid: (0, 0) for s in cluster.tservers}
    for tablet_id, uuids in members(found).items():
        per = counts(found, tablet_id)
        for uuid in uuids:
            own = by_uuid[uuid].location
            tempting = any(loc != own and n == limit and servers_in[loc] > n for loc, n in per.items())
            wrong, held = score[uuid]
            score[uuid] = (wrong + tempting, held + 1)
    return by_uuid[max(score, key=lambda u: (score[u], u))]


@pytest.mark.parametrize(
    ("locations", "replication_factor"),
    [({"/a": 3, "/b": 2, "/c": 2}, 5), ({"/a": 3, "/b": 2}, 3)],
    ids=["rf5-three-locations", "rf3-two-locations"],
)
def test_re_replication_keeps_the_placement_policy(
    tmp_path: Path, locations: dict[str, int], replication_factor: int
) -> None:
    limit = location_limit(replication_factor, len(locations))
    with (
        MiniCluster(tmp_path, options(failure_s=3), locations=locations) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        total = sum(locations.values())
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == total, what="every tablet server live")
        partitioning = Partitioning().add_hash_partitions("id", 3)
        client.create_table(TABLE, SCHEMA, partitioning, num_replicas=replication_factor)
        before = wait_for(lambda: settled_layout(client, TABLE, replication_factor), what="the tablets placed")
        for tablet_id in before:
            assert max(counts(before, tablet_id).values()) <= limit, before[tablet_id]
        victim = crowded_victim(cluster, before, limit)
        victim_uuid = victim.uuid
        with Writer(cluster.master_addresses_flag, TABLE) as writer:
            writer.wait_for_rows(200, "the first writes")
            cluster.kill(victim)
            after = wait_for(
                lambda: settled_layout(client, TABLE, replication_factor, gone={victim_uuid}),
                what=f"every tablet back to {replication_factor} voters",
                timeout_s=120,
            )
            writer.wait_for_rows(200, "writes after healing")
        assert writer.failures == [], writer.failures
        assert {t for t, u in members(after).items() if members(before)[t] != u}, "nothing was re-replicated"
        for tablet_id in after:
            assert max(counts(after, tablet_id).values()) <= limit, (tablet_id, before[tablet_id], after[tablet_id])
        check_no_acked_row_lost(cluster, client, sorted(after), writer.acked)


def health_everywhere(cluster: MiniCluster, client: Client, tablet_ids: list[str], uuid: str) -> bool:
    """Every tablet's leader reports ``uuid`` HEALTHY (or ``uuid`` leads it)."""
    for tablet_id in tablet_ids:
        probe = TabletProbe(cluster, client, tablet_id)
        if probe.leader() != uuid and probe.health_of(uuid) != cpb.HEALTHY:
            return False
    return True


def committed_configs(cluster: MiniCluster, client: Client, tablet_ids: list[str]) -> dict[str, bytes]:
    """Each tablet's committed config (members, types and index) as its leader has it."""
    return {
        t: TabletProbe(cluster, client, t).leader_state().committed_config.SerializeToString(deterministic=True)
        for t in tablet_ids
    }


FLAPS = 3
#: Long enough that a restart (process start, bootstrap, first answer) fits well within it.
FLAP_FAILURE_S = 10


def test_a_flapping_server_moves_no_replica(tmp_path: Path) -> None:
    # Four servers for RF 3: a free server is there to take replicas if any move were decided.
    with (
        MiniCluster(tmp_path, replace(options(failure_s=FLAP_FAILURE_S), num_tservers=4)) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 4, what="four live tablet servers")
        client.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", 3), num_replicas=3)
        before = wait_for(lambda: settled_layout(client, TABLE, 3), what="the tablets placed")
        tablet_ids = sorted(before)
        counts_by_server = {s.uuid: sum(s.uuid in u for u in members(before).values()) for s in cluster.tservers}
        victim = max(cluster.tservers, key=lambda s: counts_by_server[s.uuid])
        victim_uuid = victim.uuid
        hosted = sorted(t for t, u in members(before).items() if victim_uuid in u)
        wait_for(lambda: health_everywhere(cluster, client, hosted, victim_uuid), what="a healthy start")
        configs = committed_configs(cluster, client, tablet_ids)
        with Writer(cluster.master_addresses_flag, TABLE) as writer:
            writer.wait_for_rows(200, "the first writes")
            for flap in range(FLAPS):
                cluster.kill(victim)
                cluster.restart(victim)
                # Back in every tablet before the next flap, so down times never add up.
                wait_for(
                    lambda: health_everywhere(cluster, client, hosted, victim_uuid),
                    what=f"{victim_uuid} healthy in every tablet after flap {flap + 1}",
                    timeout_s=60,
                )
            writer.wait_for_rows(200, "writes after the flaps")
        assert writer.failures == [], writer.failures
        assert settled_layout(client, TABLE, 3) == before
        assert committed_configs(cluster, client, tablet_ids) == configs
        check_no_acked_row_lost(cluster, client, tablet_ids, writer.acked)
