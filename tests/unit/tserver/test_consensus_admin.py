"""The tablet server's config-change handlers, against a stand-in Raft replica: what reaches
the replica, what is learned, and how refusals are answered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from nyala.common.hostport import HostPort
from nyala.consensus.core import ChangeKind, ConfigChange, MemberType, OpId, RaftConfig, apply_changes
from nyala.consensus.runtime import PeerDirectory
from nyala.errors import Aborted, InvalidArgument, NotFound, NotTheLeader, ServiceUnavailable
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc.loop import run
from nyala.tserver.consensus_admin import ConsensusAdminService
from nyala.tserver.manager import TabletManager


class StandInRaft:
    def __init__(self) -> None:
        self.peer_id = "a"
        self.leader_id = "a"
        self.active_config = RaftConfig.of_voters("abc", 4)
        self.calls: list[tuple[list[ConfigChange], int | None]] = []
        self.fail_with: Exception | None = None
        self.campaigns = 0
        self.forced: list[Sequence[str]] = []

    async def change_config(self, changes: Sequence[ConfigChange], cas: int | None = None) -> RaftConfig:
        self.calls.append((list(changes), cas))
        if self.fail_with is not None:
            raise self.fail_with
        return apply_changes(self.active_config, changes).with_opid_index(9)

    def campaign(self) -> bool:
        self.campaigns += 1
        return self.campaigns == 1  # it campaigns, and leads from then on

    def unsafe_change_config(self, peer_ids: Sequence[str]) -> OpId:
        self.forced.append(peer_ids)
        return OpId(7, 12)


class StandInTablet:
    tablet_id = "t1"

    def __init__(self, raft: StandInRaft) -> None:
        self.raft = raft

    def require_leader(self) -> StandInRaft:
        return self.raft

    def require_running(self) -> tuple[None, StandInRaft]:
        return None, self.raft


class StandInTablets:
    def __init__(self, tablet: StandInTablet) -> None:
        self.tablet = tablet

    def get(self, tablet_id: str) -> StandInTablet:
        if tablet_id != self.tablet.tablet_id:
            raise NotFound(f"tablet {tablet_id!r} is not hosted on this server")
        return self.tablet


def service() -> tuple[ConsensusAdminService, StandInRaft, PeerDirectory]:
    raft = StandInRaft()
    directory = PeerDirectory()
    tablets = cast(TabletManager, StandInTablets(StandInTablet(raft)))
    return ConsensusAdminService("a", tablets, directory), raft, directory


def call(coro: Any) -> Any:
    async def main() -> Any:
        return await coro

    return run(main())


def add_request(uuid: str, **extra: Any) -> cpb.ChangeConfigRequestPB:
    return cpb.ChangeConfigRequestPB(
        tablet_id="t1",
        type=cpb.ADD_PEER,
        peer=cpb.ChangeConfigPeerPB(
            permanent_uuid=uuid, member_type="NON_VOTER", last_known_addr={"host": "10.0.0.4", "port": 7050}
        ),
        **extra,
    )


def test_an_added_peer_is_learned_and_the_answer_is_the_committed_config() -> None:
    svc, raft, directory = service()
    answer = call(svc.change_config(add_request("d", cas_config_opid_index=4), None))  # type: ignore[arg-type]
    assert raft.calls == [([ConfigChange(ChangeKind.ADD_PEER, "d", MemberType.NON_VOTER, False, False)], 4)]
    assert directory.get("d") == HostPort("10.0.0.4", 7050)
    assert answer.committed_config.opid_index == 9
    assert [p.permanent_uuid for p in answer.committed_config.peers] == ["a", "b", "c", "d"]


def test_an_existing_member_is_never_rerouted_by_a_request() -> None:
    svc, raft, directory = service()
    directory.learn("b", HostPort("127.0.0.2", 7050))
    raft.fail_with = InvalidArgument("peer 'b' is already in the config")
    with pytest.raises(InvalidArgument):
        call(svc.change_config(add_request("b"), None))  # type: ignore[arg-type]
    assert directory.get("b") == HostPort("127.0.0.2", 7050)


def test_bad_requests_never_reach_the_replica() -> None:
    svc, raft, _ = service()
    bad = [
        (add_request("d", dest_uuid="zz"), InvalidArgument, "reached server"),
        (cpb.ChangeConfigRequestPB(tablet_id="t1", type=cpb.ADD_PEER), InvalidArgument, "permanent uuid"),
        (add_request("d", cas_config_opid_index=-1), InvalidArgument, "cas_config_opid_index"),
        (cpb.ChangeConfigRequestPB(tablet_id="nope"), NotFound, "not hosted"),
        (cpb.ChangeConfigRequestPB(), InvalidArgument, "tablet_id"),
    ]
    for request, error, message in bad:
        with pytest.raises(error, match=message):
            call(svc.change_config(request, None))  # type: ignore[arg-type]
    assert raft.calls == []


def test_a_replaced_entry_is_answered_as_a_leadership_change_and_cas_failures_as_aborted() -> None:
    svc, raft, _ = service()
    raft.fail_with = Aborted("entry 12 was replaced by a new leader; it was not applied")
    raft.leader_id = "b"
    with pytest.raises(NotTheLeader) as moved:
        call(svc.change_config(add_request("d"), None))  # type: ignore[arg-type]
    assert moved.value.leader_hint == "b"
    raft.leader_id = ""
    with pytest.raises(ServiceUnavailable, match="did not happen"):
        call(svc.change_config(add_request("d"), None))  # type: ignore[arg-type]
    raft.fail_with = Aborted("CAS_FAILED: the committed config has op index 4, not 3")
    with pytest.raises(Aborted, match="CAS_FAILED"):
        call(svc.change_config(add_request("d"), None))  # type: ignore[arg-type]


def test_elections_and_forced_configs() -> None:
    svc, raft, _ = service()
    election = cpb.RunLeaderElectionRequestPB(tablet_id="t1")
    assert not svc.run_leader_election(election, None).already_leader  # type: ignore[arg-type]
    assert svc.run_leader_election(election, None).already_leader  # type: ignore[arg-type]
    forced = svc.unsafe_change_config(
        cpb.UnsafeChangeConfigRequestPB(tablet_id="t1", new_config_uuids=["a"]),
        None,  # type: ignore[arg-type]
    )
    assert (forced.term, forced.index) == (7, 12)
    assert raft.forced == [["a"]]
    with pytest.raises(InvalidArgument, match="non-empty uuids"):
        svc.unsafe_change_config(cpb.UnsafeChangeConfigRequestPB(tablet_id="t1"), None)  # type: ignore[arg-type]
