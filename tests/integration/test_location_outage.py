"""A whole location lost and returned, with real processes and the auto rebalancer off.

Three locations of two tablet servers, one table of RF 3 (one replica per location).  The
servers of ``/c`` are killed: the master re-replicates every tablet best effort into ``/a``
and ``/b``.  While ``/c`` is down, ksck and the master's ``/locations`` page agree that this
complies (a location with no live tablet server does not count for the policy, so two
locations are left and each may hold two of three replicas).  Once ``/c`` is back they agree
that every tablet now violates the policy and that another layout would comply; then
``nyala cluster rebalance`` (its policy fixer) restores one replica per location, and both
agree again that nothing is wrong.  The master's own auto rebalancer doing the same is
``test_auto_rebalancing.py``.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import nyala
from nyala.client import Client, Partitioning, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main
from nyala.tools.ksck import ksck

from .replica_kit import Layout, settled_layout

pytestmark = pytest.mark.timeout(240)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
TABLE = "outage"
LOCATIONS = {"/a": 2, "/b": 2, "/c": 2}
FAILURE_S = 3
ROWS = 100

OPTIONS = MiniClusterOptions(
    num_masters=1,
    raft_tick_interval_ms=50,
    raft_heartbeat_interval_ms=200,
    heartbeat_interval_ms=200,
    master_flags=("--tserver-unresponsive-timeout-ms", str(FAILURE_S * 1000)),
    tserver_flags=(
        *("--follower-unavailable-considered-failed-sec", str(FAILURE_S)),
        *("--tablet-copy-start-interval-ms", "500"),
    ),
)


def per_location(found: Layout) -> dict[str, list[str]]:
    """tablet id -> the locations of its replicas, sorted."""
    return {tablet_id: sorted(location for _, location, _ in replicas) for tablet_id, replicas in found.items()}


def ksck_policy_warnings(client: Client) -> dict[str, str]:
    """tablet id -> ksck's placement-policy warning, for the tablets it warns about."""
    report = client.run(ksck(client.aio, timeout_s=30, tables=[TABLE]))
    found = {}
    for warning in report.warnings:
        if "placement policy" in warning:
            found[warning.split()[1]] = warning
    return found


def master_policy_violations(cluster: MiniCluster) -> dict[str, str]:
    """tablet id -> the problem the leader master's /locations page names, for each violating tablet."""
    with urllib.request.urlopen(cluster.masters[0].url + "/api/locations", timeout=30) as answer:
        page: dict[str, Any] = json.loads(answer.read())
    return {row["tablet_id"]: row["problem"] for row in page["violations"]}


def verdicts_agree(client: Client, cluster: MiniCluster, expected: set[str]) -> dict[str, str] | None:
    """Both views once they name exactly the ``expected`` tablets (liveness takes a moment to settle)."""
    from_ksck = ksck_policy_warnings(client)
    from_master = master_policy_violations(cluster)
    if set(from_ksck) != expected or set(from_master) != expected:
        return None
    return from_master


def test_ksck_and_the_master_agree_through_an_outage_and_the_cli_fixer_repairs_it(tmp_path: Path) -> None:
    with (
        MiniCluster(tmp_path, OPTIONS, locations=LOCATIONS) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 6, what="every tablet server live")
        client.create_table(TABLE, SCHEMA, Partitioning().add_hash_partitions("id", 2), num_replicas=3)
        assert client.open_table(TABLE).insert([{"id": i, "v": f"row {i}"} for i in range(ROWS)]) == []
        compliant = ["/a", "/b", "/c"]
        start = wait_for(lambda: settled_layout(client, TABLE, 3), what="every tablet settled")
        assert all(locs == compliant for locs in per_location(start).values()), start

        lost = cluster.tservers_in("/c")
        for server in lost:
            cluster.kill(server)
        gone = {s.uuid for s in lost}
        degraded = wait_for(
            lambda: settled_layout(client, TABLE, 3, gone=gone),
            what="every tablet re-replicated into /a and /b",
            timeout_s=90,
        )
        assert all(sorted(set(locs)) == ["/a", "/b"] for locs in per_location(degraded).values()), degraded
        # /c has no live server: two locations count, two of three replicas in one complies.
        wait_for(lambda: verdicts_agree(client, cluster, set()), what="ksck and the master both see no violation")

        for server in lost:
            cluster.restart(server)
        wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 6, what="/c live again")
        violating = set(degraded)
        problems = wait_for(
            lambda: verdicts_agree(client, cluster, violating), what="ksck and the master both see the violations"
        )
        for tablet_id, problem in problems.items():
            assert "another layout would comply" in problem, problem
            assert "with 3 locations that have a live tablet server" in problem, problem
            assert "another layout would comply" in ksck_policy_warnings(client)[tablet_id]

        result = CliRunner().invoke(
            main,
            [
                "cluster",
                "rebalance",
                cluster.master_addresses_flag,
                "--disable-cross-location-rebalancing",
                "--disable-intra-location-rebalancing",
                "--timeout-s",
                "30",
            ],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        healed = wait_for(lambda: settled_layout(client, TABLE, 3), what="every tablet settled after the fix")
        assert all(locs == compliant for locs in per_location(healed).values()), healed
        wait_for(lambda: verdicts_agree(client, cluster, set()), what="ksck and the master agree it is fixed")
        assert sorted(client.open_table(TABLE).to_arrow().column("id").to_pylist()) == list(range(ROWS))
