"""``nyala remote-replica copy`` and ``nyala local-replica copy-from-remote`` on real processes.

1 master and 4 tablet servers, tables of 3 replicas.  The commands run through click's
CliRunner as an operator would run them.  Bad input (a tablet the source does not host, a
destination holding a live replica, an unreachable source, a running server's directory) must
be refused with the problem named and nothing changed; a good copy must run on its destination
with every row of its source, and rejoin its tablet by replication alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result
from google.protobuf.message import Message

import nyala
from nyala import services
from nyala.client import Client, ReadMode, schema
from nyala.errors import NyalaError
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import RpcMethod
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(300)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
UNKNOWN_TABLET = "0" * 32


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1, num_tservers=4, raft_heartbeat_interval_ms=200, replica_management=False
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("copy-tools")), options) as mc:
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


def refused(result: Result, message: str) -> None:
    assert result.exit_code == 1, result.output
    assert message in result.output, result.output


class Tablet:
    """The single tablet of a table of 3 replicas and its servers."""

    def __init__(self, cluster: MiniCluster, client: Client, name: str) -> None:
        self.cluster, self.client = cluster, client
        self.table = client.create_table(name, SCHEMA, num_replicas=3)
        (info,) = self.table.tablets()
        self.id = info.tablet_id
        self.servers = {s.uuid: s for s in cluster.tservers}
        self.members = [r.uuid for r in info.replicas]

    def call(self, server: ClusterServer, method: RpcMethod[Req, Resp], request: Req) -> Resp:
        return self.client.run(self.client.aio.messenger.call(server.address, method, request, timeout=10))

    def state(self, server: ClusterServer) -> cpb.ConsensusStatePB | None:
        request = cpb.GetConsensusStateRequestPB(dest_uuid=server.uuid, tablet_ids=[self.id])
        try:
            response = self.call(server, services.GET_CONSENSUS_STATE, request)
        except NyalaError:
            return None
        return response.tablets[0] if response.tablets else None

    def leader(self) -> ClusterServer:
        def find() -> ClusterServer | None:
            for uuid in self.members:
                cs = self.state(self.servers[uuid])
                if cs is not None and cs.role == common_pb2.LEADER and cs.leader_uuid == uuid:
                    return self.servers[uuid]
            return None

        return wait_for(find, what=f"a leader of {self.id}", timeout_s=60)

    def follower(self) -> ClusterServer:
        leader = self.leader()
        return next(self.servers[u] for u in self.members if u != leader.uuid)

    def outsider(self) -> ClusterServer:
        return next(s for s in self.cluster.tservers if s.uuid not in self.members)

    def listed(self, server: ClusterServer) -> tpb.ListTabletsResponsePB.StatusPB | None:
        response = self.call(server, services.LIST_TABLETS, tpb.ListTabletsRequestPB())
        return next((t for t in response.tablets if t.tablet_id == self.id), None)

    def status(self, server: ClusterServer) -> tpb.GetTabletServerStatusResponsePB:
        return self.call(server, services.GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())

    def config(self) -> dict[str, str]:
        cs = self.state(self.leader())
        assert cs is not None
        return {p.permanent_uuid: consensus_pb2.MemberType.Name(p.member_type) for p in cs.committed_config.peers}

    def caught_up(self, servers: list[ClusterServer], rows: int) -> None:
        """Every server's replica RUNNING, at the leader's commit index, holding ``rows`` rows."""

        def done() -> bool:
            lead = self.state(self.leader())
            if lead is None:
                return False
            for server in servers:
                cs, listed = self.state(server), self.listed(server)
                if cs is None or listed is None or listed.state != tpb.RUNNING:
                    return False
                if cs.applied_index != lead.commit_index or listed.num_rows != rows:
                    return False
            return True

        wait_for(done, what=f"{[s.uuid for s in servers]} to hold all {rows} rows", timeout_s=90)


def insert(tablet: Tablet, ids: range) -> None:
    assert tablet.table.insert([{"id": i, "v": f"r{i}"} for i in ids]) == []


def unreachable(cluster: MiniCluster) -> str:
    """An address of this cluster's block where no server listens."""
    prefix = cluster.masters[0].address.host.rsplit(".", 1)[0]
    return f"{prefix}.250:7050"


