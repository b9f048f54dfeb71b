"""The operator's consensus calls on a tablet server: ChangeConfig, BulkChangeConfig,
RunLeaderElection and UnsafeChangeConfig (Kudu's ConsensusService methods of those names).

Each request is validated in full first, on this side of the Raft core: the tablet must be
hosted here, every change must have a known type, a peer uuid, a known member type and a
usable address; the compare-and-set index must not be negative.  The core then checks the
change against the config (a peer already present or missing, a no-op, two voter changes,
a change still pending, a stale compare-and-set) and refuses before anything is appended.
Only one refusal changes something: asking a leader to remove or demote itself starts a
leadership transfer (Kudu's rule, the leader never leaves on its own), and the answer is
NotTheLeader naming the voter it hands over to, where the caller retries.

ChangeConfig and BulkChangeConfig answer once the CHANGE_CONFIG entry has committed, with
the new config (its ``opid_index`` is the entry's index).  If a new leader replaced the
entry before it committed, the change did not happen and the answer is NotTheLeader (with
the new leader when known) or ServiceUnavailable: retry, with a fresh compare-and-set.

The address of a peer being added (``last_known_addr``) goes into the Raft transport's
peer directory before the change is proposed, so the leader reaches the new member at once
rather than after the master's next heartbeat answer tells it where that server is.

Masters do not serve these calls for their sys catalog: the masters' Raft config follows
the configured master addresses, which an operator changes with the masters stopped.
"""

from __future__ import annotations

from collections.abc import Sequence

from nyala.common.hostport import HostPort
from nyala.consensus.core import ChangeKind, ConfigChange, MemberType, RaftConfig
from nyala.consensus.runtime import PeerDirectory, RaftReplica
from nyala.errors import Aborted, InvalidArgument, NotTheLeader, ServiceUnavailable
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc import CallContext, RpcServer
from nyala.services import BULK_CHANGE_CONFIG, CHANGE_CONFIG, RUN_LEADER_ELECTION, UNSAFE_CHANGE_CONFIG
from nyala.tserver.manager import TabletManager
from nyala.tserver.tablet import TabletReplica, config_to_pb

__all__ = ["ConsensusAdminService", "parse_change", "parse_changes"]

_KINDS: dict[int, ChangeKind] = {
    cpb.ADD_PEER: ChangeKind.ADD_PEER,
    cpb.REMOVE_PEER: ChangeKind.REMOVE_PEER,
    cpb.MODIFY_PEER: ChangeKind.MODIFY_PEER,
}


def parse_change(change_type: int, peer: cpb.ChangeConfigPeerPB) -> tuple[ConfigChange, HostPort | None]:
    """One change and the new peer's address (if given); InvalidArgument names the problem."""
    kind = _KINDS.get(change_type)
    if kind is None:
        raise InvalidArgument(f"unknown config change type {change_type}; use ADD_PEER, REMOVE_PEER or MODIFY_PEER")
    if not peer.permanent_uuid:
        raise InvalidArgument(f"{kind.name} needs the peer's permanent uuid")
    member_type: MemberType | None = None
    if peer.HasField("member_type"):
        if int(peer.member_type) not in (MemberType.VOTER, MemberType.NON_VOTER):
            raise InvalidArgument(
                f"{kind.name} of {peer.permanent_uuid}: unknown member type {peer.member_type}; use VOTER or NON_VOTER"
            )
        member_type = MemberType(peer.member_type)
    if kind is ChangeKind.ADD_PEER and member_type is None:
        raise InvalidArgument(f"ADD_PEER of {peer.permanent_uuid} needs a member type (VOTER or NON_VOTER)")
    address = None
    if peer.HasField("last_known_addr"):
        host, port = peer.last_known_addr.host, peer.last_known_addr.port
        if not host or not 0 < port < 65536:
            raise InvalidArgument(f"last_known_addr of {peer.permanent_uuid} needs a host and a port in 1-65535")
        address = HostPort(host, port)
    promote = peer.promote if peer.HasField("promote") else None
    replace = peer.replace if peer.HasField("replace") else None
    if kind is ChangeKind.ADD_PEER:  # a new member's unset attributes are false
        promote, replace = bool(promote), bool(replace)
    return ConfigChange(kind, peer.permanent_uuid, member_type, promote, replace), address


def parse_changes(items: Sequence[cpb.ConfigChangeItemPB]) -> tuple[list[ConfigChange], dict[str, HostPort]]:
    """Every change of a BulkChangeConfig, and the addresses of the peers it adds."""
    if not items:
        raise InvalidArgument("BulkChangeConfig needs at least one change")
    changes: list[ConfigChange] = []
    addresses: dict[str, HostPort] = {}
    for item in items:
        change, address = parse_change(item.type, item.peer)
        changes.append(change)
        if address is not None and change.kind is ChangeKind.ADD_PEER:
            addresses[change.peer_id] = address
    return changes, addresses


