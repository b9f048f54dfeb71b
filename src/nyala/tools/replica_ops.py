"""The RPC side of the replica admin commands: find a tablet's leader, change its config, move
a replica, step a leader down.  ``cmd_tablet`` and ``cmd_remote_replica`` print the results.

Finding the leader: the masters' GetTabletLocations names the tablet's replicas and the
leader last reported; ListTabletServers gives each server's address.  The tool asks the
named leader (then every replica, then whichever leader they name) for its own view with
GetConsensusState, and trusts only a replica that says it leads.  Elections take a moment,
so it keeps looking until the operation's deadline.

Changing the config: every change carries a compare-and-set on the committed config's op
index the leader just reported, so a change decided on a stale view is refused (Aborted,
CAS_FAILED) instead of applied.  NotTheLeader is followed to the leader it names (a leader
asked to remove or demote itself answers so, naming the voter it hands leadership to);
ServiceUnavailable (a new leader not yet running, a transfer) is retried.  After an attempt
whose outcome is unknown, the tool re-reads the committed config and stops if the change is
already in it, so a retry never applies a change twice.

Moving a replica (Kudu's 3-4-3 move, :func:`next_move_step` decides each step from the
committed config alone, so a re-run picks up where an interrupted one stopped):

1. one BulkChangeConfig: the source is marked ``replace`` and the destination joins as a
   NON_VOTER with ``promote``;
2. the leader promotes the destination to VOTER once it has caught up (a destination that
   does not host the tablet yet needs a tablet copy first); the tool waits, showing how far
   the destination's log has come;
3. a source that leads is stepped down gracefully, then the source is removed.

The rebalancer sends only step 1 (:func:`start_move`) and leaves the rest to the leader
master's re-replication, which promotes the destination and evicts the source marked
``replace``; :func:`move_state` tells from the committed config how far such a move has come,
and :func:`cancel_move` undoes one whose destination is still a NON_VOTER.

Majority-loss recovery: :func:`rank_replicas` orders a tablet's replicas by how up to date
their logs are (the higher last term first, then the longer log, as Raft's vote rule ranks
them), so the operator forces the config on the survivor that lost the least;
:func:`delete_remote_replica` tombstones one replica through the server's DeleteTablet.

Copying a replica by hand (Kudu's ``remote_replica copy``): :func:`copy_remote_replica` checks
the source (reachable, hosting the tablet RUNNING) and the destination (no live replica unless
forced) before anything changes, sends the destination StartTabletCopy, and follows the copy
in the destination's GetTabletServerStatus until the replica runs or the copy failed.  A
member of the tablet's config is never replaced live, and is copied only from the leader
(:func:`check_member_copy`): either could lose writes it acknowledged.
:func:`check_copy_source` and :func:`check_member_copy` are shared with ``local-replica
copy-from-remote``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from nyala.client.async_client import AsyncClient
from nyala.client.info import role_name
from nyala.common.hostport import HostPort
from nyala.consensus.change_requests import bulk_change_request, change_item_pb, start_move_changes
from nyala.consensus.core import ChangeKind, ConfigChange, MemberType, RaftConfig, decode_config
from nyala.errors import (
    Aborted,
    AlreadyPresent,
    IllegalState,
    InvalidArgument,
    NetworkError,
    NotFound,
    NotTheLeader,
    NyalaError,
    ServiceUnavailable,
    TimedOut,
)
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.services import (
    BULK_CHANGE_CONFIG,
    CHANGE_CONFIG,
    DELETE_TABLET,
    GET_CONSENSUS_STATE,
    GET_TABLET_SERVER_STATUS,
    LEADER_STEP_DOWN,
    LIST_TABLETS,
    START_TABLET_COPY,
    UNSAFE_CHANGE_CONFIG,
)
from nyala.tserver.metadata import TABLET_ID_PATTERN

__all__ = [
    "COPY_CALLER",
    "CopiedReplica",
    "CopyPeer",
    "DeletedReplica",
    "MoveState",
    "MoveStep",
    "ReplicaView",
    "TabletOps",
    "cancel_move",
    "check_copy_source",
    "check_member_copy",
    "config_rows",
    "copy_remote_replica",
    "delete_remote_replica",
    "list_remote_replicas",
    "member_type",
    "most_up_to_date",
    "move_replica",
    "move_state",
    "next_move_step",
    "rank_replicas",
    "start_move",
    "unsafe_change_config",
]

#: How often the tool looks again while it waits for an election, a promotion, a transfer.
POLL_S = 0.2

Report = Callable[[str], None]
Progress = Callable[[int, int], None]


def member_type(name: str) -> MemberType:
    """VOTER or NON_VOTER (any case); InvalidArgument otherwise."""
    try:
        return MemberType[name.upper()]
    except KeyError:
        raise InvalidArgument(f"unknown replica type {name!r}; use VOTER or NON_VOTER") from None


def _config(pb: consensus_pb2.RaftConfigPB) -> RaftConfig:
    return decode_config(pb.SerializeToString())


@dataclasses.dataclass(frozen=True)
class ReplicaView:
    """One replica's own view of its tablet (GetConsensusState)."""

    server_uuid: str
    address: str
    state: cpb.ConsensusStatePB

    @property
    def is_leader(self) -> bool:
        return self.state.role == common_pb2.LEADER and self.state.leader_uuid == self.server_uuid

    @property
    def committed(self) -> RaftConfig:
        return _config(self.state.committed_config)

    @property
    def pending(self) -> RaftConfig | None:
        return _config(self.state.pending_config) if self.state.HasField("pending_config") else None

    def peer(self, uuid: str) -> cpb.PeerProgressPB | None:
        return next((p for p in self.state.peers if p.permanent_uuid == uuid), None)