def test_remote_replica_copy(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "remote_copy")
    insert(tablet, range(500))
    leader, follower, outsider = tablet.leader(), tablet.follower(), tablet.outsider()
    source = str(leader.address)
    started = {s.uuid: tablet.status(s).tablet_copies_started for s in (follower, outsider)}

    # Bad input: the problem named, nothing asked of the destination.
    refused(
        nyala_cli("remote-replica", "copy", UNKNOWN_TABLET, source, str(outsider.address)),
        f"tablet {UNKNOWN_TABLET} has no replica on the source tablet server at {leader.address}",
    )
    refused(
        nyala_cli("remote-replica", "copy", tablet.id, source, str(follower.address)),
        "already has a live replica of tablet",
    )
    refused(
        nyala_cli("remote-replica", "copy", tablet.id, unreachable(cluster), str(outsider.address)),
        "cannot reach the source tablet server at",
    )
    refused(nyala_cli("remote-replica", "copy", tablet.id, source, source), "the same tablet server")
    refused(nyala_cli("remote-replica", "copy", "../x", source, str(outsider.address)), "is not a tablet id")
    assert {s.uuid: tablet.status(s).tablet_copies_started for s in (follower, outsider)} == started
    assert tablet.listed(outsider) is None
    follower_state = tablet.listed(follower)
    assert follower_state is not None
    assert follower_state.state == tpb.RUNNING

    # A server outside the config: it runs the copy as a non-member ...
    out = ok(nyala_cli("remote-replica", "copy", tablet.id, source, str(outsider.address), "--format", "json"))
    answer = json.loads(out.stdout)
    assert answer["state"] == "RUNNING"
    assert (answer["num_rows"], answer["in_config"], answer["replaced_live_replica"]) == (500, False, False)
    assert answer["bytes"] > 0
    copied = tablet.listed(outsider)
    assert copied is not None
    assert (copied.state, copied.num_rows) == (tpb.RUNNING, 500)
    (outcome,) = [c for c in tablet.status(outsider).tablet_copies if c.tablet_id == tablet.id]
    assert outcome.state == tpb.TabletCopyStatusPB.COMPLETED
    completed = tablet.status(outsider).tablet_copies_completed
    # ... and once added, catches up by replication: the copy seeded it, no second copy is needed.
    insert(tablet, range(500, 700))
    masters = cluster.master_addresses_flag
    ok(nyala_cli("tablet", "change-config", "add-replica", masters, tablet.id, outsider.uuid, "NON_VOTER", "--promote"))
    wait_for(lambda: tablet.config().get(outsider.uuid) == "VOTER", what="the promotion of the seeded replica")
    tablet.members.append(outsider.uuid)
    tablet.caught_up([tablet.servers[u] for u in tablet.members], 700)
    assert tablet.status(outsider).tablet_copies_completed == completed

    # --force-copy replaces a live replica, but never a live member's: it could lose writes the
    # member acknowledged.  Out of the config, the follower's replica is replaced, and it rejoins.
    refused(
        nyala_cli("remote-replica", "copy", tablet.id, source, str(follower.address), "--force-copy"),
        "is a live member of the tablet's Raft config",
    )
    assert tablet.status(follower).tablet_copies_started == started[follower.uuid]
    ok(nyala_cli("tablet", "change-config", "remove-replica", masters, tablet.id, follower.uuid))
    tablet.members.remove(follower.uuid)
    out = ok(nyala_cli("remote-replica", "copy", tablet.id, source, str(follower.address), "--force-copy"))
    assert "its live replica was replaced" in out.stdout
    ok(nyala_cli("tablet", "change-config", "add-replica", masters, tablet.id, follower.uuid, "NON_VOTER", "--promote"))
    wait_for(lambda: tablet.config().get(follower.uuid) == "VOTER", what="the promotion of the replaced replica")
    tablet.members.append(follower.uuid)
    insert(tablet, range(700, 800))
    tablet.caught_up([tablet.servers[u] for u in tablet.members], 800)
    assert tablet.table.count(read_mode=ReadMode.READ_YOUR_WRITES) == 800


