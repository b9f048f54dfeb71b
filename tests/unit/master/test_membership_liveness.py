"""RemoveMaster counts as live only the voters that answer the leader after the request came.

The catalog manager and the sys catalog's Raft replica are fakes; the peers' progress is the
Raft core's own (``Progress`` seen through ``PeerProgress``), so "answered" means what the core
means by it.  The regression: a master killed a moment before the request had answered
recently (``silent_ticks`` still low), was counted live, and the leader appended a REMOVE_PEER
whose majority was dead; it never committed and no leader could be elected afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from nyala.common.hostport import HostPort
from nyala.consensus.core import ChangeKind, ConfigChange, RaftConfig
from nyala.consensus.core.progress import Progress
from nyala.consensus.core.raft import PeerProgress
from nyala.consensus.runtime import PeerDirectory
from nyala.errors import IllegalState, ServiceUnavailable
from nyala.master.catalog_manager import CatalogManager
from nyala.master.membership import MasterMembership
from nyala.master.peers import MasterPeers
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run

pytestmark = pytest.mark.timeout(30)

LEADER, DEAD, LIVE = "leader", "dead", "live"
ADDRESSES = {u: HostPort("127.0.0.1", 7051 + i) for i, u in enumerate((LEADER, DEAD, LIVE))}
WINDOW_S = 0.3


class FakeReplica:
    """The leader's sys catalog replica: three voters; ``answering`` peers answer every poll."""

    def __init__(self, answering: set[str]) -> None:
        self.committed_config = RaftConfig.of_voters([LEADER, DEAD, LIVE])
        self.active_config = self.committed_config
        self.transfer_target = ""
        self.term = 1
        self.answering = answering
        self.progress = {p: Progress(1) for p in (DEAD, LIVE)}
        for progress in self.progress.values():
            progress.heard()  # everyone answered a moment ago: silent_ticks is 0 for both
        self.changes: list[Sequence[ConfigChange]] = []
        self.polls = 0
        self.new_term_at_poll = 0  # when set, the leader moves to a new term at that poll

    def peer_progress(self) -> tuple[PeerProgress, ...]:
        self.polls += 1
        if self.polls == self.new_term_at_poll:
            self.term += 1
        for peer_id in self.answering:
            self.progress[peer_id].heard()
        return tuple(PeerProgress(p, pr, 3000) for p, pr in self.progress.items())

    async def change_config(self, changes: Sequence[ConfigChange], cas: int | None) -> RaftConfig:
        self.changes.append(changes)
        return self.committed_config.with_opid_index(self.committed_config.opid_index + 1)


class FakeCatalogManager:
    def __init__(self, replica: FakeReplica) -> None:
        self.replica = replica
        self.cluster_id = "cluster"
        self.writes: list[mpb.CatalogWritePB] = []

    def leader(self) -> object:
        return object()

    async def exclusive(self, body: Callable[[], Awaitable[Any]]) -> Any:
        return await body()

    async def replicate(self, view: object, write: mpb.CatalogWritePB) -> None:
        self.writes.append(write)


def membership(tmp_path: Path, replica: FakeReplica) -> MasterMembership:
    peers = MasterPeers(LEADER, ADDRESSES[LEADER], list(ADDRESSES.values()), tmp_path)
    peers.by_uuid = dict(ADDRESSES)
    m = MasterMembership(
        LEADER,
        cast(CatalogManager, FakeCatalogManager(replica)),
        peers,
        PeerDirectory(),
        cast(Messenger, None),
        liveness_window_s=WINDOW_S,
        poll_interval_s=0.01,
    )
    m.book.update(ADDRESSES)
    return m


def test_a_voter_that_answered_only_before_the_request_is_not_counted_live(tmp_path: Path) -> None:
    replica = FakeReplica(answering=set())  # the dead master's last answer is recent, and its last one
    with pytest.raises(IllegalState, match="only 1 are live, fewer than the majority of 2"):
        run(membership(tmp_path, replica).remove_master(mpb.RemoveMasterRequestPB(uuid=LIVE)))
    assert replica.changes == [], "no REMOVE_PEER may be appended when the majority left is dead"


def test_a_voter_that_answers_after_the_request_is_counted_live(tmp_path: Path) -> None:
    replica = FakeReplica(answering={DEAD})  # "dead" is alive after all: removing "live" is safe
    response = run(membership(tmp_path, replica).remove_master(mpb.RemoveMasterRequestPB(uuid=LIVE)))
    assert response.uuid == LIVE
    assert replica.changes == [[ConfigChange(ChangeKind.REMOVE_PEER, LIVE)]]


def test_leadership_lost_while_waiting_is_retriable(tmp_path: Path) -> None:
    replica = FakeReplica(answering=set())
    replica.progress.clear()  # the core stopped leading: it tracks no peers
    with pytest.raises(ServiceUnavailable, match="leadership is changing"):
        run(membership(tmp_path, replica).remove_master(mpb.RemoveMasterRequestPB(uuid=LIVE)))
    assert replica.changes == []


def test_a_new_term_while_waiting_is_retriable(tmp_path: Path) -> None:
    replica = FakeReplica(answering=set())
    replica.new_term_at_poll = 2  # re-elected: the answer counts of the old term mean nothing
    with pytest.raises(ServiceUnavailable, match="leadership is changing"):
        run(membership(tmp_path, replica).remove_master(mpb.RemoveMasterRequestPB(uuid=LIVE)))
    assert replica.changes == []