def config_rows(config: RaftConfig, leader: str, addresses: dict[str, str]) -> list[dict[str, Any]]:
    """A config as rows for printing: uuid, address, member type, attributes, leader."""
    return [
        {
            "uuid": m.peer_id,
            "address": addresses.get(m.peer_id, ""),
            "member_type": m.member_type.name,
            "promote": m.promote,
            "replace": m.replace,
            "leader": m.peer_id == leader,
        }
        for m in config.members
    ]


class TabletOps:
    """Consensus operations on one tablet through its current leader, all within one deadline."""

    def __init__(self, client: AsyncClient, tablet_id: str, timeout_s: float) -> None:
        if not tablet_id:
            raise InvalidArgument("a tablet id is needed")
        self.client = client
        self.tablet_id = tablet_id
        self.timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + timeout_s
        self._servers: dict[str, str] = {}

    @property
    def messenger(self) -> Messenger:
        return self.client.messenger

    def remaining(self) -> float:
        return max(0.0, self._deadline - self._loop.time())

    async def pause(self, waiting_for: str, last_error: BaseException | None = None) -> None:
        """Wait a moment before looking again; TimedOut once the deadline has passed."""
        if self.remaining() <= 0:
            cause = f" (last error: {type(last_error).__name__}: {last_error})" if last_error else ""
            raise TimedOut(f"tablet {self.tablet_id}: {waiting_for} within {self.timeout_s:g} s{cause}")
        await asyncio.sleep(min(POLL_S, self.remaining()))

    # -- servers and replicas ----------------------------------------------------------------

    async def servers(self, refresh: bool = False) -> dict[str, str]:
        """Registered tablet servers: uuid -> RPC address."""
        if refresh or not self._servers:
            listed = await self.client.list_tablet_servers(timeout_s=max(self.remaining(), 0.1))
            self._servers = {s.uuid: s.rpc_addresses[0] for s in listed if s.rpc_addresses}
        return self._servers

    async def address_of(self, uuid: str) -> str:
        servers = await self.servers()
        if uuid not in servers:
            servers = await self.servers(refresh=True)
        if uuid not in servers:
            raise NotFound(f"no tablet server with uuid {uuid!r} is registered with the masters")
        return servers[uuid]

    async def view(self, uuid: str) -> ReplicaView:
        """What the replica on server ``uuid`` says about the tablet."""
        address = await self.address_of(uuid)
        response = await self.messenger.call(
            address,
            GET_CONSENSUS_STATE,
            cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[self.tablet_id]),
            timeout=max(min(self.remaining(), 10.0), 0.1),
        )
        if not response.tablets:
            raise NotFound(f"tablet {self.tablet_id} has no consensus state on server {uuid}")
        return ReplicaView(uuid, address, response.tablets[0])

    async def leader(self, hint: str = "", accept: Callable[[ReplicaView], bool] | None = None) -> ReplicaView:
        """The replica that says it leads (and that ``accept`` takes), once there is one."""
        last_error: BaseException | None = None
        while True:
            info = await self.client.tablet_info(self.tablet_id, timeout_s=max(self.remaining(), 0.1))
            reported = [r.uuid for r in info.replicas if r.role == "LEADER"]
            order = deque([hint, *reported, *(r.uuid for r in info.replicas)])
            asked: set[str] = set()
            while order:
                uuid = order.popleft()
                if not uuid or uuid in asked:
                    continue
                asked.add(uuid)
                try:
                    view = await self.view(uuid)
                except NyalaError as exc:
                    last_error = exc
                    continue
                if view.is_leader and (accept is None or accept(view)):
                    return view
                order.append(view.state.leader_uuid)
            await self.pause("no leader was found", last_error)

    # -- changes -----------------------------------------------------------------------------

    async def change(
        self,
        changes: Sequence[ConfigChange],
        *,
        done: Callable[[RaftConfig], bool],
        leader: ReplicaView | None = None,
    ) -> tuple[RaftConfig, str]:
        """Apply ``changes`` in one config entry on the leader, with compare-and-set on the
        committed config it reports; return the new committed config and the leader's uuid.

        ``done`` tells whether a config already contains the change, which is checked only
        after an attempt whose outcome is unknown (so a repeated change is still an error).
        """
        addresses = {c.peer_id: await self.address_of(c.peer_id) for c in changes if c.kind is ChangeKind.ADD_PEER}
        hint = ""
        retrying = False
        last_error: BaseException | None = None
        while True:
            if leader is None:
                leader = await self.leader(hint)
            config = leader.committed
            if retrying and done(config):
                return config, leader.server_uuid
            items = [change_item_pb(c, addresses.get(c.peer_id, "")) for c in changes]
            cas = config.opid_index
            try:
                if len(items) == 1:
                    single = cpb.ChangeConfigRequestPB(
                        dest_uuid=leader.server_uuid,
                        tablet_id=self.tablet_id,
                        type=items[0].type,
                        peer=items[0].peer,
                        cas_config_opid_index=cas,
                    )
                    answer = await self.messenger.call(
                        leader.address, CHANGE_CONFIG, single, timeout=max(self.remaining(), 0.1)
                    )
                    committed = answer.committed_config
                else:
                    bulk = bulk_change_request(leader.server_uuid, self.tablet_id, items, cas)
                    response = await self.messenger.call(
                        leader.address, BULK_CHANGE_CONFIG, bulk, timeout=max(self.remaining(), 0.1)
                    )
                    committed = response.committed_config
                return _config(committed), leader.server_uuid
            except NotTheLeader as exc:
                hint, last_error = exc.leader_hint, exc
            except Aborted as exc:
                if not retrying:
                    raise Aborted(
                        f"{exc} (the config changed after the tool read it at op index {cas}; look again and retry)"
                    ) from None
                last_error = exc  # perhaps our own earlier attempt: the next look tells
            except (ServiceUnavailable, NetworkError, TimedOut) as exc:
                last_error = exc
            retrying, leader = True, None
            await self.pause("the config change did not go through", last_error)

    async def step_down(self, leader: ReplicaView, *, abrupt: bool, new_leader: str = "") -> ReplicaView:
        """Ask ``leader`` to step down; return the replica that leads afterwards."""
        request = cpb.LeaderStepDownRequestPB(
            dest_uuid=leader.server_uuid, tablet_id=self.tablet_id, new_leader_uuid=new_leader, abrupt=abrupt
        )
        await self.messenger.call(leader.address, LEADER_STEP_DOWN, request, timeout=max(self.remaining(), 0.1))

        def moved(view: ReplicaView) -> bool:
            return view.server_uuid != leader.server_uuid and (not new_leader or view.server_uuid == new_leader)

        try:
            return await self.leader(new_leader, accept=moved)
        except TimedOut as exc:
            raise TimedOut(
                f"{exc}; {leader.server_uuid} was asked to step down but leadership did not move "
                "(a graceful transfer gives up after one election timeout)"
            ) from None