def _cas(request: cpb.ChangeConfigRequestPB | cpb.BulkChangeConfigRequestPB) -> int | None:
    if not request.HasField("cas_config_opid_index"):
        return None
    if request.cas_config_opid_index < 0:
        raise InvalidArgument(f"cas_config_opid_index must be >= 0, got {request.cas_config_opid_index}")
    return request.cas_config_opid_index


class ConsensusAdminService:
    """Config changes, elections and forced configs on this server's tablet replicas."""

    def __init__(self, uuid: str, tablets: TabletManager, directory: PeerDirectory) -> None:
        self._uuid = uuid
        self._tablets = tablets
        self._directory = directory

    def register(self, rpc: RpcServer) -> None:
        rpc.add_method(CHANGE_CONFIG, self.change_config)
        rpc.add_method(BULK_CHANGE_CONFIG, self.bulk_change_config)
        rpc.add_method(RUN_LEADER_ELECTION, self.run_leader_election)
        rpc.add_method(UNSAFE_CHANGE_CONFIG, self.unsafe_change_config)

    def _tablet(self, dest_uuid: str, tablet_id: str) -> TabletReplica:
        # An empty dest_uuid is accepted (a tool that knows only the address); a wrong one means
        # the caller's address book is stale, and the call must not act on another server.
        if dest_uuid and dest_uuid != self._uuid:
            raise InvalidArgument(f"request is for server {dest_uuid!r} but reached server {self._uuid!r}")
        if not tablet_id:
            raise InvalidArgument("the request needs a tablet_id")
        return self._tablets.get(tablet_id)

    async def change_config(self, request: cpb.ChangeConfigRequestPB, ctx: CallContext) -> cpb.ChangeConfigResponsePB:
        tablet = self._tablet(request.dest_uuid, request.tablet_id)
        change, address = parse_change(request.type, request.peer)
        cas = _cas(request)
        addresses = {change.peer_id: address} if address is not None and change.kind is ChangeKind.ADD_PEER else {}
        config = await self._change(tablet, [change], cas, addresses)
        return cpb.ChangeConfigResponsePB(committed_config=config_to_pb(config))

    async def bulk_change_config(
        self, request: cpb.BulkChangeConfigRequestPB, ctx: CallContext
    ) -> cpb.BulkChangeConfigResponsePB:
        tablet = self._tablet(request.dest_uuid, request.tablet_id)
        changes, addresses = parse_changes(request.changes)
        cas = _cas(request)
        config = await self._change(tablet, changes, cas, addresses)
        return cpb.BulkChangeConfigResponsePB(committed_config=config_to_pb(config))

    async def _change(
        self, tablet: TabletReplica, changes: list[ConfigChange], cas: int | None, addresses: dict[str, HostPort]
    ) -> RaftConfig:
        raft = tablet.require_leader()
        for uuid, address in addresses.items():
            if not raft.active_config.contains(uuid):  # never let a bad request re-route a member
                self._directory.learn(uuid, address)
        try:
            return await raft.change_config(changes, cas)
        except Aborted as exc:
            if "CAS_FAILED" in str(exc):
                raise
            raise _leadership_moved(tablet, raft) from None

    def run_leader_election(
        self, request: cpb.RunLeaderElectionRequestPB, ctx: CallContext
    ) -> cpb.RunLeaderElectionResponsePB:
        _, raft = self._tablet(request.dest_uuid, request.tablet_id).require_running()
        return cpb.RunLeaderElectionResponsePB(already_leader=not raft.campaign())

    def unsafe_change_config(
        self, request: cpb.UnsafeChangeConfigRequestPB, ctx: CallContext
    ) -> cpb.UnsafeChangeConfigResponsePB:
        tablet = self._tablet(request.dest_uuid, request.tablet_id)
        uuids = list(request.new_config_uuids)
        if not uuids or not all(uuids):
            raise InvalidArgument("UnsafeChangeConfig needs the non-empty uuids of the members to keep")
        _, raft = tablet.require_running()
        op = raft.unsafe_change_config(uuids)
        return cpb.UnsafeChangeConfigResponsePB(term=op.term, index=op.index)


def _leadership_moved(tablet: TabletReplica, raft: RaftReplica) -> NotTheLeader | ServiceUnavailable:
    message = f"tablet {tablet.tablet_id}: leadership changed before the config change committed; it did not happen"
    if raft.leader_id and raft.leader_id != raft.peer_id:
        return NotTheLeader(message, leader_hint=raft.leader_id)
    return ServiceUnavailable(message)
