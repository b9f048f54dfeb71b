"""The pure parts of the replica commands: the 3-4-3 move's steps and the request parsing."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from nyala.common.hostport import HostPort
from nyala.consensus.core import ChangeKind, ConfigChange, Member, MemberType, RaftConfig
from nyala.errors import IllegalState, InvalidArgument, NotFound
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.tools.cli import main
from nyala.tools.replica_ops import (
    CopyPeer,
    MoveState,
    MoveStep,
    _move_changes,
    check_member_copy,
    member_type,
    move_state,
    next_move_step,
)
from nyala.tserver.consensus_admin import parse_change, parse_changes

V, N = MemberType.VOTER, MemberType.NON_VOTER


def config(*members: Member, index: int = 5) -> RaftConfig:
    return RaftConfig(members, index)


def test_a_move_goes_through_its_steps_and_resumes_from_any_of_them() -> None:
    start = config(Member("a", V), Member("b", V), Member("c", V))
    assert next_move_step(start, None, "a", "c", "d") is MoveStep.ADD_DESTINATION
    assert _move_changes(MoveStep.ADD_DESTINATION, start, "c", "d") == [
        ConfigChange(ChangeKind.MODIFY_PEER, "c", replace=True),
        ConfigChange(ChangeKind.ADD_PEER, "d", N, promote=True, replace=False),
    ]
    adding = config(Member("a", V), Member("b", V), Member("c", V, replace=True), Member("d", N, promote=True))
    assert next_move_step(start, adding, "a", "c", "d") is MoveStep.WAIT_PENDING
    assert next_move_step(adding, None, "a", "c", "d") is MoveStep.WAIT_PROMOTION
    promoted = config(Member("a", V), Member("b", V), Member("c", V, replace=True), Member("d", V))
    assert next_move_step(promoted, None, "a", "c", "d") is MoveStep.REMOVE_SOURCE
    assert next_move_step(promoted, None, "c", "c", "d") is MoveStep.STEP_DOWN_SOURCE
    assert _move_changes(MoveStep.REMOVE_SOURCE, promoted, "c", "d") == [ConfigChange(ChangeKind.REMOVE_PEER, "c")]
    moved = config(Member("a", V), Member("b", V), Member("d", V))
    assert next_move_step(moved, None, "a", "c", "d") is MoveStep.DONE


def test_a_move_finishes_a_destination_added_by_hand_and_refuses_nonsense() -> None:
    by_hand = config(Member("a", V), Member("c", V), Member("d", N))
    assert next_move_step(by_hand, None, "a", "c", "d") is MoveStep.PROMOTE_DESTINATION
    assert _move_changes(MoveStep.PROMOTE_DESTINATION, by_hand, "c", "d") == [
        ConfigChange(ChangeKind.MODIFY_PEER, "d", promote=True)
    ]
    with pytest.raises(NotFound, match="holds no replica"):
        next_move_step(config(Member("a", V)), None, "a", "c", "d")
    with pytest.raises(InvalidArgument, match="same server"):
        next_move_step(by_hand, None, "a", "c", "c")
    # A non-voter moves as a non-voter: no promotion to wait for.
    learner = config(Member("a", V), Member("c", N))
    assert _move_changes(MoveStep.ADD_DESTINATION, learner, "c", "d")[-1].promote is False
    assert next_move_step(config(Member("a", V), Member("c", N), Member("d", N)), None, "a", "c", "d") is (
        MoveStep.REMOVE_SOURCE
    )


def test_member_types_by_name() -> None:
    assert member_type("voter") is V
    assert member_type("NON_VOTER") is N
    with pytest.raises(InvalidArgument, match="VOTER or NON_VOTER"):
        member_type("witness")


def peer(**fields: object) -> cpb.ChangeConfigPeerPB:
    return cpb.ChangeConfigPeerPB(**fields)  # type: ignore[arg-type]


def test_change_requests_are_validated_in_full() -> None:
    change, address = parse_change(
        cpb.ADD_PEER, peer(permanent_uuid="d", member_type="NON_VOTER", last_known_addr={"host": "h", "port": 7050})
    )
    assert change == ConfigChange(ChangeKind.ADD_PEER, "d", N, promote=False, replace=False)
    assert address is not None
    assert (address.host, address.port) == ("h", 7050)
    modify, _ = parse_change(cpb.MODIFY_PEER, peer(permanent_uuid="d", replace=True))
    assert modify == ConfigChange(ChangeKind.MODIFY_PEER, "d", None, None, True)  # unset fields are kept
    bad = [
        (0, peer(permanent_uuid="d"), "unknown config change type"),
        (cpb.REMOVE_PEER, peer(), "permanent uuid"),
        (cpb.ADD_PEER, peer(permanent_uuid="d"), "needs a member type"),
        (cpb.ADD_PEER, peer(permanent_uuid="d", member_type=7), "unknown member type 7"),
        (cpb.ADD_PEER, peer(permanent_uuid="d", member_type="VOTER", last_known_addr={"host": "h"}), "port"),
    ]
    for change_type, pb, message in bad:
        with pytest.raises(InvalidArgument, match=message):
            parse_change(change_type, pb)
    with pytest.raises(InvalidArgument, match="at least one change"):
        parse_changes([])


def test_kudu_underscore_spellings_and_help() -> None:
    runner = CliRunner()
    for argv in (
        ["tablet", "change_config", "add_replica", "--help"],
        ["tablet", "leader_step_down", "--help"],
        ["tablet", "move_replica", "--help"],
        ["remote_replica", "unsafe_change_config", "--help"],
    ):
        result = runner.invoke(main, argv)
        assert result.exit_code == 0, result.output
    assert "leader_step_down" not in runner.invoke(main, ["tablet", "--help"]).output
    bad = runner.invoke(main, ["tablet", "leader-step-down", "m:1", "t", "--abrupt", "--new-leader-uuid", "x"])
    assert bad.exit_code == 2
    assert "graceful" in bad.output
    voter = runner.invoke(main, ["tablet", "change-config", "add-replica", "m:1", "t", "u", "VOTER", "--promote"])
    assert voter.exit_code == 2
    assert "--promote is for a NON_VOTER" in voter.output


def test_a_members_replica_is_never_replaced_live_and_is_copied_only_from_the_leader() -> None:
    address = HostPort("127.0.0.1", 7050)
    leader = CopyPeer("a", address, 3, leads=True, leader_uuid="a", members=frozenset("abc"))
    follower = CopyPeer("b", address, 3, leads=False, leader_uuid="a", members=frozenset("abc"))
    check_member_copy("t", leader, "d", frozenset(), live=True)  # not a member: anything goes
    check_member_copy("t", leader, "c", frozenset("abc"), live=False)  # a member's tombstone, from the leader
    with pytest.raises(IllegalState, match="live member"):
        check_member_copy("t", leader, "c", frozenset("abc"), live=True)
    with pytest.raises(IllegalState, match=r"from the tablet's leader \(a\)"):
        check_member_copy("t", follower, "c", frozenset(), live=False)
    # The leader's config decides: a replica it removed is no member, whatever it believes.
    check_member_copy("t", CopyPeer("a", address, 3, True, "a", frozenset("ab")), "c", frozenset("abc"), live=True)
    # Without the leader's word, the destination's own view counts too.
    stale = CopyPeer("b", address, 3, False, "", frozenset("ab"))
    with pytest.raises(IllegalState, match="unknown to the source"):
        check_member_copy("t", stale, "c", frozenset("abc"), live=False)


def test_a_started_move_is_done_once_the_source_left_and_the_destination_votes() -> None:
    adding = config(Member("a", V), Member("b", V), Member("c", V, replace=True), Member("d", N, promote=True))
    assert move_state(adding, "c", "d") is MoveState.IN_PROGRESS
    promoted = config(Member("a", V), Member("b", V), Member("c", V, replace=True), Member("d", V))
    assert move_state(promoted, "c", "d") is MoveState.IN_PROGRESS
    assert move_state(config(Member("a", V), Member("b", V), Member("d", V)), "c", "d") is MoveState.DONE
    lost = config(Member("a", V), Member("b", V), Member("c", V, replace=True))
    assert move_state(lost, "c", "d") is MoveState.DESTINATION_LOST
    evicted_first = config(Member("a", V), Member("b", V), Member("d", N, promote=True))
    assert move_state(evicted_first, "c", "d") is MoveState.IN_PROGRESS  # d is still promoted
    assert move_state(config(Member("a", V), Member("b", V)), "c", "d") is MoveState.SOURCE_LOST