# --- move-replica ------------------------------------------------------------------------------


class MoveStep(enum.Enum):
    """What a 3-4-3 move does next, given the committed config."""

    WAIT_PENDING = "wait for the pending config change to commit"
    ADD_DESTINATION = "add the destination as a NON_VOTER to be promoted, marking the source for replacement"
    PROMOTE_DESTINATION = "mark the destination NON_VOTER for promotion"
    WAIT_PROMOTION = "wait for the destination to catch up and be promoted to VOTER"
    STEP_DOWN_SOURCE = "step the leading source down"
    REMOVE_SOURCE = "remove the source"
    DONE = "done"


def next_move_step(committed: RaftConfig, pending: RaftConfig | None, leader: str, source: str, dest: str) -> MoveStep:
    """The next step of moving ``source``'s replica to ``dest`` (pure; a re-run resumes here)."""
    if source == dest:
        raise InvalidArgument(f"the source and the destination are the same server ({source})")
    if pending is not None:
        return MoveStep.WAIT_PENDING
    src, dst = committed.member(source), committed.member(dest)
    if dst is None:
        if src is None:
            raise NotFound(f"{source} holds no replica of the tablet (its config is {list(committed.peer_ids)})")
        return MoveStep.ADD_DESTINATION
    if src is None:
        return MoveStep.WAIT_PROMOTION if not dst.is_voter and dst.promote else MoveStep.DONE
    if src.is_voter and not dst.is_voter:
        return MoveStep.WAIT_PROMOTION if dst.promote else MoveStep.PROMOTE_DESTINATION
    return MoveStep.STEP_DOWN_SOURCE if leader == source else MoveStep.REMOVE_SOURCE


