"""Changing the set of masters online: AddMaster, RemoveMaster, and keeping every master's
view of the membership current (Kudu's ``kudu master add/remove``, KUDU-2181).

**The address book.**  The sys catalog's Raft config names masters by uuid.  Where each one
listens is kept in the catalog too, as ``MASTER_ENTRY`` entries (uuid -> address, ``removed``
once it left); every master applies them, so it knows a new master's address before the
leader replicates to it.  A leader fills in missing entries for the members it knows from
``masters.json`` (clusters created before the entries existed).

**Members.**  Whenever the committed config changes (or an entry arrives), every master sets
its peer map to the config's members (:meth:`MasterPeers.set_members`, which rewrites
``masters.json``) and teaches the Raft transport their addresses.  ``ConnectToMaster`` and
heartbeat answers carry those addresses, so clients and tablet servers follow.

**AddMaster** (leader only, one change at a time under the catalog write lock): ask the new
address for its uuid (it must be a running master of no other cluster), write its address
book entry, then replicate ADD_PEER NON_VOTER with ``promote`` (CAS on the committed config's
index when the caller gives one).  The Raft leader promotes it to VOTER once it has caught up.
A master already in the config is answered ``already_present``, changing nothing.

**RemoveMaster** (leader only): the master, named by address or uuid, must be in the config
(or have been removed before: ``already_removed``).  Refused when it is the last voter, or when
the voters left would not hold a live majority: the leader counts itself and the followers that
answer it *after* the request arrived (its heartbeats go out every heartbeat period), waiting
up to two election timeouts for them, so one slow answer on a loaded machine does not make a
follower dead.  An answer from before the request proves nothing: a master killed a moment
earlier would still count, the REMOVE_PEER entry would then take effect on the leader with a
config whose majority is dead, never commit, and leave the leader and the removed master
campaigning in two different configs until the dead one came back.

Removing the leader itself (checked as above first) makes it hand leadership
to a caught-up voter and answer NotTheLeader naming it; the caller retries there, and the new
leader removes the old one.  After REMOVE_PEER commits the address book entry is marked
removed.
"""

from __future__ import annotations

import asyncio
import logging

from nyala.catalog import master_mutation
from nyala.common.hostport import HostPort
from nyala.consensus.core import ChangeKind, ConfigChange, MemberType
from nyala.consensus.runtime import PeerDirectory
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
from nyala.master.catalog_manager import CatalogManager
from nyala.master.peers import MasterPeers
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.services import GET_MASTER_REGISTRATION

__all__ = ["MasterMembership"]

log = logging.getLogger("nyala.master")

_ASK_TIMEOUT_S = 5.0


def _address_of(pb: object) -> HostPort:
    host, port = getattr(pb, "host", ""), getattr(pb, "port", 0)
    if not host:
        raise InvalidArgument("a master address needs a host")
    if not 0 < port < 65536:
        raise InvalidArgument(f"a master address needs a port from 1 to 65535, got {port}")
    return HostPort(host, port)


