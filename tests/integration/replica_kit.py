"""Shared pieces of the tests that change replicas under write load: a background writer
that records every acknowledged key, a probe that looks at one tablet replica by replica
(its consensus state on each server, and its keys scanned from each server alone), the
master's view of a table's layout, and a monitor that watches every replica's term and role
for two leaders in one term."""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa
from google.protobuf.message import Message

import nyala
from nyala import services
from nyala.client import Client
from nyala.errors import NyalaError
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import RpcMethod
from nyala.testing.minicluster import ClusterServer, MiniCluster
from nyala.testing.wait import wait_for

__all__ = [
    "BATCH",
    "Layout",
    "LeaderMonitor",
    "TabletProbe",
    "Writer",
    "check_no_acked_row_lost",
    "consensus_states",
    "layout",
    "members",
    "replica_states",
    "settled_layout",
    "wait_tombstoned",
]

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
#: Rows per insert: small batches, so that a change sees many writes in flight.
BATCH = 50


@dataclass
class Writer:
    """Inserts batches of fresh keys until stopped; ``acked`` holds every acknowledged key.

    It has its own client, so that the test's own calls never queue behind its writes.  A
    batch that fails as a whole (its outcome unknown) is recorded in ``failures`` and the
    writer goes on with fresh keys; a row error leaves that key out of ``acked``.
    """

    masters: str
    table_name: str
    #: The first key written: writers of one table in one test module use disjoint ranges.
    first_key: int = 0
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
            start = self.first_key
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


class TabletProbe:
    """One tablet, looked at replica by replica on the cluster's tablet servers."""

    def __init__(self, cluster: MiniCluster, client: Client, tablet_id: str) -> None:
        self.cluster, self.client, self.id = cluster, client, tablet_id
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

    def health_of(self, uuid: str) -> int:
        """The PeerHealthPB the tablet's leader reports for member ``uuid`` (HEALTH_UNKNOWN if absent)."""
        peers = self.leader_state().peers
        return next((p.health for p in peers if p.permanent_uuid == uuid), cpb.HEALTH_UNKNOWN)

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


#: A table's layout as the leader master knows it: tablet id -> sorted (uuid, location, member
#: type) of every replica of its committed config; which voter leads is left out.
Layout = dict[str, list[tuple[str, str, str]]]


def layout(client: Client, table_name: str) -> Layout:
    return {
        t.tablet_id: sorted((r.uuid, r.location, "NON_VOTER" if r.role == "LEARNER" else "VOTER") for r in t.replicas)
        for t in client.open_table(table_name).tablets()
    }


def settled_layout(
    client: Client, table_name: str, replication_factor: int, gone: Collection[str] = ()
) -> Layout | None:
    """The layout once every tablet has exactly ``replication_factor`` replicas, all voters and
    none on a server of ``gone``; None before (or when the master does not answer)."""
    try:
        found = layout(client, table_name)
    except NyalaError:
        return None
    for replicas in found.values():
        if len(replicas) != replication_factor:
            return None
        if any(kind != "VOTER" or uuid in gone for uuid, _, kind in replicas):
            return None
    return found


def members(found: Layout) -> dict[str, set[str]]:
    """Each tablet's member uuids."""
    return {tablet_id: {uuid for uuid, _, _ in replicas} for tablet_id, replicas in found.items()}


def replica_states(client: Client, server: ClusterServer) -> dict[str, int]:
    """tablet id -> TabletStatePB of every replica on ``server`` (its ListTablets)."""
    response = client.run(
        client.aio.messenger.call(server.address, services.LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=10)
    )
    return {t.tablet_id: t.state for t in response.tablets}


def consensus_states(client: Client, server: ClusterServer, timeout_s: float = 5) -> list[cpb.ConsensusStatePB]:
    """The consensus state of every replica on ``server``."""
    request = cpb.GetConsensusStateRequestPB()
    response = client.run(
        client.aio.messenger.call(server.address, services.GET_CONSENSUS_STATE, request, timeout=timeout_s)
    )
    return list(response.tablets)


def wait_tombstoned(client: Client, server: ClusterServer, tablet_ids: Collection[str], what: str) -> None:
    """Wait until every replica of ``tablet_ids`` on ``server`` is a tombstone (it must host each)."""

    def tombstoned() -> dict[str, int] | None:
        states = replica_states(client, server)
        found = {t: states.get(t, -1) for t in tablet_ids}
        return found if all(s == tpb.TOMBSTONED for s in found.values()) else None

    wait_for(tombstoned, what=what, timeout_s=90, retry_on=(NyalaError,))


def check_no_acked_row_lost(
    cluster: MiniCluster, client: Client, tablet_ids: Collection[str], acked: list[int]
) -> None:
    """Every member of each tablet has applied its leader's commit index and holds the same
    keys, and together the tablets hold every acknowledged key."""
    keys: set[int] = set()
    for tablet_id in tablet_ids:
        keys.update(TabletProbe(cluster, client, tablet_id).check_replicas_agree([]))
    missing = sorted(set(acked) - keys)
    assert not missing, f"{len(missing)} acknowledged rows lost, the first {missing[:10]}"


@dataclass
class LeaderMonitor:
    """Samples every replica's term and role on the given tablet servers from a thread, and
    keeps every (tablet, term) -> leaders it saw: two leaders in one term would be a split
    brain.  A server that does not answer (down, or busy) is skipped for that sample."""

    client: Client
    servers: list[ClusterServer]
    leaders: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    samples: int = 0
    _uuids: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LeaderMonitor:
        self._uuids = {s.process.name: s.uuid for s in self.servers}
        self._thread = threading.Thread(target=self._run, name="leader-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        assert not self._thread.is_alive(), "the leader monitor did not stop"

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for server in self.servers:
                try:
                    states = consensus_states(self.client, server, timeout_s=2)
                except NyalaError:
                    continue
                for state in states:
                    if state.role == common_pb2.LEADER:
                        key = (state.tablet_id, state.current_term)
                        self.leaders.setdefault(key, set()).add(self._uuids[server.process.name])
            self.samples += 1

    def wait_samples(self, more: int) -> None:
        target = self.samples + more
        wait_for(lambda: self.samples >= target, what=f"{more} more samples of every replica", timeout_s=60)

    def split_brains(self) -> dict[tuple[str, int], set[str]]:
        return {key: uuids for key, uuids in self.leaders.items() if len(uuids) > 1}