def _move_changes(step: MoveStep, committed: RaftConfig, source: str, dest: str) -> list[ConfigChange]:
    src = committed.member(source)
    if step is MoveStep.ADD_DESTINATION:
        assert src is not None
        return start_move_changes(source, dest, source_is_voter=src.is_voter, source_replaced=src.replace)
    if step is MoveStep.PROMOTE_DESTINATION:
        return [ConfigChange(ChangeKind.MODIFY_PEER, dest, promote=True)]
    return [ConfigChange(ChangeKind.REMOVE_PEER, source)]


async def move_replica(
    ops: TabletOps, source: str, dest: str, report: Report, progress: Progress
) -> tuple[RaftConfig, str]:
    """Move the tablet's replica from ``source`` to ``dest``; return the final committed config
    and its leader.  Each step is reported; ``progress(done, total)`` follows the catch-up."""
    await ops.address_of(dest)  # a clear error for an unknown destination, before anything changes
    last: MoveStep | None = None
    while True:
        leader = await ops.leader()
        step = next_move_step(leader.committed, leader.pending, leader.server_uuid, source, dest)
        if step is not last and step is not MoveStep.DONE:
            report(f"tablet {ops.tablet_id}: {step.value}")
        last = step
        if step is MoveStep.DONE:
            return leader.committed, leader.server_uuid
        if step is MoveStep.WAIT_PENDING:
            await ops.pause("the pending config change did not commit")
        elif step is MoveStep.WAIT_PROMOTION:
            peer = leader.peer(dest)
            if peer is not None:
                progress(peer.match_index, leader.state.last_index)
            await ops.pause(f"{dest} was not promoted to VOTER (does it host the tablet, or can it copy it?)")
        elif step is MoveStep.STEP_DOWN_SOURCE:
            try:
                await ops.step_down(leader, abrupt=False)
            except (NotTheLeader, IllegalState, ServiceUnavailable) as exc:
                # Leadership moved on its own, or a transfer is already under way, since the
                # leader was read: decide again from what the tablet says now.
                await ops.pause("the leading source did not step down", exc)
        else:
            changes = _move_changes(step, leader.committed, source, dest)

            def done(config: RaftConfig, this: MoveStep = step) -> bool:
                return next_move_step(config, None, "", source, dest) is not this

            try:
                await ops.change(changes, done=done, leader=leader)
            except IllegalState as exc:
                if "pending" not in str(exc):
                    raise
                # The leader promoted someone meanwhile: look again once that has committed.


# --- moves the master finishes (the rebalancer's) ------------------------------------------------


async def start_move(ops: TabletOps, source: str, dest: str) -> RaftConfig:
    """Start a 3-4-3 move that the leader master finishes; return the committed config holding it.

    One BulkChangeConfig, with compare-and-set on the committed config the leader reports: the
    source is marked ``replace`` and the destination joins as a NON_VOTER with ``promote``.
    From then on the tablet's leader copies and promotes the destination, and the leader master
    evicts the source (asking it to step down first if it leads), so nothing is left for the
    caller but to watch (:func:`move_state`).  IllegalState, with nothing changed, when the
    committed config no longer allows the move (the source left, the destination is already a
    member, or another change is pending).
    """
    await ops.address_of(dest)  # a clear error for an unknown destination, before anything changes
    leader = await ops.leader()
    step = next_move_step(leader.committed, leader.pending, leader.server_uuid, source, dest)
    if step is not MoveStep.ADD_DESTINATION:
        members = [f"{m.peer_id} {m.member_type.name}" for m in leader.committed.members]
        pending = " with a config change pending" if leader.pending is not None else ""
        raise IllegalState(
            f"tablet {ops.tablet_id}: the move from {source} to {dest} cannot start: its config is {members}{pending}"
        )

    def started(config: RaftConfig) -> bool:
        return next_move_step(config, None, "", source, dest) is not MoveStep.ADD_DESTINATION

    config, _ = await ops.change(_move_changes(step, leader.committed, source, dest), done=started, leader=leader)
    return config


class MoveState(enum.Enum):
    """Where a started move stands, from the committed config alone (see :func:`move_state`)."""

    IN_PROGRESS = "the destination is being copied or promoted, or the source is about to leave"
    DONE = "the source has left the config and the destination is a voter"
    DESTINATION_LOST = "the destination left the config before the source did"
    SOURCE_LOST = "the source left the config without the destination becoming a voter"


