"""A location cut off from the rest of the cluster, re-replicated around, then healed.

One master and 3 locations x 2 tablet servers, RF 3, obeying the network fault seam
(``MiniClusterOptions(network_faults=True)``).  The servers of one location are cut off from
every other server, the master included, for longer than the failure timeout (3 s), under
writes.  Unlike a crash the cut-off replicas keep running: their leaders lose their majority
and step down, and the other two replicas of each tablet elect a leader, which reports the
cut-off one FAILED; the master replaces it in the two remaining locations.  After the heal the
cut-off replicas are stale: they are tombstoned, no acknowledged write is lost, and a monitor
sampling every replica throughout never sees two leaders of one tablet in one term.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import nyala
from nyala import services
from nyala.client import Partitioning, schema
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

from .replica_kit import (
    LeaderMonitor,
    TabletProbe,
    Writer,
    check_no_acked_row_lost,
    members,
    settled_layout,
    wait_tombstoned,
)

pytestmark = pytest.mark.timeout(240)

LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
FAILURE_S = 3
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "cut"


def test_a_cut_off_location_is_re_replicated_and_tombstoned_after_the_heal(tmp_path: Path) -> None:
    options = MiniClusterOptions(
        raft_tick_interval_ms=50,
        raft_heartbeat_interval_ms=200,
        heartbeat_interval_ms=200,
        master_flags=("--tserver-unresponsive-timeout-ms", str(FAILURE_S * 1000)),
        tserver_flags=(
            *("--follower-unavailable-considered-failed-sec", str(FAILURE_S)),
            *("--tablet-copy-start-interval-ms", "500"),
        ),
        network_faults=True,
    )
    with (
        MiniCluster(tmp_path, options, locations=LOCATIONS) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 6, what="six live tablet servers")
        client.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", 3), num_replicas=3)
        before = wait_for(lambda: settled_layout(client, TABLE, 3), what="the tablets placed", timeout_s=60)
        cut_location = "/dc1/rack3"
        cut = cluster.tservers_in(cut_location)
        cut_uuids = {s.uuid for s in cut}
        hosted = {s.uuid: sorted(t for t, u in members(before).items() if s.uuid in u) for s in cut}
        # At least one tablet is led from the location to be cut, so that a leader is cut off.
        led = sorted(before)[0]
        probe = TabletProbe(cluster, client, led)
        (cut_member,) = members(before)[led] & cut_uuids
        if probe.leader() != cut_member:
            request = cpb.LeaderStepDownRequestPB(dest_uuid=probe.leader(), tablet_id=led, new_leader_uuid=cut_member)
            probe.call(probe.leader(), services.LEADER_STEP_DOWN, request)
            wait_for(lambda: probe.leader() == cut_member, what=f"{cut_member} leading {led}", timeout_s=60)
        term_before = probe.leader_state().current_term
        try:
            with (
                LeaderMonitor(client, cluster.tservers) as monitor,
                Writer(cluster.master_addresses_flag, TABLE) as writer,
            ):
                writer.wait_for_rows(300, "the first writes")
                cluster.partition(cut, [s for s in [*cluster.masters, *cluster.tservers] if s not in cut])
                during = wait_for(
                    lambda: settled_layout(client, TABLE, 3, gone=cut_uuids),
                    what=f"every tablet back to 3 voters outside {cut_location}",
                    timeout_s=120,
                )
                writer.wait_for_rows(300, "writes during the cut")
                cluster.heal()
                for server in cut:
                    what = f"the stale replicas on {server.uuid} tombstoned"
                    wait_tombstoned(client, server, hosted[server.uuid], what)
                writer.wait_for_rows(300, "writes after the heal")
                monitor.wait_samples(5)
        finally:
            cluster.heal()
        assert writer.failures == [], writer.failures
        assert monitor.split_brains() == {}, monitor.split_brains()
        # The monitor saw the cut-off leader's tablet led from elsewhere in a later term.
        assert any(t == led and term > term_before for t, term in monitor.leaders), monitor.leaders
        assert settled_layout(client, TABLE, 3) == during
        check_no_acked_row_lost(cluster, client, sorted(during), writer.acked)
