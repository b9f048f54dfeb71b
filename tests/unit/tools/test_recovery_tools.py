"""The majority-loss recovery tools against the fake cluster: ranking replicas by log
position (``nyala tablet find-most-up-to-date``) and ``nyala remote-replica delete``."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from nyala.client import connect, schema
from nyala.proto import tserver_pb2 as tpb
from nyala.tools.cli import main
from nyala.tools.replica_ops import rank_replicas
from tests.unit.client.fakes import FakeCluster, FakeTablet

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")


def _row(uuid: str, term: int | None, index: int | None) -> dict[str, object]:
    return {"uuid": uuid, "last_term": term, "last_index": index}


def test_replicas_rank_as_raft_votes_higher_last_term_first_then_longer_log() -> None:
    ranked = rank_replicas([_row("a", 3, 10), _row("b", 4, 7), _row("c", 3, 12), _row("d", None, None)])
    assert [(r["uuid"], r["rank"]) for r in ranked] == [("b", 1), ("c", 2), ("a", 3), ("d", None)]
    assert ranked[0]["ranked_by"] == "last_term, last_index"
    # Equal logs share a rank; the next one counts the places taken.
    tied = rank_replicas([_row("a", 2, 5), _row("b", 2, 5), _row("c", 1, 9)])
    assert [(r["uuid"], r["rank"]) for r in tied] == [("a", 1), ("b", 1), ("c", 3)]


def test_without_last_terms_replicas_rank_by_index_alone_and_say_so() -> None:
    # A server that predates last_term reports 0 for it: comparing terms would rank it last.
    ranked = rank_replicas([_row("old", 0, 20), _row("new", 3, 12), _row("empty", 0, 0)])
    assert [r["uuid"] for r in ranked] == ["old", "new", "empty"]
    assert {r["ranked_by"] for r in ranked} == {"last_index"}


def _tablet(cluster: FakeCluster) -> FakeTablet:
    with connect(cluster.master_addresses, timeout_s=10) as client:
        client.create_table("t", SCHEMA, num_replicas=3)
    (tablet,) = cluster.table("t").tablets
    return tablet


def _cli(*argv: str) -> Result:
    return CliRunner().invoke(main, [*argv, "--timeout-s", "5"])


def test_find_most_up_to_date_ranks_the_replicas_and_lists_the_silent_last(cluster: FakeCluster) -> None:
    tablet = _tablet(cluster)
    a, b, c = tablet.replicas
    cluster.log_positions.update({(a, tablet.id): (2, 40), (b, tablet.id): (3, 35), (c, tablet.id): (3, 30)})
    cluster.stop_tserver(c)
    result = _cli("tablet", "find-most-up-to-date", cluster.master_addresses, tablet.id, "--format", "json")
    assert result.exit_code == 0, result.output
    replicas = json.loads(result.stdout)["replicas"]
    assert [(r["uuid"], r["rank"], r["last_term"], r["last_index"]) for r in replicas] == [
        (b, 1, 3, 35),
        (a, 2, 2, 40),
        (c, None, None, None),
    ]
    assert replicas[2]["error"]
    text = _cli("tablet", "find_most_up_to_date", cluster.master_addresses, tablet.id)
    assert text.exit_code == 0, text.output
    assert f"most up-to-date: {b}" in text.stdout


def test_find_most_up_to_date_refuses_an_unknown_or_malformed_tablet(cluster: FakeCluster) -> None:
    unknown = _cli("tablet", "find-most-up-to-date", cluster.master_addresses, "0" * 32)
    assert unknown.exit_code == 1
    assert "not found" in unknown.output
    bad = _cli("tablet", "find-most-up-to-date", cluster.master_addresses, "no/such")
    assert bad.exit_code == 1
    assert "'no/such' is not a tablet id" in bad.output


def test_remote_replica_delete_tombstones_through_delete_tablet(cluster: FakeCluster) -> None:
    tablet = _tablet(cluster)
    uuid = tablet.replicas[1]
    server = cluster.tservers[uuid]
    address = str(server.address)
    result = _cli("remote-replica", "delete", address, tablet.id, "--reason", "lost disk")
    assert result.exit_code == 0, result.output
    assert f"tombstoned the replica of tablet {tablet.id}" in result.stdout
    assert "own Raft config still lists" in result.stderr  # the fake's replicas are all in the config
    (request,) = server.deletes
    assert (request.dest_uuid, request.tablet_id, request.reason, request.tombstone) == (
        uuid,
        tablet.id,
        "lost disk",
        True,
    )
    again = _cli("remote_replica", "delete", address, tablet.id, "--format", "json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["already_tombstoned"] is True
    assert cluster.tablet_states[(uuid, tablet.id)] == tpb.TOMBSTONED


def test_remote_replica_delete_refuses_an_unknown_tablet_and_changes_nothing(cluster: FakeCluster) -> None:
    tablet = _tablet(cluster)
    server = cluster.tservers[tablet.replicas[0]]
    missing = _cli("remote-replica", "delete", str(server.address), "f" * 32)
    assert missing.exit_code == 1
    assert f"tablet {'f' * 32} has no replica on the tablet server at {server.address}" in missing.output
    malformed = _cli("remote-replica", "delete", str(server.address), "no such tablet")
    assert malformed.exit_code == 1
    assert "is not a tablet id" in malformed.output
    assert server.deletes == []
