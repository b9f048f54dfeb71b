"""The leader master's auto rebalancer, with real processes.

A whole location is lost: its tablets are re-replicated best effort into the two locations
left (two replicas in one location, against the placement policy).  When the location comes
back, the leader master alone (no CLI call) moves one replica of every tablet into it, until
each tablet has one replica per location again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import nyala
from nyala.client import Partitioning, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

from .replica_kit import Layout, settled_layout

pytestmark = pytest.mark.timeout(180)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "auto_rebalanced"
LOCATIONS = {"/a": 2, "/b": 2, "/c": 2}
FAILURE_S = 3

OPTIONS = MiniClusterOptions(
    raft_tick_interval_ms=50,
    raft_heartbeat_interval_ms=200,
    heartbeat_interval_ms=200,
    auto_rebalancing=True,
    master_flags=(
        *("--tserver-unresponsive-timeout-ms", str(FAILURE_S * 1000)),
        *("--auto-rebalancing-interval-sec", "1"),
        *("--auto-rebalancing-max-moves-per-server", "2"),
    ),
    tserver_flags=(
        *("--follower-unavailable-considered-failed-sec", str(FAILURE_S)),
        *("--tablet-copy-start-interval-ms", "500"),
    ),
)


def per_location(found: Layout) -> dict[str, list[str]]:
    """tablet id -> the locations of its replicas, sorted."""
    return {tablet_id: sorted(location for _, location, _ in replicas) for tablet_id, replicas in found.items()}


def test_a_location_back_from_an_outage_is_used_again_without_a_cli_call(tmp_path: Path) -> None:
    with (
        MiniCluster(tmp_path, OPTIONS, locations=LOCATIONS) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 6, what="every tablet server live")
        client.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", 4), num_replicas=3)
        table = client.open_table(TABLE)
        assert table.insert([{"id": i, "v": f"row {i}"} for i in range(200)]) == []
        compliant = ["/a", "/b", "/c"]

        def policy_met() -> Layout | None:
            found = settled_layout(client, TABLE, 3)
            return found if found and all(locs == compliant for locs in per_location(found).values()) else None

        wait_for(policy_met, what="one replica per location", timeout_s=60)

        lost = cluster.tservers_in("/c")
        for server in lost:
            cluster.kill(server)
        gone = {s.uuid for s in lost}
        degraded = wait_for(
            lambda: settled_layout(client, TABLE, 3, gone=gone),
            what="every tablet re-replicated into /a and /b",
            timeout_s=90,
        )
        # Best effort: three voters in two locations, so one of them holds two.
        assert all("/c" not in locs for locs in per_location(degraded).values()), degraded

        cluster.restart(*lost)
        healed = wait_for(policy_met, what="the policy restored by the master alone", timeout_s=90)
        assert {u for replicas in healed.values() for u, _, _ in replicas} & gone, healed
        master_log = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("master-*.log"))
        assert "auto rebalancing: moving tablet" in master_log
        assert sorted(client.open_table(TABLE).to_arrow().column("id").to_pylist()) == list(range(200))
