"""Operator config changes on live tablets, with real processes: 1 master, 4 tablet servers,
tables of 3 replicas.  The ``nyala tablet`` and ``nyala remote-replica`` commands run through
click's CliRunner; bad requests go over raw RPC and must change nothing."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result
from google.protobuf.message import Message

import nyala
from nyala import services
from nyala.client import Client, ReadMode, schema
from nyala.errors import (
    Aborted,
    AlreadyPresent,
    IllegalState,
    InvalidArgument,
    NotFound,
    NotTheLeader,
    NyalaError,
)
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc import RpcMethod
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(300)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1, num_tservers=4, raft_heartbeat_interval_ms=200, replica_management=False
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("config-change")), options) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        yield c


class Tablet:
    """One single-tablet table of 3 replicas and ways to look at its consensus state."""

    def __init__(self, cluster: MiniCluster, client: Client, name: str) -> None:
        self.cluster, self.client, self.name = cluster, client, name
        self.table = client.create_table(name, SCHEMA, num_replicas=3)
        (info,) = self.table.tablets()
        self.id = info.tablet_id
        self.servers = {s.uuid: s for s in cluster.tservers}

    def call(self, uuid: str, method: RpcMethod[Req, Resp], request: Req, timeout: float = 10) -> Resp:
        address = self.servers[uuid].address
        return self.client.run(self.client.aio.messenger.call(address, method, request, timeout=timeout))

    def state(self, uuid: str) -> cpb.ConsensusStatePB:
        request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[self.id])
        states = self.call(uuid, services.GET_CONSENSUS_STATE, request).tablets
        if not states:  # the replica there has no Raft state yet, e.g. it is being copied
            raise NotFound(f"tablet {self.id} has no consensus state on {uuid}")
        return states[0]

    def leader(self, other_than: str = "") -> str:
        """The uuid of the replica that says it leads, once one does."""

        def find() -> str | None:
            for uuid in self.servers:
                if uuid == other_than:
                    continue
                request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[self.id])
                try:
                    states = self.call(uuid, services.GET_CONSENSUS_STATE, request).tablets
                except NyalaError:
                    continue
                if not states:  # a replica being copied has no consensus state yet
                    continue
                state = states[0]
                if state.role == common_pb2.LEADER and state.leader_uuid == uuid:
                    return uuid
            return None

        return wait_for(find, what="a leader", timeout_s=60)

    def config(self) -> dict[str, str]:
        """The leader's committed config: uuid -> VOTER / NON_VOTER."""
        state = self.state(self.leader())
        return {p.permanent_uuid: consensus_pb2.MemberType.Name(p.member_type) for p in state.committed_config.peers}

    def committed(self) -> cpb.ConsensusStatePB:
        return self.state(self.leader())

    def replicas(self) -> list[str]:
        return [u for u in self.config()]

    def outsider(self) -> str:
        return next(u for u in self.servers if u not in self.config())

    def follower(self) -> str:
        leader = self.leader()
        return next(u for u in self.config() if u != leader)

    def master_view(self) -> dict[str, str]:
        """What the leader master's GetTabletLocations says: uuid -> role."""
        return {r.uuid: r.role for r in self.client.tablet_info(self.id).replicas}


T = TypeVar("T")


def nyala_cli(*argv: str) -> Result:
    return CliRunner().invoke(main, list(argv))


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def members(cs: cpb.ConsensusStatePB) -> list[tuple[str, int, bool, bool]]:
    config = cs.committed_config
    return [(p.permanent_uuid, p.member_type, p.attrs.promote, p.attrs.replace) for p in config.peers]


# --- removal under load, retyping, step-downs, elections ---------------------------------------------


def test_removing_a_follower_under_write_load_loses_no_acknowledged_row(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "remove_under_load")
    acked: list[int] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        start = 0
        while not stop.is_set() and start < 200_000:
            ids = range(start, start + 100)
            try:
                failed = {e.row["id"] for e in tablet.table.insert([{"id": i, "v": f"r{i}"} for i in ids])}
            except NyalaError as exc:  # the client retries retriable errors itself
                failures.append(exc)
                return
            acked.extend(i for i in ids if i not in failed)
            start += 100

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        wait_for(lambda: len(acked) >= 500, what="the first writes", timeout_s=60)
        victim = tablet.follower()
        result = ok(nyala_cli("tablet", "change-config", "remove-replica", cluster.master_addresses_flag, tablet.id,
                              victim, "--format", "json"))  # fmt: skip
        answer = json.loads(result.stdout)
        assert victim not in [m["uuid"] for m in answer["config"]]
        assert len(answer["config"]) == 2
        written = len(acked)
        wait_for(lambda: len(acked) >= written + 500, what="writes after the removal", timeout_s=60)
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert failures == []
    assert tablet.config() == {m["uuid"]: "VOTER" for m in answer["config"]}
    stored = set(tablet.table.to_arrow(["id"], read_mode=ReadMode.READ_YOUR_WRITES).column("id").to_pylist())
    assert set(acked) <= stored
    # The master learns the new config from the leader's report; clients' locations follow.
    wait_for(lambda: set(tablet.master_view()) == set(tablet.config()), what="the master's locations", timeout_s=60)
    assert victim not in {r.uuid for t in client.table_tablets(tablet.name) for r in t.replicas}