def local_state(data_dir: Path, tablet_id: str) -> dict[str, Any] | None:
    listing = ok(nyala_cli("local-replica", "list", str(data_dir), "--format", "json",
                           "--columns", "tablet_id,state,term,peers,error"))  # fmt: skip
    return next((r for r in json.loads(listing.stdout) if r["tablet_id"] == tablet_id), None)


def test_local_replica_copy_from_remote(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "local_copy")
    insert(tablet, range(300))
    leader, follower = tablet.leader(), tablet.follower()
    source = str(leader.address)
    data_dir = str(follower.data_dir)
    follower_uuid = follower.uuid  # read from server.json, which a stopped server no longer has

    # A running server's directory is refused, as by every local-replica command.
    refused(nyala_cli("local-replica", "copy-from-remote", data_dir, tablet.id, source), "in use by a running server")
    follower.process.stop()
    try:
        # The follower's replica is live: refused until it is tombstoned.
        refused(
            nyala_cli("local-replica", "copy-from-remote", data_dir, tablet.id, source),
            f"already has a live replica of tablet {tablet.id} (READY); tombstone it first",
        )
        ok(nyala_cli("local-replica", "delete", data_dir, tablet.id, "--reason", "disk replaced"))
        insert(tablet, range(300, 600))  # two of three replicas still take writes
        before = sorted(p.name for p in (follower.data_dir / "tablets").iterdir())
        refused(
            nyala_cli("local-replica", "copy-from-remote", data_dir, UNKNOWN_TABLET, source),
            f"tablet {UNKNOWN_TABLET} has no replica on the source tablet server",
        )
        refused(
            nyala_cli("local-replica", "copy-from-remote", data_dir, tablet.id, unreachable(cluster)),
            "cannot reach the source tablet server at",
        )
        # A member's replica comes from the leader, whose log holds all the member acknowledged.
        other = next(tablet.servers[u] for u in tablet.members if u not in (leader.uuid, follower_uuid))
        refused(
            nyala_cli("local-replica", "copy-from-remote", data_dir, tablet.id, str(other.address)),
            f"copy its replica from the tablet's leader ({leader.uuid})",
        )
        assert sorted(p.name for p in (follower.data_dir / "tablets").iterdir()) == before
        tombstone = local_state(follower.data_dir, tablet.id)
        assert tombstone is not None
        assert tombstone["state"] == "TOMBSTONED"

        out = ok(nyala_cli("local-replica", "copy-from-remote", data_dir, tablet.id, source, "--format", "json"))
        answer = json.loads(out.stdout)
        assert answer["replaced_tombstone"] is True
        assert answer["bytes"] > 0
        assert follower_uuid in answer["peers"]
        assert answer["term"] >= tombstone["term"]
        copied = local_state(follower.data_dir, tablet.id)
        assert copied is not None
        assert (copied["state"], copied["error"]) == ("READY", None)
        assert not (follower.data_dir / "tablets" / f"{tablet.id}.copy-tmp").exists()
    finally:
        cluster.restart(follower)
    # The server bootstraps the copied replica and catches it up by replication, with no copy of its own.
    insert(tablet, range(600, 650))
    tablet.caught_up([tablet.servers[u] for u in tablet.members], 650)
    assert tablet.status(follower).tablet_copies_started == 0
    assert tablet.table.count(read_mode=ReadMode.READ_YOUR_WRITES) == 650