def move_state(committed: RaftConfig, source: str, dest: str) -> MoveState:
    """How far a started move has come (pure)."""
    src, dst = committed.member(source), committed.member(dest)
    if src is not None:
        return MoveState.IN_PROGRESS if dst is not None else MoveState.DESTINATION_LOST
    if dst is not None and dst.is_voter:
        return MoveState.DONE
    return MoveState.IN_PROGRESS if dst is not None and dst.promote else MoveState.SOURCE_LOST


async def cancel_move(ops: TabletOps, source: str, dest: str) -> bool:
    """Undo a started move that has not passed the point of no return; True when undone.

    While the destination is still a NON_VOTER, one BulkChangeConfig (CAS) removes it and
    clears the source's ``replace``; when the destination is already gone, only ``replace`` is
    cleared, so that the master does not place a replacement of its own.  Once the destination
    is a voter, or the source has left, the move is the master's to finish and nothing is sent.
    A change that loses its CAS (the master moved first) leaves the move to the master too.
    """
    leader = await ops.leader()
    committed = leader.committed
    src, dst = committed.member(source), committed.member(dest)
    if leader.pending is not None or src is None or (dst is not None and dst.is_voter):
        return False
    changes: list[ConfigChange] = []
    if dst is not None:
        changes.append(ConfigChange(ChangeKind.REMOVE_PEER, dest))
    if src.replace:
        changes.append(ConfigChange(ChangeKind.MODIFY_PEER, source, replace=False))
    if not changes:
        return True

    def undone(config: RaftConfig) -> bool:
        member = config.member(source)
        return config.member(dest) is None and member is not None and not member.replace

    try:
        await ops.change(changes, done=undone, leader=leader)
    except (Aborted, IllegalState):
        return False
    return True


# --- remote-replica --------------------------------------------------------------------------


async def list_remote_replicas(messenger: Messenger, address: str, timeout_s: float) -> list[dict[str, Any]]:
    """Every replica on one tablet server with its state and consensus view."""
    tablets, consensus = await asyncio.gather(
        messenger.call(address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=timeout_s),
        messenger.call(address, GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB(), timeout=timeout_s),
    )
    states = {s.tablet_id: s for s in consensus.tablets}
    rows = []
    for t in sorted(tablets.tablets, key=lambda t: (t.table_name, t.tablet_id)):
        cs = states.get(t.tablet_id)
        config = _config(cs.committed_config) if cs is not None else None
        rows.append(
            {
                "tablet_id": t.tablet_id,
                "table": t.table_name,
                "state": tpb.TabletStatePB.Name(t.state),
                "role": role_name(cs.role) if cs is not None else "UNKNOWN_ROLE",
                "term": cs.current_term if cs is not None else None,
                "leader": cs.leader_uuid if cs is not None else "",
                "last_index": cs.last_index if cs is not None else None,
                "commit_index": cs.commit_index if cs is not None else None,
                "applied_index": cs.applied_index if cs is not None else t.applied_index,
                "config": [f"{m.peer_id} {m.member_type.name}" for m in config.members] if config else [],
                "pending_config": cs is not None and cs.HasField("pending_config"),
                "error": t.error,
            }
        )
    return rows


async def unsafe_change_config(
    messenger: Messenger, address: str, tablet_id: str, uuids: Sequence[str], timeout_s: float
) -> tuple[int, int]:
    """Force the replica at ``address`` to a config of ``uuids``; returns the forced entry's (term, index)."""
    request = cpb.UnsafeChangeConfigRequestPB(tablet_id=tablet_id, new_config_uuids=list(uuids))
    response = await messenger.call(address, UNSAFE_CHANGE_CONFIG, request, timeout=timeout_s)
    return response.term, response.index


@dataclasses.dataclass(frozen=True)
class DeletedReplica:
    """What ``remote-replica delete`` did: the server, and whether the replica's own committed
    config listed it (then the tablet may still count it, until it is removed from the config;
    a replica removed from its tablet may also never have learned so)."""

    server_uuid: str
    already_tombstoned: bool
    in_own_config: bool