def test_change_replica_type_to_non_voter_and_back(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "retype")
    follower = tablet.follower()
    masters = cluster.master_addresses_flag
    out = ok(nyala_cli("tablet", "change-config", "change-replica-type", masters, tablet.id, follower, "NON_VOTER"))
    assert "NON_VOTER" in out.stdout
    assert tablet.config()[follower] == "NON_VOTER"
    wait_for(
        lambda: tablet.master_view().get(follower) == "LEARNER", what="the master's view of the learner", timeout_s=60
    )
    ok(nyala_cli("tablet", "change-config", "change-replica-type", masters, tablet.id, follower, "voter"))
    assert tablet.config()[follower] == "VOTER"
    wait_for(
        lambda: tablet.master_view().get(follower) in ("FOLLOWER", "LEADER"),
        what="the master's view of the voter",
        timeout_s=60,
    )
    again = nyala_cli("tablet", "change-config", "change-replica-type", masters, tablet.id, follower, "VOTER")
    assert again.exit_code == 1
    assert "changes nothing" in again.output


def test_graceful_step_down_to_a_named_follower_and_abrupt_step_down(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "step_down")
    masters = cluster.master_addresses_flag
    old = tablet.leader()
    target = tablet.follower()
    out = ok(nyala_cli("tablet", "leader-step-down", masters, tablet.id, "--new-leader-uuid", target))
    assert f"from {old} to {target}" in out.stdout
    assert tablet.leader() == target
    out = ok(nyala_cli("tablet", "leader_step_down", masters, tablet.id, "--abrupt", "--format", "json"))
    answer = json.loads(out.stdout)
    assert answer["old_leader"] == target
    assert answer["new_leader"] != target
    assert tablet.table.insert([{"id": 1, "v": "after"}]) == []  # the tablet takes writes again


def test_run_leader_election_on_a_follower(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "election")
    leader = tablet.leader()
    follower = tablet.follower()
    request = cpb.RunLeaderElectionRequestPB(dest_uuid=leader, tablet_id=tablet.id)
    assert tablet.call(leader, services.RUN_LEADER_ELECTION, request).already_leader
    request = cpb.RunLeaderElectionRequestPB(dest_uuid=follower, tablet_id=tablet.id)
    assert not tablet.call(follower, services.RUN_LEADER_ELECTION, request).already_leader
    wait_for(lambda: tablet.leader() == follower or None, what="the follower's election", timeout_s=60)


def test_add_replica_puts_a_non_voter_in_the_config(cluster: MiniCluster, client: Client) -> None:
    # The new server has no copy of the tablet: the change commits and the member shows in the
    # config at once, while the leader has it copy the tablet in the background.
    tablet = Tablet(cluster, client, "add_learner")
    masters = cluster.master_addresses_flag
    newcomer = tablet.outsider()
    out = ok(nyala_cli("tablet", "change_config", "add_replica", masters, tablet.id, newcomer, "NON_VOTER"))
    assert f"added {newcomer}" in out.stdout
    assert tablet.config()[newcomer] == "NON_VOTER"
    wait_for(
        lambda: tablet.master_view().get(newcomer) == "LEARNER",
        what="the master's view of the new learner",
        timeout_s=60,
    )
    progress = {p.permanent_uuid: p for p in tablet.committed().peers}
    assert set(progress) == set(tablet.config()) - {tablet.leader()}
    ok(nyala_cli("tablet", "change-config", "remove-replica", masters, tablet.id, newcomer))
    assert newcomer not in tablet.config()


# --- bad requests ------------------------------------------------------------------------------------


