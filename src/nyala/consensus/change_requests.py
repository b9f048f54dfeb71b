"""Config-change requests as they go on the wire, shared by the CLI tools and the master.

A 3-4-3 move starts with one BulkChangeConfig: the source is marked ``replace`` and the
destination joins as a NON_VOTER with ``promote``; the tablet's leader copies and promotes
the destination and the leader master evicts the source.  The CLI (``replica_ops``) and the
leader master's auto rebalancer both start moves this way, so the request is built here once.
"""

from __future__ import annotations

from nyala.common.hostport import parse_address
from nyala.consensus.core import ChangeKind, ConfigChange, MemberType
from nyala.proto import consensus_rpc_pb2 as cpb

__all__ = ["bulk_change_request", "change_item_pb", "start_move_changes"]


def change_item_pb(change: ConfigChange, address: str) -> cpb.ConfigChangeItemPB:
    """One change on the wire; ``address`` ("host:port") is where an added peer is."""
    peer = cpb.ChangeConfigPeerPB(
        permanent_uuid=change.peer_id,
        member_type=None if change.member_type is None else change.member_type.name,
        promote=change.promote,
        replace=change.replace,
    )
    if address and change.kind is ChangeKind.ADD_PEER:
        hp = parse_address(address)
        peer.last_known_addr.host, peer.last_known_addr.port = hp.host, hp.port
    return cpb.ConfigChangeItemPB(type=change.kind.name, peer=peer)


def start_move_changes(
    source: str, dest: str, *, source_is_voter: bool = True, source_replaced: bool = False
) -> list[ConfigChange]:
    """The changes that start a move: mark the source ``replace`` (unless it already is) and add
    the destination as a NON_VOTER, to be promoted when the source is a voter."""
    changes = [ConfigChange(ChangeKind.ADD_PEER, dest, MemberType.NON_VOTER, promote=source_is_voter, replace=False)]
    if not source_replaced:
        changes.insert(0, ConfigChange(ChangeKind.MODIFY_PEER, source, replace=True))
    return changes


def bulk_change_request(
    leader_uuid: str, tablet_id: str, items: list[cpb.ConfigChangeItemPB], cas_config_index: int
) -> cpb.BulkChangeConfigRequestPB:
    """A BulkChangeConfig to the tablet's leader, applied only while the committed config's index
    is still ``cas_config_index``."""
    return cpb.BulkChangeConfigRequestPB(
        dest_uuid=leader_uuid, tablet_id=tablet_id, changes=items, cas_config_opid_index=cas_config_index
    )