async def delete_remote_replica(
    messenger: Messenger, address: str, tablet_id: str, reason: str, timeout_s: float
) -> DeletedReplica:
    """Tombstone the replica of ``tablet_id`` on the tablet server at ``address`` (DeleteTablet,
    tombstone=True): its rows and log go, its metadata and consensus metadata stay."""
    if not TABLET_ID_PATTERN.match(tablet_id):
        raise InvalidArgument(f"{tablet_id!r} is not a tablet id")
    status, tablets = await asyncio.gather(
        messenger.call(address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB(), timeout=timeout_s),
        messenger.call(address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=timeout_s),
    )
    uuid = status.instance.permanent_uuid
    listed = next((t for t in tablets.tablets if t.tablet_id == tablet_id), None)
    if listed is None:
        raise NotFound(f"tablet {tablet_id} has no replica on the tablet server at {address} ({uuid})")
    already = listed.state == tpb.TOMBSTONED
    in_own_config = False
    if not already:
        request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[tablet_id])
        states = await messenger.call(address, GET_CONSENSUS_STATE, request, timeout=timeout_s)
        in_own_config = any(p.permanent_uuid == uuid for s in states.tablets for p in s.committed_config.peers)
    delete = tpb.DeleteTabletRequestPB(dest_uuid=uuid, tablet_id=tablet_id, reason=reason, tombstone=True)
    await messenger.call(address, DELETE_TABLET, delete, timeout=timeout_s)
    return DeletedReplica(uuid, already, in_own_config)


# --- the most up-to-date replica -------------------------------------------------------------


