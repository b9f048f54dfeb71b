"""Leadership of the sys catalog, leader readiness, and the one path by which the catalog changes.

Readiness (Kudu's ``leader_ready_term``): when the sys catalog replica becomes LEADER in term
T, :meth:`CatalogManager._become_leader` waits for a read-index barrier (which only a RUNNING
leader, whose NO_OP of term T committed, can pass, and which returns once everything
committed before is applied), loads the whole catalog from the store into a fresh
:class:`~nyala.master.leader.LeaderView`, writes a cluster id if there is none, and only then
sets the ready term.  Catalog requests check :meth:`leader` first: NotTheLeader with the
leader's RPC address on a follower, ServiceUnavailable on a leader that is not ready yet.

Writes (seed 002's strict ordering): a caller runs its write in :meth:`exclusive`, holding
:attr:`write_lock` (one catalog write at a time, which is the table and tablet locking of
Kudu made coarse), validates against the committed view, builds one ``CatalogWritePB``, and
calls :meth:`replicate`, which replicates it through Raft and, once applied, commits it to
the view; only then does the caller send RPCs to tablet servers (through the tablet tasks).
The locked body runs in its own shielded task, so a caller cancelled at its deadline never
releases the lock early nor leaves a replicated write uncommitted in memory.  If a
write fails in a way that leaves its outcome unknown, the view is rebuilt from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid as uuid_module
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nyala.catalog import cluster_id_mutation
from nyala.consensus.core import Role
from nyala.consensus.runtime import RaftReplica
from nyala.errors import NotTheLeader, NyalaError, ServiceUnavailable, TimedOut
from nyala.master.leader import LeaderView
from nyala.master.options import MasterOptions
from nyala.master.peers import MasterPeers
from nyala.master.sys_catalog import SysCatalogStore
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb

__all__ = ["CatalogManager"]

log = logging.getLogger("nyala.master")

T = TypeVar("T")

_ROLE_PB: dict[Role, common_pb2.RaftRolePB] = {
    Role.LEADER: common_pb2.LEADER,
    Role.FOLLOWER: common_pb2.FOLLOWER,
    Role.CANDIDATE: common_pb2.CANDIDATE,
    Role.LEARNER: common_pb2.LEARNER,
    Role.NON_PARTICIPANT: common_pb2.NON_PARTICIPANT,
}


class CatalogManager:
    """Owns the sys catalog replica's leadership and the leader's in-memory view."""

    def __init__(self, options: MasterOptions, peers: MasterPeers) -> None:
        self.options = options
        self.peers = peers
        self.replica: RaftReplica | None = None
        self.store: SysCatalogStore | None = None
        self.write_lock = asyncio.Lock()
        self._view: LeaderView | None = None
        self._ready_term: int | None = None
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._monitor: asyncio.Task[None] | None = None
        self._becoming: asyncio.Task[None] | None = None
        self._writers: set[asyncio.Task[Any]] = set()
        #: Called with the new view once this master is leader-ready, and with None when it stops leading.
        self.on_leadership: Callable[[LeaderView | None], None] | None = None
        #: Called whenever the sys catalog replica's role, term or configs changed.
        self.on_replica_change: Callable[[], None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, replica: RaftReplica, store: SysCatalogStore) -> None:
        self.replica, self.store = replica, store
        replica.on_change = lambda _replica: self._replica_changed()
        self._monitor = asyncio.get_running_loop().create_task(self._watch_leadership(), name="catalog-leadership")
        self._wake.set()

    def _replica_changed(self) -> None:
        self._wake.set()
        if self.on_replica_change is not None:
            self.on_replica_change()

    async def stop(self) -> None:
        tasks = [t for t in (self._monitor, self._becoming, *self._writers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lose_leadership()
        if self.replica is not None:
            await self.replica.close()
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    # -- roles -------------------------------------------------------------------------------

    @property
    def role(self) -> common_pb2.RaftRolePB:
        """This master's Raft role as RaftRolePB (UNKNOWN_ROLE before the catalog is open)."""
        return common_pb2.UNKNOWN_ROLE if self.replica is None else _ROLE_PB[self.replica.role]

    @property
    def term(self) -> int:
        return 0 if self.replica is None else self.replica.term

    @property
    def leader_ready(self) -> bool:
        return self._view is not None and self.replica is not None and self._ready_term == self.replica.term

    @property
    def cluster_id(self) -> str:
        return "" if self.store is None else self.store.cluster_id

    def leader_address(self) -> str:
        """The RPC address of the leader master as this master knows it, or ""."""
        if self.replica is None or not self.replica.leader_id:
            return ""
        address = self.peers.address_of(self.replica.leader_id)
        return "" if address is None else str(address)

    def leader(self) -> LeaderView:
        """The view to serve a catalog request from; raises unless this master is the ready leader."""
        replica = self.replica
        if replica is None:
            raise ServiceUnavailable("the sys catalog is not open yet: this master is still starting")
        if replica.role is not Role.LEADER:
            hint = self.leader_address()
            where = f"the leader is {hint}" if hint else "no leader is known yet"
            raise NotTheLeader(f"this master is not the leader; {where}", hint)
        view = self._view
        if view is None or self._ready_term != replica.term:
            raise ServiceUnavailable("this master was just elected leader and is not ready yet; retry soon")
        return view

    # -- change notifications -----------------------------------------------------------------

    def changed(self) -> None:
        """Wake everyone waiting for catalog or report changes (wait=true requests)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, done: Callable[[LeaderView], bool], timeout_s: float | None, what: str) -> None:
        """Wait until ``done(view)`` holds on the ready leader; TimedOut names ``what``."""
        deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
        while True:
            event = self._changed
            if done(self.leader()):
                return
            remaining = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if remaining is not None and remaining <= 0:
                raise TimedOut(f"timed out waiting for {what}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    # -- the write path -------------------------------------------------------------------------

    async def exclusive(self, body: Callable[[], Awaitable[T]]) -> T:
        """Run ``body`` holding :attr:`write_lock`, to completion even if the caller is cancelled.

        A caller cancelled at its deadline must not release the lock while its write is still
        replicating (the next writer would validate against a view without it), nor leave a
        replicated write uncommitted in memory; so the body runs in its own task.
        """

        async def locked() -> T:
            async with self.write_lock:
                return await body()

        task = asyncio.get_running_loop().create_task(locked())
        self._writers.add(task)
        task.add_done_callback(self._writer_done)
        return await asyncio.shield(task)

    def _writer_done(self, task: asyncio.Task[Any]) -> None:
        self._writers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("catalog write failed: %s", task.exception())

    async def replicate(self, view: LeaderView, write: mpb.CatalogWritePB) -> None:
        """Replicate one catalog write and commit it to ``view``; only inside :meth:`exclusive`."""
        assert self.write_lock.locked(), "catalog writes must hold the write lock"
        await self._replicate_and_commit(view, write)

    async def _replicate_and_commit(self, view: LeaderView, write: mpb.CatalogWritePB) -> None:
        replica = self.replica
        assert replica is not None
        try:
            await replica.replicate(write.SerializeToString(deterministic=True))
        except NyalaError as e:
            if self._view is view:
                log.warning("catalog write failed (%s); reloading the catalog to learn its outcome", e)
                self._ready_term = None
                self._wake.set()
            if isinstance(e, NotTheLeader):
                raise NotTheLeader(str(e), self.leader_address()) from e
            raise
        if self._view is view:
            view.commit(write)
            self.changed()

    # -- leadership ---------------------------------------------------------------------------

    async def _watch_leadership(self) -> None:
        replica = self.replica
        assert replica is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if replica.role is Role.LEADER:
                term = replica.term
                if self._view is not None and self._view.term != term:
                    self._lose_leadership()
                if self._ready_term != term and (self._becoming is None or self._becoming.done()):
                    self._becoming = asyncio.get_running_loop().create_task(self._become_leader(term))
            elif self._view is not None:
                self._lose_leadership()
            self.changed()

    def _lose_leadership(self) -> None:
        if self._view is None:
            return
        log.info("master is no longer the leader of term %d", self._view.term)
        self._view = None
        self._ready_term = None
        if self.on_leadership is not None:
            self.on_leadership(None)
        self.changed()

    async def _become_leader(self, term: int) -> None:
        replica = self.replica
        assert replica is not None
        try:
            await self._try_become_leader(replica, term)
        except asyncio.CancelledError:
            raise
        except Exception:  # e.g. a catalog that does not load: this master must not lead
            log.critical("could not become the ready leader of term %d; stepping down", term, exc_info=True)
            with contextlib.suppress(NyalaError):
                replica.step_down()
            return
        if self._ready_term != term and replica.role is Role.LEADER and replica.term == term:
            # Still leading but not ready (a write failed): try again shortly.
            await asyncio.sleep(self.options.server.raft.raft_tick_interval_ms / 1000)
            self._wake.set()

    async def _try_become_leader(self, replica: RaftReplica, term: int) -> None:
        store = self.store
        assert store is not None
        if not await self._catch_up(replica, term):
            return
        async with self.write_lock:
            if replica.role is not Role.LEADER or replica.term != term:
                return
            catalog = await asyncio.to_thread(store.load)
            view = LeaderView.build(term, catalog, self.options.placement)
            if self._view is not None and self.on_leadership is not None:
                self.on_leadership(None)
            self._view = view
            if not catalog.cluster_id:
                write = mpb.CatalogWritePB(
                    mutations=[cluster_id_mutation(uuid_module.uuid4().hex, time.time_ns() // 1000)]
                )
                try:
                    await self.replicate(view, write)
                except NyalaError as e:
                    log.warning("could not write the cluster id as new leader: %s", e)
                    return
            if replica.role is not Role.LEADER or replica.term != term or self._view is not view:
                return
            self._ready_term = term
        log.info(
            "master is the ready leader of term %d: %d tables, %d tablets",
            term,
            sum(1 for _ in catalog.all_tables()),
            sum(1 for _ in catalog.all_tablets()),
        )
        if self.on_leadership is not None:
            self.on_leadership(view)
        self.changed()

    async def _catch_up(self, replica: RaftReplica, term: int) -> bool:
        """Wait until everything committed before this term is applied (a read-index barrier)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.master_failover_catchup_timeout_ms / 1000
        pause = self.options.server.raft.raft_tick_interval_ms / 1000
        while replica.role is Role.LEADER and replica.term == term:
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.error("new leader master could not catch up within the failover timeout; stepping down")
                with contextlib.suppress(NyalaError):
                    replica.step_down()
                return False
            try:
                await asyncio.wait_for(replica.read_index(), remaining)
                return True
            except (NyalaError, TimeoutError):
                await asyncio.sleep(pause)  # CONFIGURING until the NO_OP commits
        return False