class MasterMembership:
    """The address book, the members, and the AddMaster / RemoveMaster operations."""

    def __init__(
        self,
        uuid: str,
        catalog_manager: CatalogManager,
        peers: MasterPeers,
        directory: PeerDirectory,
        messenger: Messenger,
        *,
        liveness_window_s: float,
        poll_interval_s: float,
    ) -> None:
        """``liveness_window_s``: how long RemoveMaster waits for the voters that would remain
        to answer (two election timeouts); ``poll_interval_s``: how often it looks (a Raft tick)."""
        self.uuid = uuid
        self.cm = catalog_manager
        self.peers = peers
        self.directory = directory
        self.messenger = messenger
        self.liveness_window_s = liveness_window_s
        self.poll_interval_s = poll_interval_s
        #: uuid -> address of every master ever added (from the catalog and masters.json).
        self.book: dict[str, HostPort] = {}
        #: Masters removed from the config (their address book entry says so).
        self.removed: set[str] = set()
        self._saving: asyncio.Task[None] | None = None
        self._backfill: asyncio.Task[None] | None = None
        self._dirty = False

    # -- the address book and the members --------------------------------------------------

    def learn(self, entries: dict[str, mpb.SysMasterEntryPB]) -> None:
        """Address book entries applied from the catalog (on the event loop)."""
        for uuid, entry in entries.items():
            address = HostPort(entry.address.host, entry.address.port)
            self.book[uuid] = address
            if entry.removed:
                self.removed.add(uuid)
            else:
                self.removed.discard(uuid)
            if uuid != self.uuid:
                self.directory.learn(uuid, address)
        self.sync()

    def sync(self) -> None:
        """Make the peer map the committed config's members (call when either may have changed)."""
        replica = self.cm.replica
        if replica is None:
            return
        for uuid, known in self.peers.by_uuid.items():
            self.book.setdefault(uuid, known)
        members: dict[str, HostPort] = {}
        for peer_id in replica.committed_config.peer_ids:
            address = self.book.get(peer_id)
            if address is None:
                log.debug("master %s is in the sys catalog's config but its address is not known yet", peer_id)
                return  # its entry is applied right after: sync again then
            members[peer_id] = address
        if members == self.peers.by_uuid:
            return
        for uuid, address in members.items():
            if uuid != self.uuid:
                self.directory.learn(uuid, address)
        log.info("masters are now %s", {u[:8]: str(a) for u, a in sorted(members.items())})
        self._dirty = True
        self.peers.set_members(members)
        if self._saving is None or self._saving.done():
            self._saving = asyncio.get_running_loop().create_task(self._save(), name="save-masters")

    async def _save(self) -> None:
        while self._dirty:
            self._dirty = False
            try:
                await asyncio.to_thread(self.peers.save)
            except OSError as e:
                log.error("could not save masters.json: %s", e)

    def member_type(self, uuid: str) -> int:
        """VOTER or NON_VOTER (consensus MemberType) in the committed config; VOTER when unknown."""
        replica = self.cm.replica
        member = None if replica is None else replica.committed_config.member(uuid)
        return int(MemberType.NON_VOTER) if member is not None and not member.is_voter else int(MemberType.VOTER)

    def start_backfill(self) -> None:
        """Run :meth:`backfill` in the background (the new leader's view is ready)."""
        if self._backfill is None or self._backfill.done():
            self._backfill = asyncio.get_running_loop().create_task(self.backfill(), name="masters-backfill")

    async def backfill(self) -> None:
        """As the new leader: write address book entries for members that have none."""
        cm = self.cm

        async def body() -> None:
            view = cm.leader()
            replica = cm.replica
            assert replica is not None
            missing = [
                master_mutation(uuid, self.book[uuid].host, self.book[uuid].port)
                for uuid in replica.committed_config.peer_ids
                if uuid not in view.catalog.masters and uuid in self.book
            ]
            if missing:
                await cm.replicate(view, mpb.CatalogWritePB(mutations=missing))

        try:
            await cm.exclusive(body)
        except NyalaError as e:
            log.info("could not write the masters' address book entries as new leader: %s", e)

    # -- AddMaster -------------------------------------------------------------------------------

    async def add_master(self, request: mpb.AddMasterRequestPB) -> mpb.AddMasterResponsePB:
        address = _address_of(request.address)
        cas = request.cas_config_opid_index if request.HasField("cas_config_opid_index") else None
        self.cm.leader()
        uuid = await self._uuid_of_new_master(address)
        return await self.cm.exclusive(lambda: self._add_locked(uuid, address, cas))

    async def _uuid_of_new_master(self, address: HostPort) -> str:
        try:
            answer = await self.messenger.call(
                address, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB(), timeout=_ASK_TIMEOUT_S
            )
        except (NetworkError, TimedOut) as e:
            raise ServiceUnavailable(
                f"no master answers at {address} ({e}); start the new master first, with --master-addresses "
                "naming the existing masters and itself"
            ) from e
        except NyalaError as e:
            raise InvalidArgument(f"{address} is not a Nyala master: {type(e).__name__}: {e}") from e
        uuid = answer.instance.permanent_uuid
        if not uuid:
            raise InvalidArgument(f"{address} answered GetMasterRegistration without a uuid")
        own = self.cm.cluster_id
        if answer.cluster_id and own and answer.cluster_id != own:
            raise InvalidArgument(f"the master at {address} belongs to another cluster ({answer.cluster_id})")
        return uuid

    async def _add_locked(self, uuid: str, address: HostPort, cas: int | None) -> mpb.AddMasterResponsePB:
        cm = self.cm
        view = cm.leader()
        replica = cm.replica
        assert replica is not None
        config = replica.committed_config
        if config.contains(uuid):
            if self.book.get(uuid) != address:
                raise AlreadyPresent(f"master {uuid} is a member already, at {self.book.get(uuid)}, not {address}")
            return mpb.AddMasterResponsePB(uuid=uuid, already_present=True, config_opid_index=config.opid_index)
        for member in config.peer_ids:
            if self.book.get(member) == address:
                raise AlreadyPresent(f"{address} is the address of master {member} already, not of {uuid}")
        if cas is not None and cas != config.opid_index:
            raise Aborted(f"CAS_FAILED: the masters' committed config has op index {config.opid_index}, not {cas}")
        if replica.active_config != config:
            raise ServiceUnavailable("another change of the masters is still in progress; retry when it is done")
        entry = view.catalog.masters.get(uuid)
        if entry is None or entry.removed or HostPort(entry.address.host, entry.address.port) != address:
            await cm.replicate(view, mpb.CatalogWritePB(mutations=[master_mutation(uuid, address.host, address.port)]))
        new = await replica.change_config(
            [ConfigChange(ChangeKind.ADD_PEER, uuid, MemberType.NON_VOTER, promote=True)], config.opid_index
        )
        log.info("master %s at %s added as a NON_VOTER (config index %d)", uuid, address, new.opid_index)
        self.sync()
        return mpb.AddMasterResponsePB(uuid=uuid, config_opid_index=new.opid_index)

    # -- RemoveMaster ---------------------------------------------------------------------------

    async def remove_master(self, request: mpb.RemoveMasterRequestPB) -> mpb.RemoveMasterResponsePB:
        if not request.uuid and not request.HasField("address"):
            raise InvalidArgument("RemoveMaster needs the master's uuid or address")
        address = _address_of(request.address) if request.HasField("address") else None
        cas = request.cas_config_opid_index if request.HasField("cas_config_opid_index") else None
        self.cm.leader()
        return await self.cm.exclusive(lambda: self._remove_locked(request.uuid, address, cas))

    def _resolve(self, uuid: str, address: HostPort | None, members: tuple[str, ...]) -> str:
        candidates = [
            u for u in members if (not uuid or u == uuid) and (address is None or self.book.get(u) == address)
        ]
        if candidates:
            return candidates[0]
        gone = [u for u in self.removed if (not uuid or u == uuid) and (address is None or self.book.get(u) == address)]
        if gone:
            return gone[0]
        named = " at ".join(x for x in (uuid, str(address) if address else "") if x)
        known = ", ".join(f"{u} at {self.book.get(u)}" for u in members)
        raise NotFound(f"{named} is not a master of this cluster; its masters are {known}")

    async def _remove_locked(self, uuid: str, address: HostPort | None, cas: int | None) -> mpb.RemoveMasterResponsePB:
        cm = self.cm
        view = cm.leader()
        replica = cm.replica
        assert replica is not None
        config = replica.committed_config
        target = self._resolve(uuid, address, config.peer_ids)
        if not config.contains(target):
            return mpb.RemoveMasterResponsePB(uuid=target, already_removed=True, config_opid_index=config.opid_index)
        if cas is not None and cas != config.opid_index:
            raise Aborted(f"CAS_FAILED: the masters' committed config has op index {config.opid_index}, not {cas}")
        if replica.active_config != config:
            raise ServiceUnavailable("another change of the masters is still in progress; retry when it is done")
        member = config.member(target)
        assert member is not None
        if target == self.uuid and replica.transfer_target:
            raise self._handing_over(replica.transfer_target)  # checked before the transfer began
        if member.is_voter:
            remaining = [v for v in config.voters if v != target]
            if not remaining:
                raise IllegalState(f"master {target} is the last master of this cluster: it cannot be removed")
            needed = len(remaining) // 2 + 1
            live = await self._answering_voters(remaining, needed)
            if len(live) < needed:
                raise IllegalState(
                    f"removing master {target} would leave {len(remaining)} masters of which only {len(live)} "
                    f"are live, fewer than the majority of {needed} the catalog needs; bring the others back first"
                )
        if target == self.uuid:
            # The leader cannot remove itself: it hands leadership to a caught-up voter, which
            # removes it when the caller retries there.
            raise self._handing_over(replica.transfer_leadership())
        new = await replica.change_config([ConfigChange(ChangeKind.REMOVE_PEER, target)], config.opid_index)
        where = self.book.get(target)
        if where is not None:
            try:
                mutation = master_mutation(target, where.host, where.port, removed=True)
                await cm.replicate(view, mpb.CatalogWritePB(mutations=[mutation]))
            except NyalaError as e:  # the config change stands; only the book entry lags
                log.warning("master %s removed, but its address book entry was not marked: %s", target, e)
        log.info("master %s removed (config index %d)", target, new.opid_index)
        self.sync()
        return mpb.RemoveMasterResponsePB(uuid=target, config_opid_index=new.opid_index)

    def _handing_over(self, target: str) -> NotTheLeader:
        address = self.book.get(target)
        log.info("handing leadership to master %s before removing this master", target)
        return NotTheLeader(
            f"this master is handing leadership to {target} before it is removed; retry there",
            "" if address is None else str(address),
        )

    async def _answering_voters(self, voters: list[str], needed: int) -> list[str]:
        """The ``voters`` that answer this leader after now (itself included), once ``needed``
        of them have or ``liveness_window_s`` has passed."""
        replica = self.cm.replica
        assert replica is not None
        term = replica.term
        before = {p.peer_id: p.answers for p in replica.peer_progress()}
        deadline = asyncio.get_running_loop().time() + self.liveness_window_s
        while True:
            progress = replica.peer_progress()
            if replica.term != term or (not progress and any(v != self.uuid for v in voters)):
                # The Raft core stopped leading (a transfer just completed, or it lost its
                # majority) before this master noticed, or leads a new term whose answer
                # counts start again from zero: the caller retries at the leader.
                raise ServiceUnavailable("this master's leadership is changing; retry")
            fresh = {p.peer_id for p in progress if p.answers > before.get(p.peer_id, 0)}
            answering = [v for v in voters if v == self.uuid or v in fresh]
            if len(answering) >= needed or asyncio.get_running_loop().time() >= deadline:
                return answering
            await asyncio.sleep(self.poll_interval_s)
