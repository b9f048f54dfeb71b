"""Network partitions between real processes: a tablet leader and the leader master cut off.

The servers of one 3-master, 3-tablet-server cluster obey the test-only network fault seam
(``MiniClusterOptions(network_faults=True)``); the client in this process reaches every
server throughout, as a client on the right side of a partition would.  Every test heals the
network in a ``finally``.  Nothing here needs the master to re-replicate: every replica
survives, and only links are cut.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message

import nyala
from nyala import errors
from nyala.client import Client, schema
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.rpc import RpcMethod
from nyala.services import CREATE_TABLE, GET_CONSENSUS_STATE, GET_MASTER_REGISTRATION
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.ksck import ksck
from tests.unit.master.helpers import create_request

pytestmark = pytest.mark.timeout(240)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

OPTIONS = MiniClusterOptions(num_masters=3, num_tservers=3, network_faults=True)
KV = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
BATCH_ROWS = 20
#: How often the monitor samples every replica's role and term.
SAMPLE_INTERVAL_S = 0.02


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    with MiniCluster(Path(tmp_path_factory.mktemp("partitions")), OPTIONS) as running:
        yield running


@pytest.fixture
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag) as connected:
        yield connected


def call(client: Client, server: ClusterServer, method: RpcMethod[Req, Resp], request: Req) -> Resp:
    return client.run(client.aio.messenger.call(server.address, method, request, timeout=2))


def consensus(client: Client, server: ClusterServer, tablet_id: str) -> cpb.ConsensusStatePB:
    response = call(client, server, GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB(tablet_ids=[tablet_id]))
    return response.tablets[0]


def master_state(client: Client, master: ClusterServer) -> mpb.GetMasterRegistrationResponsePB:
    return call(client, master, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB())


@dataclass
class LeaderMonitor:
    """Samples the role and term of a set of Raft replicas from a thread, and keeps every
    (term, leader) pair it saw: two leaders in one term would be a split brain."""

    probe: Callable[[ClusterServer], tuple[int, bool]]
    servers: list[ClusterServer]
    leaders: dict[int, set[str]] = field(default_factory=dict)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LeaderMonitor:
        self._thread = threading.Thread(target=self._run, name="leader-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            for server in self.servers:
                try:
                    term, leads = self.probe(server)
                except errors.NyalaError:
                    continue  # unreachable or busy: nothing seen
                if leads:
                    self.leaders.setdefault(term, set()).add(server.process.name)
            self.samples += 1

    def split_brains(self) -> dict[int, set[str]]:
        return {term: names for term, names in self.leaders.items() if len(names) > 1}


@dataclass
class Writer:
    """Inserts batches of fresh keys through the client from a thread and records which were
    acknowledged.  A batch that fails (an error after the client's own retries) is recorded
    too: its rows may or may not be there, but no acknowledged row may be missing."""

    client: Client
    table_name: str
    acked: set[int] = field(default_factory=set)
    failed: list[tuple[range, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Writer:
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(60)

    def _run(self) -> None:
        table = self.client.open_table(self.table_name)
        batch = 0
        while not self._stop.is_set():
            ids = range(batch * BATCH_ROWS, (batch + 1) * BATCH_ROWS)
            batch += 1
            try:
                row_errors = table.insert([{"id": i, "v": f"v{i}"} for i in ids], timeout_s=15)
            except errors.NyalaError as exc:
                self.failed.append((ids, f"{type(exc).__name__}: {exc}"))
                continue
            if row_errors:
                self.problems.append(f"batch {ids}: row errors {row_errors[:3]}")
            else:
                self.acked.update(ids)

    def wait_acked(self, count: int, within_s: float = 60) -> None:
        wait_for(lambda: len(self.acked) >= count, what=f"{count} acknowledged rows", timeout_s=within_s)


def single_tablet_table(client: Client, cluster: MiniCluster, name: str) -> tuple[str, list[ClusterServer]]:
    """A table of one tablet with 3 replicas: its id and the tablet servers holding it."""
    client.create_table(name, KV, None, num_replicas=3)
    (tablet,) = client.table_tablets(name)
    by_address = {str(t.address): t for t in cluster.tservers}
    return tablet.tablet_id, [by_address[r.address] for r in tablet.replicas]


def tablet_leader(client: Client, replicas: list[ClusterServer], tablet_id: str) -> tuple[ClusterServer, int]:
    """The replica leading ``tablet_id`` and taking writes, and its term."""

    def find() -> tuple[ClusterServer, int] | None:
        for server in replicas:
            state = consensus(client, server, tablet_id)
            if state.role == common_pb2.LEADER and state.commit_index >= state.last_index:
                return server, state.current_term
        return None

    return wait_for(find, what=f"a leader of {tablet_id}", timeout_s=30, retry_on=(errors.NyalaError,))


def replica_probe(client: Client, tablet_id: str) -> Callable[[ClusterServer], tuple[int, bool]]:
    def probe(server: ClusterServer) -> tuple[int, bool]:
        state = consensus(client, server, tablet_id)
        return state.current_term, state.role == common_pb2.LEADER

    return probe


def all_ids(client: Client, table_name: str) -> list[int]:
    """Every id in the table, read from the leader."""

    def scan() -> list[int]:
        result = client.open_table(table_name).scanner(["id"]).to_arrow()
        return list(result.column("id").to_pylist())

    return wait_for(scan, what=f"a scan of {table_name}", timeout_s=60, retry_on=(errors.RetriableError,))


def cut_tablet_leader_off(
    cluster: MiniCluster, client: Client, writer: Writer, replicas: list[ClusterServer], tablet_id: str
) -> tuple[ClusterServer, ClusterServer]:
    """Cut the tablet's leader off from its followers under write load; return (old, new) leaders
    once the new one is elected in a higher term, the old one stepped down and writes go on."""
    writer.wait_acked(10 * BATCH_ROWS)
    old, old_term = tablet_leader(client, replicas, tablet_id)
    followers = [r for r in replicas if r is not old]
    cluster.partition(old, followers)
    acked_at_cut = len(writer.acked)

    def stepped_down() -> bool:
        return consensus(client, old, tablet_id).role != common_pb2.LEADER

    wait_for(stepped_down, what="the cut-off leader to step down", timeout_s=30, retry_on=(errors.NyalaError,))
    new, new_term = tablet_leader(client, followers, tablet_id)
    assert new_term > old_term
    writer.wait_acked(acked_at_cut + 10 * BATCH_ROWS)  # writes go on through the new leader
    return old, new


def test_a_cut_off_tablet_leader_steps_down_and_no_acknowledged_write_is_lost(
    cluster: MiniCluster, client: Client
) -> None:
    tablet_id, replicas = single_tablet_table(client, cluster, "cut_leader")
    try:
        with LeaderMonitor(replica_probe(client, tablet_id), replicas) as monitor:
            with Writer(client, "cut_leader") as writer:
                old, new = cut_tablet_leader_off(cluster, client, writer, replicas, tablet_id)
                # The cut-off replica still answers this client, as a replica that cannot lead.
                assert new is not old
                assert consensus(client, old, tablet_id).role != common_pb2.LEADER
            cluster.heal()
            wait_for(lambda: monitor.samples >= 5, what="a few samples after the heal", timeout_s=30)
    finally:
        cluster.heal()
    assert writer.problems == []
    assert monitor.split_brains() == {}, monitor.leaders
    assert len(monitor.leaders) >= 2  # the monitor saw both the old and the new term
    ids = all_ids(client, "cut_leader")
    assert len(ids) == len(set(ids))
    assert writer.acked <= set(ids), sorted(writer.acked - set(ids))[:10]
    # A batch the client gave up on is one tablet write: applied whole or not at all.
    for batch, error in writer.failed:
        assert len(set(batch) & set(ids)) in (0, len(batch)), (batch, error)


def test_replicas_converge_after_the_partition_heals(cluster: MiniCluster, client: Client) -> None:
    tablet_id, replicas = single_tablet_table(client, cluster, "converge")
    try:
        with Writer(client, "converge") as writer:
            old, _ = cut_tablet_leader_off(cluster, client, writer, replicas, tablet_id)
            cluster.heal()
            writer.wait_acked(len(writer.acked) + 5 * BATCH_ROWS)  # writes across the heal
    finally:
        cluster.heal()
    assert writer.problems == []

    def converged() -> tuple[Any, ...] | None:
        states = [consensus(client, r, tablet_id) for r in replicas]
        views = {
            (
                s.committed_config.SerializeToString(deterministic=True),
                s.current_term,
                s.last_index,
                s.last_term,
                s.commit_index,
                s.applied_index,
            )
            for s in states
        }
        leaders = [s for s in states if s.role == common_pb2.LEADER]
        return next(iter(views)) if len(views) == 1 and len(leaders) == 1 else None

    _, term, last_index, _, commit_index, _ = wait_for(
        converged, what="every replica to agree on config, term and log", timeout_s=60, retry_on=(errors.NyalaError,)
    )
    assert commit_index == last_index
    old_state = consensus(client, old, tablet_id)
    assert old_state.current_term == term
    ids = all_ids(client, "converge")
    assert writer.acked <= set(ids)


def test_a_cut_off_leader_master_is_replaced_and_refuses_catalog_writes(cluster: MiniCluster, client: Client) -> None:
    def leader_master() -> tuple[ClusterServer, int] | None:
        for master in cluster.masters:
            state = master_state(client, master)
            if state.role == common_pb2.LEADER:
                return master, state.term
        return None

    old, old_term = wait_for(leader_master, what="a leader master", timeout_s=30, retry_on=(errors.NyalaError,))
    others = [m for m in cluster.masters if m is not old]

    def master_probe(master: ClusterServer) -> tuple[int, bool]:
        state = master_state(client, master)
        return state.term, state.role == common_pb2.LEADER

    try:
        with LeaderMonitor(master_probe, cluster.masters) as monitor:
            cluster.partition(old, others)  # tablet servers still reach every master

            def new_leader() -> tuple[ClusterServer, int] | None:
                found = leader_master()
                return found if found is not None and found[0] is not old else None

            _, new_term = wait_for(new_leader, what="a new leader master", timeout_s=30, retry_on=(errors.NyalaError,))
            assert new_term > old_term
            wait_for(
                lambda: master_state(client, old).role != common_pb2.LEADER,
                what="the cut-off leader master to step down",
                timeout_s=30,
                retry_on=(errors.NyalaError,),
            )
            # The old leader refuses a catalog write sent straight to it...
            with pytest.raises(errors.NotTheLeader):
                call(client, old, CREATE_TABLE, create_request("refused_by_old_leader"))
            # ...while the client's DDL goes through the new leader, and the table takes writes.
            table = client.create_table("after_master_cut", KV, None, num_replicas=3)
            assert table.insert([{"id": 1, "v": "one"}]) == []
            cluster.heal()

            def clean() -> bool:
                report = client.run(ksck(client.aio, timeout_s=10))
                return not report.problems

            wait_for(clean, what="ksck to find the healed cluster clean", timeout_s=60)
    finally:
        cluster.heal()
    assert monitor.split_brains() == {}, monitor.leaders
    masters = client.list_masters()
    assert [m.role for m in masters].count("LEADER") == 1, masters
    assert len({m.term for m in masters}) == 1, masters
    tables = client.list_tables()
    assert "after_master_cut" in tables
    assert "refused_by_old_leader" not in tables


def test_an_isolated_tablet_server_stops_heartbeating_until_the_heal(cluster: MiniCluster, client: Client) -> None:
    """Not only Raft: the tablet server's heartbeats to the masters are cut too."""
    isolated = cluster.tservers[0]
    silent_ms = 12 * OPTIONS.heartbeat_interval_ms

    def since_heartbeat() -> dict[str, int]:
        return {str(s.rpc_addresses[0]): s.millis_since_heartbeat for s in client.list_tablet_servers()}

    try:
        cluster.isolate(isolated)

        def silent() -> dict[str, int] | None:
            seen = since_heartbeat()
            return seen if seen[str(isolated.address)] >= silent_ms else None

        heard = wait_for(
            silent,
            what=f"the leader master to go {silent_ms} ms without a heartbeat from the isolated server",
            timeout_s=30,
        )
        others = [ms for address, ms in heard.items() if address != str(isolated.address)]
        assert all(ms < silent_ms for ms in others), heard
    finally:
        cluster.heal()
    wait_for(
        lambda: since_heartbeat()[str(isolated.address)] < silent_ms,
        what="heartbeats from the healed server",
        timeout_s=30,
    )
