"""Membership change, promotion, leadership transfer and unsafe config change (seed 003, Kudu)."""

from __future__ import annotations

import pytest

from nyala.consensus.core import (
    AppendRequest,
    ChangeKind,
    ConfigChange,
    EntryType,
    LogEntry,
    Member,
    MemberType,
    RaftConfig,
    Role,
    TimeoutNow,
    encode_config,
)
from nyala.errors import Aborted, IllegalState, InvalidArgument, NotFound, NotTheLeader, ServiceUnavailable

from .helpers import GROUP, Net, make_core

V, NV = MemberType.VOTER, MemberType.NON_VOTER


def add(peer_id: str, member_type: MemberType = NV, promote: bool = False) -> ConfigChange:
    return ConfigChange(ChangeKind.ADD_PEER, peer_id, member_type, promote=promote)


def remove(peer_id: str) -> ConfigChange:
    return ConfigChange(ChangeKind.REMOVE_PEER, peer_id)


def cluster(*voters: str, extra: tuple[str, ...] = ()) -> Net:
    """Voters bootstrapped with one config, plus empty replicas that know no config yet."""
    config = RaftConfig.of_voters(voters)
    return Net([make_core(p, config=config) for p in voters] + [make_core(p, config=RaftConfig(())) for p in extra])


def test_a_config_takes_effect_when_appended_and_is_persisted_when_committed() -> None:
    net = cluster("a", "b", "c", extra=("d",))
    leader = net.elect("a")
    op = leader.change_config([add("d", V)], cas_config_opid_index=0)
    assert leader.active_config.is_voter("d"), "effective on append, before commit"
    assert leader.committed_config.opid_index == 0
    assert leader.has_pending_config
    net.stabilize()
    assert leader.committed_config.opid_index == op.index
    assert leader.committed_config.is_voter("d")
    net.notify_commit("a")
    committed = [rd.committed_config for rd in net.readies["b"] if rd.committed_config is not None]
    assert committed[-1] == leader.committed_config
    assert net.cores["d"].role is Role.FOLLOWER


def test_only_one_config_change_may_be_pending() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    net.cut = {"b", "c"}
    leader.change_config([add("d")])
    with pytest.raises(IllegalState, match="pending"):
        leader.change_config([add("e")])


def test_compare_and_set_against_the_committed_config_index() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    with pytest.raises(Aborted, match="CAS_FAILED"):
        leader.change_config([add("d")], cas_config_opid_index=5)
    assert not leader.has_pending_config


def test_a_bad_change_leaves_everything_unchanged() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    last = leader.last_index
    with pytest.raises(InvalidArgument):
        leader.change_config([add("d", V), remove("b")])
    with pytest.raises(NotFound):
        leader.change_config([remove("zz")])
    assert leader.last_index == last
    assert not leader.has_pending_config


def test_a_truncated_config_entry_rolls_back_to_the_previous_config() -> None:
    net = cluster("a", "b", "c")
    net.elect("a")
    b = net.cores["b"]
    new = RaftConfig((*b.active_config.members, Member("d", NV)), 2)
    b.step(AppendRequest(GROUP, "a", "b", 1, 1, 1, (LogEntry(1, 2, EntryType.CHANGE_CONFIG, encode_config(new)),), 1))
    assert b.active_config.contains("d")
    assert b.role is Role.FOLLOWER
    noop = LogEntry(2, 2, EntryType.NO_OP, b"")
    b.step(AppendRequest(GROUP, "c", "b", 2, 1, 1, (noop,), 1))
    assert not b.active_config.contains("d")
    assert b.active_config.opid_index == 0


def test_non_voters_with_promote_become_voters_once_caught_up() -> None:
    net = cluster("a", "b", "c", extra=("d",))
    leader = net.elect("a")
    for i in range(5):
        leader.propose(bytes([i]))
    net.stabilize()
    leader.change_config([add("d", NV, promote=True)])
    net.stabilize()
    for _ in range(3):
        leader.tick()
        net.stabilize()
    assert leader.committed_config.is_voter("d")
    member = leader.committed_config.member("d")
    assert member is not None
    assert not member.promote
    assert net.cores["d"].role is Role.FOLLOWER


