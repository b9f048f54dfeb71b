"""Even replication factors behind ``--allow-unsafe-replication-factor``, with real processes.

Two locations of two tablet servers.  With the option, a table of RF 4 is created, each tablet
split 2 + 2 over the locations (seed 000's location-aware durability: every committed write is
on three of four replicas, so on both locations), ksck finds nothing against the placement
policy, and rows are written and read back.  Without the option (the default) an even factor
is refused and nothing is created: test_cluster_e2e.py checks that on a real cluster, and
tests/unit/catalog/test_validate.py that the error names the option.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import nyala
from nyala.client import Partitioning, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.ksck import ksck

from .replica_kit import settled_layout

pytestmark = pytest.mark.timeout(180)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
LOCATIONS = {"/east": 2, "/west": 2}


def start(tmp_path: Path, *flags: str) -> MiniCluster:
    options = MiniClusterOptions(
        num_masters=1, raft_tick_interval_ms=50, raft_heartbeat_interval_ms=200, heartbeat_interval_ms=200,
        master_flags=flags,
    )  # fmt: skip
    return MiniCluster(tmp_path, options, locations=LOCATIONS)


def test_rf4_is_split_evenly_over_two_locations_with_the_option(tmp_path: Path) -> None:
    with (
        start(tmp_path, "--allow-unsafe-replication-factor") as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 4, what="four live tablet servers")
        client.create_table("even", SCHEMA, Partitioning().add_hash_partitions("id", 3), num_replicas=4)
        found = wait_for(lambda: settled_layout(client, "even", 4), what="every tablet with four voters")
        for replicas in found.values():
            assert Counter(location for _, location, _ in replicas) == {"/east": 2, "/west": 2}, found
        table = client.open_table("even")
        assert table.insert([{"id": i, "v": f"row {i}"} for i in range(50)]) == []
        assert sorted(table.to_arrow().column("id").to_pylist()) == list(range(50))
        report = client.run(ksck(client.aio, timeout_s=30, tables=["even"]))
        assert [w for w in report.warnings if "placement policy" in w] == []
