"""Growing a tablet and moving its replicas while a writer keeps writing, with real processes.

1 master and 5 tablet servers, tables of 3 replicas.  A background writer inserts batches of
fresh keys in a loop and records every key whose insert was acknowledged.  While it runs:

- ``nyala tablet change-config add-replica ... NON_VOTER --promote`` adds a server that does
  not host the tablet: the leader has it copy the tablet (tablet copy), streams the log after
  the copy, and promotes it to VOTER once it has caught up;
- ``nyala tablet move-replica`` moves a follower, then (another table) the leader, to a
  server that does not host the tablet.

Once the writer stops, every replica of the config must have applied the same index and hold
the same rows (a scan pinned to each server through its Scan RPC), and every acknowledged key
must be among them.  Every wait is for a condition with a deadline; the cluster is stopped
even when a test fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import nyala
from nyala.client import Client, schema
from nyala.proto import common_pb2
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

from .replica_kit import TabletProbe, Writer

pytestmark = pytest.mark.timeout(300)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
#: Leaders ask a server that lacks a tablet to copy it within half a second, not five.
TSERVER_FLAGS = ("--tablet-copy-start-interval-ms", "500")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1,
        num_tservers=5,
        raft_heartbeat_interval_ms=200,
        tserver_flags=TSERVER_FLAGS,
        replica_management=False,
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("under-load")), options) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        yield c


def nyala_cli(*argv: str) -> Result:
    return CliRunner().invoke(main, list(argv))


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


class Tablet(TabletProbe):
    """The single tablet of a new table of 3 replicas."""

    def __init__(self, cluster: MiniCluster, client: Client, name: str) -> None:
        self.name = name
        self.table = client.create_table(name, SCHEMA, num_replicas=3)
        (info,) = self.table.tablets()
        super().__init__(cluster, client, info.tablet_id)


def member_types(tablet: Tablet) -> dict[str, str]:
    return tablet.config()


def test_add_a_non_voter_with_promote_to_a_fresh_server_under_write_load(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "grow_under_load")
    masters = cluster.master_addresses_flag
    newcomer = tablet.outsider()
    copies_before = tablet.copies_completed(newcomer)
    with Writer(masters, tablet.name) as writer:
        writer.wait_for_rows(1000, "the first writes")
        before = len(writer.acked)
        out = ok(nyala_cli("tablet", "change-config", "add-replica", masters, tablet.id, newcomer, "NON_VOTER",
                           "--promote", "--format", "json"))  # fmt: skip
        assert '"promote": true' in out.stdout
        # The newcomer lacks the tablet: a tablet copy brings it, the log after the copy catches
        # it up, and the leader promotes it while the writes go on.
        wait_for(
            lambda: member_types(tablet).get(newcomer) == "VOTER",
            what=f"the promotion of {newcomer} to VOTER",
            timeout_s=120,
        )
        assert len(writer.acked) > before  # writes were acknowledged while it joined
        writer.wait_for_rows(1000, "writes after the promotion")
    assert writer.failures == []
    assert writer.row_errors == []
    assert tablet.copies_completed(newcomer) > copies_before
    assert set(member_types(tablet).values()) == {"VOTER"}
    assert len(member_types(tablet)) == 4
    keys = tablet.check_replicas_agree(writer.acked)
    assert len(keys) >= 2000
    wait_for(lambda: newcomer in tablet.master_view(), what="the master's locations to list the newcomer")


def move_under_load(cluster: MiniCluster, client: Client, name: str, *, leader: bool) -> None:
    tablet = Tablet(cluster, client, name)
    masters = cluster.master_addresses_flag
    with Writer(masters, tablet.name) as writer:
        writer.wait_for_rows(1000, "the first writes")
        source = tablet.leader() if leader else tablet.follower()
        dest = tablet.outsider()
        copies_before = tablet.copies_completed(dest)
        stays = set(tablet.config()) - {source}
        before = len(writer.acked)
        out = ok(nyala_cli("tablet", "move-replica", masters, tablet.id, source, dest, "--timeout-sec", "180"))
        if leader:
            assert "step the leading source down" in out.stdout
        assert len(writer.acked) > before  # writes were acknowledged while the replica moved
        writer.wait_for_rows(1000, "writes after the move")
    assert writer.failures == []
    assert writer.row_errors == []
    assert member_types(tablet) == {u: "VOTER" for u in stays | {dest}}
    assert tablet.leader() != source
    assert tablet.copies_completed(dest) > copies_before  # the destination lacked the tablet
    tablet.check_replicas_agree(writer.acked)
    # The master learns the new config from the leader's report: clients no longer go to the source.
    wait_for(
        lambda: tablet.master_view() == stays | {dest},
        what="the master's locations to drop the source and list the destination",
        timeout_s=60,
    )
    # The removed replica is no member any more: its own view may lag, but it never leads again.
    state = tablet.state(source)
    assert state is None or state.role != common_pb2.LEADER or state.leader_uuid != source


def test_move_a_follower_to_a_fresh_server_under_write_load(cluster: MiniCluster, client: Client) -> None:
    move_under_load(cluster, client, "move_follower_under_load", leader=False)


def test_move_the_leader_to_a_fresh_server_under_write_load(cluster: MiniCluster, client: Client) -> None:
    move_under_load(cluster, client, "move_leader_under_load", leader=True)
