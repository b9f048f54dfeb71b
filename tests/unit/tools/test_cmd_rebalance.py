"""``nyala cluster rebalance`` against fake servers: the report, and bad input refused."""

from __future__ import annotations

import json

from nyala.client import connect
from tests.unit.client.fakes import FakeCluster
from tests.unit.client.helpers import hashed, kv_schema
from tests.unit.tools.conftest import Invoke


def _table(cluster: FakeCluster, name: str = "t") -> None:
    with connect(cluster.master_addresses) as client:
        client.create_table(name, kv_schema(), hashed(2))


def test_report_only_shows_the_distribution_and_an_empty_plan(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    text = nyala("cluster", "rebalance", "--report-only")
    assert text.exit_code == 0, text.output
    assert "no move is needed: the cluster is balanced" in text.stdout
    assert "/default" in text.stdout  # servers without a location count in /default
    result = nyala("cluster", "rebalance", "--report-only", "--format", "json", "--output-replica-distribution-details")
    report = json.loads(result.stdout)
    assert report["moves"] == []
    assert report["unfixable"] == []
    assert [t["table"] for t in report["tables"]] == ["t"]
    assert report["tables"][0] | {"table": "t"} == {
        "table": "t",
        "tablets": 2,
        "rf": 3,
        "location_skew": 0.0,
        "server_skew": 0,
        "violations": 0,
    }
    assert sorted(s["replicas"] for s in report["tservers"]) == [2, 2, 2]
    assert len(report["replicas_per_server"]) == 3
    assert report["violations"] == []


def test_a_balanced_cluster_needs_no_round(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    result = nyala("cluster", "rebalance", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["result"]["reason"] == "BALANCED"
    assert out["result"]["rounds"] == 0
    assert out["after"]["moves"] == []


def test_bad_input_is_refused_with_a_clear_error(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    uuid = cluster.table("t").tablets[0].replicas[0]
    cases = [
        (["--tables", "t,nope"], "no such tables: ['nope']"),
        (["--ignored-tservers", "f" * 32], "not registered: ['" + "f" * 32 + "']"),
        (["--move-replicas-from-ignored-tservers"], "needs --ignored-tservers"),
        (
            [
                "--disable-policy-fixer",
                "--disable-cross-location-rebalancing",
                "--disable-intra-location-rebalancing",
            ],
            "leave nothing to do",
        ),
        (["--max-moves-per-server", "0"], "--max-moves-per-server must be at least 1"),
        (["--max-run-time-sec", "-5"], "--max-run-time-sec must be 0"),
        (["--ignored-tservers", f"{uuid},"], "--ignored-tservers needs tablet server uuids"),
    ]
    for args, message in cases:
        for report_only in ([], ["--report-only"]):
            result = nyala("cluster", "rebalance", *args, *report_only)
            assert result.exit_code == 1, (args, result.output)
            assert message in result.output, (args, result.output)
            assert "Traceback" not in result.output


def test_a_dead_server_stops_the_run_unless_ignored(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    victim = cluster.table("t").tablets[0].replicas[2]
    cluster.dead_tservers.add(victim)
    result = nyala("cluster", "rebalance")
    assert result.exit_code == 1
    assert f"tablet servers ['{victim}'] are dead" in result.output
    report = json.loads(
        nyala("cluster", "rebalance", "--report-only", "--format", "json", "--ignored-tservers", victim).stdout
    )
    assert {s["uuid"]: s["state"] for s in report["tservers"]}[victim] == "left out: ignored"
    drain = nyala("cluster", "rebalance", "--ignored-tservers", victim, "--move-replicas-from-ignored-tservers")
    assert drain.exit_code == 1
    assert "replicas can only be moved from live servers" in drain.output
