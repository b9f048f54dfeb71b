"""``nyala cluster ksck``, ``nyala master list`` and ``nyala tserver list`` against fake servers."""

from __future__ import annotations

import json

from nyala.client import connect
from nyala.proto import tserver_pb2 as tpb
from tests.unit.client.fakes import FakeCluster
from tests.unit.client.helpers import hashed, kv_schema
from tests.unit.tools.conftest import Invoke


def _table(cluster: FakeCluster, name: str = "t") -> None:
    with connect(cluster.master_addresses) as client:
        client.create_table(name, kv_schema(), hashed(2))


def test_ksck_of_a_healthy_cluster_exits_zero(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    result = nyala("cluster", "ksck")
    assert result.exit_code == 0, result.output
    assert "OK: the cluster is healthy" in result.stdout
    report = json.loads(nyala("cluster", "ksck", "--format", "json").stdout)
    assert report["ok"] is True
    assert report["tables"][0]["status"] == "HEALTHY"
    assert len(report["tablets"]) == 2
    assert all(r["state"] == "RUNNING" for t in report["tablets"] for r in t["replicas"])


def test_ksck_reports_a_dead_server_and_exits_one(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    victim = cluster.table("t").tablets[0].replicas[1]
    for tablet in cluster.table("t").tablets:  # every tablet keeps a leader and a majority
        if tablet.leader == victim:
            tablet.leader = next(u for u in tablet.replicas if u != victim)
    cluster.stop_tserver(victim)
    result = nyala("cluster", "ksck", "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["tables"][0]["status"] == "UNDER_REPLICATED"
    assert any("is not live" in p for p in report["problems"])
    assert any("is unreachable" in p for p in report["problems"])
    text = nyala("cluster", "ksck")
    assert text.exit_code == 1
    assert "problems found" in text.output
    assert "UNREACHABLE" in text.stdout


def test_ksck_finds_leader_disagreement_and_missing_leaders(cluster: FakeCluster, nyala: Invoke) -> None:
    _table(cluster)
    first, second = cluster.table("t").tablets
    cluster.reported_leaders[(first.replicas[1], first.id)] = first.replicas[2]
    cluster.tablet_states[(second.replicas[0], second.id)] = tpb.BOOTSTRAPPING
    cluster.tablet_states[(second.replicas[1], second.id)] = tpb.FAILED
    report = json.loads(nyala("cluster", "ksck", "--format", "json").stdout)
    statuses = {t["tablet_id"]: t["status"] for t in report["tablets"]}
    assert statuses[first.id] == "CONSENSUS_MISMATCH"
    assert statuses[second.id] == "UNAVAILABLE"
    assert report["tables"][0]["status"] == "UNAVAILABLE"


def test_ksck_with_an_unreachable_master(cluster: FakeCluster, nyala: Invoke) -> None:
    from click.testing import CliRunner

    from nyala.tools.cli import main

    masters = f"{cluster.master_addresses},127.0.0.1:1"
    result = CliRunner().invoke(main, ["cluster", "ksck", masters, "--format", "json", "--timeout-s", "5"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert any("127.0.0.1:1 is unreachable" in p for p in report["problems"])


def test_master_and_tserver_lists(cluster: FakeCluster, nyala: Invoke) -> None:
    masters = json.loads(nyala("master", "list", "--format", "json").stdout)
    only = cluster.masters[0]
    assert masters == [
        {"uuid": only.uuid, "rpc_addresses": [str(only.address)], "role": "LEADER", "member_type": "VOTER", "term": 3}
    ]
    servers = json.loads(nyala("tserver", "list", "--format", "json", "--columns", "uuid,live").stdout)
    assert sorted(s["uuid"] for s in servers) == sorted(cluster.tservers)
    assert all(s["live"] for s in servers)
    assert "3 tablet servers" in nyala("tserver", "list").stdout
    bad = nyala("tserver", "list", "--columns", "uuid,nope")
    assert bad.exit_code == 2
    assert "unknown columns ['nope']" in bad.output