def test_bad_requests_are_refused_clearly_and_change_nothing(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "bad_requests")
    before = tablet.committed()
    leader, follower, outsider = tablet.leader(), tablet.follower(), tablet.outsider()
    index = before.committed_config.opid_index

    def change(kind: int, uuid: str, cas: int | None = None, **peer: Any) -> None:
        request = cpb.ChangeConfigRequestPB(
            dest_uuid=leader,
            tablet_id=tablet.id,
            type=kind,  # type: ignore[arg-type]
            peer=cpb.ChangeConfigPeerPB(permanent_uuid=uuid, **peer),
            cas_config_opid_index=cas,
        )
        tablet.call(leader, services.CHANGE_CONFIG, request)

    with pytest.raises(Aborted, match="CAS_FAILED"):
        change(cpb.ADD_PEER, outsider, cas=index + 5, member_type="NON_VOTER")
    with pytest.raises(AlreadyPresent, match="already in the config"):
        change(cpb.ADD_PEER, follower, member_type="VOTER")
    with pytest.raises(NotFound, match="not in the config"):
        change(cpb.REMOVE_PEER, outsider)
    with pytest.raises(InvalidArgument, match="changes nothing"):
        change(cpb.MODIFY_PEER, follower, member_type="VOTER")
    with pytest.raises(InvalidArgument, match="unknown member type"):
        change(cpb.ADD_PEER, outsider, member_type=7)
    with pytest.raises(InvalidArgument, match="permanent uuid"):
        change(cpb.ADD_PEER, "", member_type="VOTER")
    with pytest.raises(NotFound, match="not hosted"):
        tablet.call(leader, services.CHANGE_CONFIG, cpb.ChangeConfigRequestPB(tablet_id="no-such-tablet"))
    two_voters = cpb.BulkChangeConfigRequestPB(
        tablet_id=tablet.id,
        changes=[
            cpb.ConfigChangeItemPB(type=cpb.REMOVE_PEER, peer=cpb.ChangeConfigPeerPB(permanent_uuid=follower)),
            cpb.ConfigChangeItemPB(
                type=cpb.ADD_PEER, peer=cpb.ChangeConfigPeerPB(permanent_uuid=outsider, member_type="VOTER")
            ),
        ],
    )
    with pytest.raises(InvalidArgument, match="at most one voter"):
        tablet.call(leader, services.BULK_CHANGE_CONFIG, two_voters)
    unknown = nyala_cli("tablet", "change-config", "add-replica", cluster.master_addresses_flag, tablet.id,
                        "no-such-server", "VOTER")  # fmt: skip
    assert unknown.exit_code == 1
    assert "no tablet server with uuid 'no-such-server'" in unknown.output
    missing = nyala_cli("tablet", "change-config", "remove-replica", cluster.master_addresses_flag, "no-such-tablet",
                        follower)  # fmt: skip
    assert missing.exit_code == 1
    assert "not found" in missing.output
    # Removing the leader itself: it refuses, names the voter it hands leadership to, and
    # hands over; the config stays as it was.
    with pytest.raises(NotTheLeader) as refused:
        change(cpb.REMOVE_PEER, leader)
    assert refused.value.leader_hint in {follower, *tablet.config()} - {leader}
    assert "cannot remove or demote itself" in str(refused.value)
    wait_for(lambda: tablet.leader() != leader or None, what="the hand-over", timeout_s=60)
    assert members(tablet.committed()) == members(before)
    assert tablet.committed().committed_config.opid_index == index


def test_a_second_change_is_refused_while_one_is_pending(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "pending")
    leader, follower, outsider = tablet.leader(), tablet.follower(), tablet.outsider()
    before = tablet.committed()
    add_voter = cpb.ChangeConfigRequestPB(
        dest_uuid=leader,
        tablet_id=tablet.id,
        type=cpb.ADD_PEER,
        peer=cpb.ChangeConfigPeerPB(permanent_uuid=outsider, member_type="VOTER"),
    )
    demote = cpb.ChangeConfigRequestPB(
        tablet_id=tablet.id,
        type=cpb.MODIFY_PEER,
        peer=cpb.ChangeConfigPeerPB(permanent_uuid=follower, member_type="NON_VOTER"),
    )
    address = tablet.servers[leader].address

    async def both() -> list[Any]:
        # The second request leaves right behind the first, on the same connection: it reaches
        # the leader long before a follower can have made the first change durable.
        messenger = client.aio.messenger
        first = asyncio.ensure_future(messenger.call(address, services.CHANGE_CONFIG, add_voter, timeout=30))
        await asyncio.sleep(0)
        second = messenger.call(address, services.CHANGE_CONFIG, demote, timeout=30)
        return list(await asyncio.gather(first, second, return_exceptions=True))

    added, refused = client.run(both())
    assert isinstance(refused, IllegalState), refused
    assert "only one change may be pending" in str(refused)
    assert isinstance(added, cpb.ChangeConfigResponsePB), added
    assert tablet.config() == {**{p[0]: "VOTER" for p in members(before)}, outsider: "VOTER"}
    ok(nyala_cli("tablet", "change-config", "remove-replica", cluster.master_addresses_flag, tablet.id, outsider))
    assert set(tablet.config()) == {p[0] for p in members(before)}