def rank_replicas(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replicas ranked most up-to-date first: the higher ``last_term``, then the higher
    ``last_index`` (Raft's vote rule); replicas that did not answer (``last_index`` None) last.

    A server that predates ``last_term`` reports 0 for it; when any answering replica does
    so with a non-empty log, terms cannot be compared and all are ranked by index alone, with
    ``ranked_by`` saying so.  Each row gets ``rank`` (1 = most up to date; equals share it).
    """
    answered = [r for r in rows if r.get("last_index") is not None]
    silent = [r for r in rows if r.get("last_index") is None]
    terms_known = all(r["last_term"] or not r["last_index"] for r in answered)

    def position(row: dict[str, Any]) -> tuple[int, int]:
        return (int(row["last_term"]), int(row["last_index"])) if terms_known else (0, int(row["last_index"]))

    ranked = sorted(answered, key=position, reverse=True)
    out: list[dict[str, Any]] = []
    for i, row in enumerate(ranked):
        rank = out[-1]["rank"] if out and position(ranked[i - 1]) == position(row) else i + 1
        out.append({**row, "rank": rank, "ranked_by": "last_term, last_index" if terms_known else "last_index"})
    out.extend({**row, "rank": None, "ranked_by": ""} for row in silent)
    return out


async def _replica_position(
    messenger: Messenger, uuid: str, address: str, tablet_id: str, timeout_s: float
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "uuid": uuid,
        "address": address,
        "role": None,
        "term": None,
        "last_term": None,
        "last_index": None,
        "commit_index": None,
        "applied_index": None,
        "error": None,
    }
    if not address:
        return {**row, "error": "no address is known for this server"}
    request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[tablet_id])
    try:
        response = await messenger.call(address, GET_CONSENSUS_STATE, request, timeout=timeout_s)
    except NyalaError as exc:
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    if not response.tablets:
        return {**row, "error": "the replica has no consensus state"}
    state = response.tablets[0]
    return {
        **row,
        "role": role_name(state.role),
        "term": state.current_term,
        "last_term": state.last_term,
        "last_index": state.last_index,
        "commit_index": state.commit_index,
        "applied_index": state.applied_index,
    }


async def most_up_to_date(client: AsyncClient, tablet_id: str, timeout_s: float) -> list[dict[str, Any]]:
    """Every replica of the tablet in the masters' view of its config, asked for its log
    position (GetConsensusState) and ranked by :func:`rank_replicas`; a replica that does not
    answer within ``timeout_s`` is listed last with the error."""
    if not TABLET_ID_PATTERN.match(tablet_id):
        raise InvalidArgument(f"{tablet_id!r} is not a tablet id")
    info = await client.tablet_info(tablet_id, timeout_s=timeout_s)
    rows = await asyncio.gather(
        *(_replica_position(client.messenger, r.uuid, r.address, tablet_id, timeout_s) for r in info.replicas)
    )
    return rank_replicas(rows)


# --- copying a replica by hand ------------------------------------------------------------------

#: The caller a tool's StartTabletCopy names (the destination only logs it).
COPY_CALLER = "nyala-cli"


@dataclasses.dataclass(frozen=True)
class CopyPeer:
    """A tablet server taking part in a copy: its uuid, its address, and what its replica of the
    tablet says: its term (None when it has no replica), whether it leads, and the members of
    its committed and pending configs."""

    uuid: str
    address: HostPort
    term: int | None
    leads: bool = False
    leader_uuid: str = ""
    members: frozenset[str] = frozenset()


async def _reach(messenger: Messenger, address: HostPort, role: str, timeout_s: float) -> str:
    """The uuid of the tablet server at ``address``; NetworkError saying which server is unreachable."""
    try:
        status = await messenger.call(
            address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB(), timeout=timeout_s
        )
    except (NetworkError, TimedOut) as exc:
        raise NetworkError(f"cannot reach the {role} tablet server at {address}: {exc}") from None
    return status.instance.permanent_uuid


async def _listed(
    messenger: Messenger, address: HostPort, tablet_id: str, timeout_s: float
) -> tpb.ListTabletsResponsePB.StatusPB | None:
    listing = await messenger.call(address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=timeout_s)
    return next((t for t in listing.tablets if t.tablet_id == tablet_id), None)


async def _peer(messenger: Messenger, uuid: str, address: HostPort, tablet_id: str, timeout_s: float) -> CopyPeer:
    """The server's replica as its GetConsensusState describes it (a tombstone's too)."""
    request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[tablet_id])
    response = await messenger.call(address, GET_CONSENSUS_STATE, request, timeout=timeout_s)
    if not response.tablets:
        return CopyPeer(uuid, address, None)
    state = response.tablets[0]
    members = {p.permanent_uuid for p in state.committed_config.peers}
    if state.HasField("pending_config"):
        members |= {p.permanent_uuid for p in state.pending_config.peers}
    leads = state.role == common_pb2.LEADER and state.leader_uuid == uuid
    return CopyPeer(uuid, address, state.current_term, leads, state.leader_uuid, frozenset(members))


def check_member_copy(
    tablet_id: str, source: CopyPeer, dest_uuid: str, dest_members: frozenset[str], live: bool
) -> None:
    """Refuse a copy that could lose writes a member of the tablet's config acknowledged.

    A member's acknowledgements count toward commit.  A live member goes on acknowledging
    until the destination tombstones it, after the source's snapshot: replacing it can leave
    it without entries the leader counted it for, so it must leave the config first.  A
    member that is a tombstone (or whose server is stopped) acknowledged entries the leader
    holds, but a follower may lack them: its copy must come from the leader.  The source's
    config decides membership when the source leads; otherwise either view of it does.
    """
    member = dest_uuid in source.members or (not source.leads and dest_uuid in dest_members)
    if not member:
        return
    if live:
        raise IllegalState(
            f"the replica of tablet {tablet_id} on {dest_uuid} is a live member of the tablet's Raft config: "
            "replacing its log under it can lose writes it acknowledged. Remove it from the config first "
            "(nyala tablet change-config remove-replica), or tombstone it (nyala remote-replica delete) and copy "
            "it from the leader"
        )
    if not source.leads:
        leader = source.leader_uuid or "unknown to the source"
        raise IllegalState(
            f"{dest_uuid} is a member of the Raft config of tablet {tablet_id}: copy its replica from the tablet's "
            f"leader ({leader}), whose log holds everything the member acknowledged, not from {source.uuid}"
        )


async def check_copy_source(messenger: Messenger, address: HostPort, tablet_id: str, timeout_s: float) -> CopyPeer:
    """The tablet server at ``address`` as a copy source of ``tablet_id``: reachable (else
    NetworkError), hosting the tablet (else NotFound) and its replica RUNNING (else IllegalState)."""
    if not TABLET_ID_PATTERN.match(tablet_id):
        raise InvalidArgument(f"{tablet_id!r} is not a tablet id")
    uuid = await _reach(messenger, address, "source", timeout_s)
    listed = await _listed(messenger, address, tablet_id, timeout_s)
    if listed is None:
        raise NotFound(f"tablet {tablet_id} has no replica on the source tablet server at {address} ({uuid})")
    if listed.state != tpb.RUNNING:
        state = tpb.TabletStatePB.Name(listed.state)
        raise IllegalState(
            f"the replica of tablet {tablet_id} on the source tablet server at {address} ({uuid}) is {state}, "
            "not RUNNING: it cannot be copied from"
        )
    return await _peer(messenger, uuid, address, tablet_id, timeout_s)


@dataclasses.dataclass(frozen=True)
class CopiedReplica:
    """What ``remote-replica copy`` made: the destination's replica, RUNNING."""

    source: CopyPeer
    dest: CopyPeer
    total_bytes: int
    seconds: float
    replaced_live: bool
    applied_index: int
    num_rows: int
    member: bool  # whether the copied config lists the destination


async def copy_remote_replica(
    messenger: Messenger,
    tablet_id: str,
    source_address: HostPort,
    dest_address: HostPort,
    *,
    force: bool,
    timeout_s: float,
    progress: Progress,
) -> CopiedReplica:
    """Copy the replica of ``tablet_id`` on the server at ``source_address`` to the server at
    ``dest_address`` and wait until the destination runs it.

    Everything is checked before the destination is asked: the source (see
    :func:`check_copy_source`), the destination reachable and distinct, and holding no live
    replica of the tablet unless ``force`` (which tombstones and replaces it: Kudu's
    ``--force_copy``).  ``progress(done, total)`` follows the bytes the destination fetches.
    A failed copy raises Aborted with the destination's own error; nothing of it remains there
    but a tombstone when there was one.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s

    def left() -> float:
        return max(0.1, deadline - loop.time())

    source = await check_copy_source(messenger, source_address, tablet_id, left())
    dest_uuid = await _reach(messenger, dest_address, "destination", left())
    if dest_uuid == source.uuid:
        raise InvalidArgument(f"the source and the destination are the same tablet server ({dest_uuid})")
    here = await _listed(messenger, dest_address, tablet_id, left())
    live = here is not None and here.state != tpb.TOMBSTONED
    if here is not None and here.state == tpb.COPYING:
        raise IllegalState(f"a tablet copy of {tablet_id} is already in progress on {dest_address} ({dest_uuid})")
    if live and not force:
        assert here is not None
        raise AlreadyPresent(
            f"the destination tablet server at {dest_address} ({dest_uuid}) already has a live replica of tablet "
            f"{tablet_id} ({tpb.TabletStatePB.Name(here.state)}); --force-copy replaces it (it is tombstoned, "
            "then copied)"
        )
    dest = CopyPeer(dest_uuid, dest_address, None)
    if here is not None:
        dest = await _peer(messenger, dest_uuid, dest_address, tablet_id, left())
    check_member_copy(tablet_id, source, dest_uuid, dest.members, live)
    # The term check guards replicas against a stale leader's request; an operator's copy names
    # its source on purpose (Kudu's tool sends the highest term), so it asks in the newer of the
    # two terms: the installed replica keeps the higher term and its vote in it anyway.
    caller_term = max(source.term or 0, dest.term or 0)
    request = tcpb.StartTabletCopyRequestPB(
        dest_uuid=dest_uuid,
        tablet_id=tablet_id,
        copy_peer_uuid=source.uuid,
        copy_peer_addr=common_pb2.HostPortPB(host=source_address.host, port=source_address.port),
        caller_uuid=COPY_CALLER,
        caller_term=caller_term,
        replace_live_replica=force,
    )
    before = await _copy_status(messenger, dest_address, left())
    fetched_before = _fetched(before)
    started = time.monotonic()
    await messenger.call(dest_address, START_TABLET_COPY, request, timeout=left())
    while True:
        status = await _copy_status(messenger, dest_address, left())
        copy = next((c for c in status.tablet_copies if c.tablet_id == tablet_id), None)
        if copy is None:  # the destination restarted: the copy went with it
            raise Aborted(f"the destination tablet server at {dest_address} no longer knows the copy of {tablet_id}")
        if copy.total_bytes:
            progress(min(copy.total_bytes, _fetched(status) - fetched_before), copy.total_bytes)
        if copy.state == tpb.TabletCopyStatusPB.FAILED:
            raise Aborted(f"the tablet copy of {tablet_id} to {dest_address} ({dest_uuid}) failed there: {copy.error}")
        if copy.state == tpb.TabletCopyStatusPB.COMPLETED:
            replica = await _listed(messenger, dest_address, tablet_id, left())
            if replica is not None and replica.state == tpb.RUNNING:
                state = await messenger.call(
                    dest_address,
                    GET_CONSENSUS_STATE,
                    cpb.GetConsensusStateRequestPB(dest_uuid=dest_uuid, tablet_ids=[tablet_id]),
                    timeout=left(),
                )
                config = state.tablets[0].committed_config if state.tablets else None
                member = config is not None and any(p.permanent_uuid == dest_uuid for p in config.peers)
                return CopiedReplica(
                    source,
                    dest,
                    copy.total_bytes,
                    time.monotonic() - started,
                    live,
                    replica.applied_index,
                    replica.num_rows,
                    member,
                )
            if replica is not None and replica.state == tpb.FAILED:
                raise Aborted(f"the copied replica of {tablet_id} on {dest_address} failed to start: {replica.error}")
        if loop.time() >= deadline:
            raise TimedOut(
                f"the tablet copy of {tablet_id} to {dest_address} did not finish within {timeout_s:g} s; it goes on "
                f"there (nyala remote-replica list {dest_address} shows the replica's state)"
            )
        await asyncio.sleep(min(POLL_S, left()))


async def _copy_status(
    messenger: Messenger, address: HostPort, timeout_s: float
) -> tpb.GetTabletServerStatusResponsePB:
    request = tpb.GetTabletServerStatusRequestPB()
    return await messenger.call(address, GET_TABLET_SERVER_STATUS, request, timeout=timeout_s)


def _fetched(status: tpb.GetTabletServerStatusResponsePB) -> int:
    return status.tablet_copy_bytes_within_location + status.tablet_copy_bytes_across_locations
