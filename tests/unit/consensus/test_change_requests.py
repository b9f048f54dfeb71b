"""The BulkChangeConfig that starts a 3-4-3 move, shared by the CLI and the leader master."""

from __future__ import annotations

from nyala.consensus.change_requests import bulk_change_request, change_item_pb, start_move_changes
from nyala.consensus.core import ChangeKind
from nyala.proto import consensus_rpc_pb2 as cpb


def test_a_move_marks_the_source_replace_and_adds_the_destination_to_be_promoted() -> None:
    changes = start_move_changes("src", "dst")
    items = [change_item_pb(c, "10.0.0.2:7050" if c.kind is ChangeKind.ADD_PEER else "") for c in changes]
    request = bulk_change_request("leader", "tablet-1", items, 7)
    assert request.dest_uuid == "leader"
    assert request.tablet_id == "tablet-1"
    assert request.cas_config_opid_index == 7
    modify, add = request.changes
    assert modify.type == cpb.MODIFY_PEER
    assert modify.peer.permanent_uuid == "src"
    assert modify.peer.replace
    assert add.type == cpb.ADD_PEER
    assert add.peer.permanent_uuid == "dst"
    assert add.peer.promote
    assert (add.peer.last_known_addr.host, add.peer.last_known_addr.port) == ("10.0.0.2", 7050)


def test_a_source_already_marked_or_not_a_voter_changes_the_request() -> None:
    assert [c.kind for c in start_move_changes("src", "dst", source_replaced=True)] == [ChangeKind.ADD_PEER]
    assert start_move_changes("src", "dst", source_is_voter=False)[-1].promote is False
