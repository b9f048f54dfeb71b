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

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from google.protobuf.message import Message

import nyala
from nyala import services
from nyala.client import Client, schema
from nyala.errors import NyalaError
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import RpcMethod
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(300)

SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
#: Rows per insert: small batches, so that a move sees many writes in flight.
BATCH = 50
#: Leaders ask a server that lacks a tablet to copy it within half a second, not five.
TSERVER_FLAGS = ("--tablet-copy-start-interval-ms", "500")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1, num_tservers=5, raft_heartbeat_interval_ms=200, tserver_flags=TSERVER_FLAGS
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


@dataclass
class Writer:
    """Inserts batches of fresh keys until stopped; ``acked`` holds every acknowledged key.

    It has its own client, so that the test's own calls never queue behind its writes.  A
    batch that fails as a whole (its outcome unknown) is recorded in ``failures`` and the
    writer goes on with fresh keys; a row error leaves that key out of ``acked``.
    """

    masters: str
    table_name: str
    acked: list[int] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    row_errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Writer:
        self._thread = threading.Thread(target=self._run, name=f"writer-{self.table_name}")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
            assert not self._thread.is_alive(), "the writer did not stop"

    def wait_for_rows(self, more: int, what: str) -> None:
        """Wait until ``more`` keys beyond those acknowledged so far are acknowledged."""
        target = len(self.acked) + more
        wait_for(lambda: len(self.acked) >= target or bool(self.failures), what=what, timeout_s=90)
        assert self.failures == [], self.failures

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # anything else ends the writer: make the test see it
            self.failures.append(exc)
            raise

    def _write(self) -> None:
        with nyala.connect(self.masters, timeout_s=60) as client:
            table = client.open_table(self.table_name)
            start = 0
            while not self._stop.is_set():
                ids = range(start, start + BATCH)
                start += BATCH
                try:
                    errors = table.insert([{"id": i, "v": f"r{i}"} for i in ids])
                except NyalaError as exc:  # the client retried what it could: the outcome is unknown
                    self.failures.append(exc)
                    continue
                failed = {e.row["id"] for e in errors}
                self.row_errors.extend(str(e.error) for e in errors)
                self.acked.extend(i for i in ids if i not in failed)


class Tablet:
    """The single tablet of a table of 3 replicas, looked at replica by replica."""

    def __init__(self, cluster: MiniCluster, client: Client, name: str) -> None:
        self.cluster, self.client, self.name = cluster, client, name
        self.table = client.create_table(name, SCHEMA, num_replicas=3)
        (info,) = self.table.tablets()
        self.id = info.tablet_id
        self.servers = {s.uuid: s for s in cluster.tservers}

    def call(self, uuid: str, method: RpcMethod[Req, Resp], request: Req, timeout: float = 10) -> Resp:
        address = self.servers[uuid].address
        return self.client.run(self.client.aio.messenger.call(address, method, request, timeout=timeout))

    def state(self, uuid: str) -> cpb.ConsensusStatePB | None:
        """The replica's own consensus state; None when its server does not answer or lacks it."""
        request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[self.id])
        try:
            response = self.call(uuid, services.GET_CONSENSUS_STATE, request)
        except NyalaError:
            return None
        return response.tablets[0] if response.tablets else None

    def leader_state(self) -> cpb.ConsensusStatePB:
        def find() -> cpb.ConsensusStatePB | None:
            for uuid in self.servers:
                state = self.state(uuid)
                if state is not None and state.role == common_pb2.LEADER and state.leader_uuid == uuid:
                    return state
            return None

        return wait_for(find, what=f"a leader of tablet {self.id}", timeout_s=60)

    def leader(self) -> str:
        return self.leader_state().leader_uuid

    def config(self) -> dict[str, str]:
        """The leader's committed config: uuid -> VOTER / NON_VOTER."""
        peers = self.leader_state().committed_config.peers
        return {p.permanent_uuid: consensus_pb2.MemberType.Name(p.member_type) for p in peers}

    def follower(self) -> str:
        leader = self.leader()
        return next(u for u in self.config() if u != leader)

    def outsider(self) -> str:
        return next(u for u in self.servers if u not in self.config())

    def master_view(self) -> set[str]:
        return {r.uuid for r in self.client.tablet_info(self.id).replicas}

    def scan_ids(self, uuid: str) -> list[int]:
        """Every key of the replica on ``uuid``, read from that server alone (its Scan RPC)."""
        messenger = self.client.aio.messenger
        address = self.servers[uuid].address
        new = tpb.NewScanRequestPB(tablet_id=self.id, projected_columns=["id"], order_by_primary_key=True)
        request = tpb.ScanRequestPB(new_scan_request=new)
        ids: list[int] = []
        for seq in range(1, 100_000):
            response, sidecars = self.client.run(
                messenger.call_with_sidecars(address, services.SCAN, request, timeout=30)
            )
            if response.num_rows:
                ids.extend(pa.ipc.open_stream(sidecars[0]).read_all().column("id").to_pylist())
            if not response.has_more_results:
                return ids
            request = tpb.ScanRequestPB(scanner_id=response.scanner_id, call_seq_id=seq)
        raise AssertionError("the scan did not end")

    def copies_completed(self, uuid: str) -> int:
        status = self.call(uuid, services.GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
        return status.tablet_copies_completed

    def check_replicas_agree(self, acked: list[int]) -> list[int]:
        """Every member has applied what the leader committed and holds the same keys, which
        include every acknowledged one; returns those keys."""
        members = sorted(self.config())

        def applied_alike() -> dict[str, int] | None:
            leader = self.leader_state()
            if leader.commit_index < leader.last_index:
                return None
            states = {u: self.state(u) for u in members}
            applied = {u: s.applied_index if s is not None else -1 for u, s in states.items()}
            return applied if set(applied.values()) == {leader.commit_index} else None

        wait_for(applied_alike, what=f"every replica of {members} to apply the leader's commit index", timeout_s=90)
        keys = {u: self.scan_ids(u) for u in members}
        first = keys[members[0]]
        for uuid in members[1:]:
            assert len(keys[uuid]) == len(first), {u: len(k) for u, k in keys.items()}
            assert keys[uuid] == first, f"replicas {members[0]} and {uuid} hold different keys"
        missing = sorted(set(acked) - set(first))
        assert not missing, f"{len(missing)} acknowledged keys are lost, the first {missing[:10]}"
        assert len(first) == len(set(first))
        return first


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