# --- moves and forced configs --------------------------------------------------------------------------


def test_move_replica_to_a_server_that_still_holds_the_tablet(cluster: MiniCluster, client: Client) -> None:
    # A replica removed from the config keeps its data here (nothing deletes it yet), so moving
    # a replica back to its server needs no tablet copy: the leader sends the missing log.
    tablet = Tablet(cluster, client, "move_back")
    masters = cluster.master_addresses_flag
    assert tablet.table.insert([{"id": i, "v": "x"} for i in range(100)]) == []
    spare = tablet.follower()
    ok(nyala_cli("tablet", "change-config", "remove-replica", masters, tablet.id, spare))
    assert tablet.table.insert([{"id": i, "v": "y"} for i in range(100, 200)]) == []
    source = tablet.leader()  # the leader moves: it must step down before it is removed
    stays = set(tablet.config()) - {source}
    out = ok(nyala_cli("tablet", "move-replica", masters, tablet.id, source, spare, "--timeout-sec", "120"))
    assert "step the leading source down" in out.stdout
    assert tablet.config() == {u: "VOTER" for u in stays | {spare}}
    again = ok(nyala_cli("tablet", "move-replica", masters, tablet.id, source, spare, "--format", "json"))
    assert json.loads(again.stdout)["steps"] == []  # a re-run finds the move done
    wait_for(lambda: set(tablet.master_view()) == set(tablet.config()), what="the master's locations", timeout_s=60)
    assert tablet.table.count(read_mode=ReadMode.READ_YOUR_WRITES) == 200


@pytest.mark.skipif(not hasattr(services, "START_TABLET_COPY"), reason="needs tablet copy (StartTabletCopy)")
def test_move_replica_to_a_new_server(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "move_new")
    assert tablet.table.insert([{"id": i, "v": "x"} for i in range(500)]) == []
    source, dest = tablet.follower(), tablet.outsider()
    ok(nyala_cli("tablet", "move-replica", cluster.master_addresses_flag, tablet.id, source, dest))
    assert tablet.config()[dest] == "VOTER"
    assert source not in tablet.config()
    assert tablet.table.count(read_mode=ReadMode.READ_YOUR_WRITES) == 500


def test_remote_replica_list_and_unsafe_change_config(cluster: MiniCluster, client: Client) -> None:
    tablet = Tablet(cluster, client, "unsafe")
    assert tablet.table.insert([{"id": i, "v": "x"} for i in range(50)]) == []
    leader = tablet.leader()
    survivor = tablet.follower()
    address = str(tablet.servers[survivor].address)
    listing = ok(nyala_cli("remote-replica", "list", address, "--format", "json"))
    rows = {r["tablet_id"]: r for r in json.loads(listing.stdout)}
    assert rows[tablet.id]["role"] == "FOLLOWER"
    assert rows[tablet.id]["state"] == "RUNNING"
    lost = [u for u in tablet.config() if u != survivor]
    assert leader in lost
    stopped: list[ClusterServer] = [tablet.servers[u] for u in lost]
    for server in stopped:  # a majority lost for good, as far as this tablet can tell
        cluster.kill(server)
    try:
        bad = nyala_cli("remote-replica", "unsafe_change_config", address, tablet.id, survivor, "no-such-peer")
        assert bad.exit_code == 1
        assert "committed config" in bad.output
        ok(nyala_cli("remote-replica", "unsafe-change-config", address, tablet.id, survivor))

        def leads_alone() -> bool:
            state = tablet.state(survivor)
            peers = [p.permanent_uuid for p in state.committed_config.peers]
            return state.role == common_pb2.LEADER and peers == [survivor]

        wait_for(leads_alone, what="the survivor to lead a config of one", timeout_s=60)
        assert tablet.state(survivor).committed_config.unsafe_config_change
        assert tablet.table.insert([{"id": 1000, "v": "after"}]) == []
        assert tablet.table.count(read_mode=ReadMode.READ_YOUR_WRITES) == 51
    finally:
        cluster.restart(*stopped)