def test_a_non_voter_that_has_acknowledged_nothing_is_not_promoted() -> None:
    net = cluster("a", "b", "c", extra=("d",))
    leader = net.elect("a")
    net.cut = {"d"}
    leader.change_config([add("d", NV, promote=True)])
    for _ in range(20):
        leader.tick()
        net.stabilize()
    assert not leader.committed_config.is_voter("d")


def test_removing_the_leader_transfers_leadership_first() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    with pytest.raises(NotTheLeader) as info:
        leader.change_config([remove("a")])
    assert info.value.leader_hint in ("b", "c")
    assert not leader.has_pending_config
    net.stabilize()
    new_leader = net.cores[info.value.leader_hint]
    assert new_leader.is_leader
    assert not leader.is_leader
    new_leader.change_config([remove("a")])
    net.stabilize()
    assert not new_leader.committed_config.contains("a")


def test_graceful_transfer_to_a_named_voter_refuses_writes_in_the_window() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    assert leader.transfer_leadership("c") == "c"
    with pytest.raises(ServiceUnavailable, match="transferring"):
        leader.propose(b"w")
    assert [m.recipient for m in net.sent(TimeoutNow)] == ["c"]
    net.stabilize()
    assert net.cores["c"].is_leader
    assert net.cores["c"].term == 2
    assert leader.role is Role.FOLLOWER


def test_transfer_waits_for_the_target_to_catch_up_and_goes_to_the_most_caught_up_voter() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    net.cut = {"c"}
    leader.propose(b"w")
    net.stabilize()
    assert leader.transfer_leadership() == "b"  # c is behind
    net.stabilize()
    assert net.cores["b"].is_leader


def test_a_failed_transfer_ends_after_one_election_timeout() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    net.cut = {"c"}
    leader.transfer_leadership("c")
    for _ in range(16):
        leader.tick()
        net.deliver()
    assert leader.is_leader
    assert leader.transfer_target == ""
    assert leader.propose(b"w").index == 2


def test_transfer_targets_must_be_voters() -> None:
    net = cluster("a", "b", "c", extra=("d",))
    leader = net.elect("a")
    leader.change_config([add("d")])
    net.stabilize()
    with pytest.raises(InvalidArgument):
        leader.transfer_leadership("d")
    with pytest.raises(InvalidArgument):
        leader.transfer_leadership("a")
    with pytest.raises(NotTheLeader):
        net.cores["b"].transfer_leadership("c")


def test_abrupt_step_down_raises_the_term_and_sits_out_the_next_election() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    leader.step_down()
    assert leader.role is Role.FOLLOWER
    assert leader.term == 2
    assert leader.leader_id == ""
    rd = leader.ready()
    assert rd.hard_state is not None
    assert rd.hard_state.term == 2
    assert rd.must_sync
    leader.advance(rd)
    for _ in range(29):
        leader.tick()
    assert leader.role is Role.FOLLOWER, "snoozed for two election timeouts"


def test_unsafe_change_config_lets_a_lone_survivor_lead() -> None:
    net = cluster("a", "b", "c")
    leader = net.elect("a")
    leader.propose(b"w")
    net.stabilize()
    survivor = net.cores["b"]
    op = survivor.unsafe_change_config(["b"])
    assert op.term == 2, "the forced config is appended at a new term"
    assert survivor.term == 3, "and the survivor is elected at the next"
    net.collect()
    assert survivor.is_leader
    assert survivor.active_config.voters == ("b",)
    assert survivor.active_config.unsafe_config_change
    assert survivor.commit_index == survivor.last_index
    assert survivor.propose(b"after").index == survivor.last_index


def test_unsafe_change_config_accepts_only_surviving_members_including_itself() -> None:
    core = make_core("b")
    with pytest.raises(NotFound):
        core.unsafe_change_config(["b", "zz"])
    with pytest.raises(InvalidArgument):
        core.unsafe_change_config(["a"])
    with pytest.raises(InvalidArgument):
        core.unsafe_change_config([])
    assert core.term == 0
    assert core.last_index == 0
