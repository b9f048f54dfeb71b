"""A table's new placement policy carried out by the leader master alone, with real processes.

A table spread over ``/eu`` and ``/us`` is given the policy "replicas in ``/eu``, leader in
``/eu/r1``" with ``alter_table``: with auto rebalancing on, the leader master's policy fixer
moves every replica into ``/eu`` (one per rack) and hands every leadership to ``/eu/r1``, with
no CLI call, and every row written before is still there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import nyala
from nyala.client import Partitioning, PlacementPolicy, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

from .replica_kit import Layout, settled_layout

pytestmark = pytest.mark.timeout(240)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "moved"
LOCATIONS = {"/eu/r1": 1, "/eu/r2": 1, "/eu/r3": 1, "/us/east": 1, "/us/west": 1}

OPTIONS = MiniClusterOptions(
    raft_tick_interval_ms=50,
    raft_heartbeat_interval_ms=200,
    heartbeat_interval_ms=200,
    auto_rebalancing=True,
    master_flags=(
        *("--tserver-unresponsive-timeout-ms", "3000"),
        *("--auto-rebalancing-interval-sec", "1"),
        *("--auto-rebalancing-max-moves-per-server", "2"),
    ),
    tserver_flags=("--tablet-copy-start-interval-ms", "500"),
)


def test_the_master_moves_a_table_into_its_new_policy_without_a_cli_call(tmp_path: Path) -> None:
    with (
        MiniCluster(tmp_path, OPTIONS, locations=LOCATIONS) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 5, what="every tablet server live")
        client.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", 4), num_replicas=3)
        table = client.open_table(TABLE)
        assert table.insert([{"id": i, "v": f"row {i}"} for i in range(300)]) == []
        before = wait_for(lambda: settled_layout(client, TABLE, 3), what="the table settled")
        assert any(loc.startswith("/us/") for r in before.values() for _, loc, _ in r), "nothing to move"

        client.alter_table(TABLE, set_placement=PlacementPolicy(("/eu",), leader_location="/eu/r1"))

        def moved() -> Layout | None:
            found = settled_layout(client, TABLE, 3)
            if found is None:
                return None
            racks = [sorted(loc for _, loc, _ in r) for r in found.values()]
            return found if all(r == ["/eu/r1", "/eu/r2", "/eu/r3"] for r in racks) else None

        wait_for(moved, what="every replica moved into /eu, one per rack", timeout_s=150)

        def leaders_in_r1() -> bool:
            tablets = client.open_table(TABLE).tablets()
            return all(t.leader is not None and t.leader.location == "/eu/r1" for t in tablets)

        wait_for(leaders_in_r1, what="every leader in /eu/r1", timeout_s=60)
        rows = client.open_table(TABLE).to_arrow()
        assert sorted(rows.column("id").to_pylist()) == list(range(300))
