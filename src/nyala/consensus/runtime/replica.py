"""One Raft replica driven by asyncio: the core, its WAL, its metadata and its state machine.

Inputs (a message from the transport, a tick, a proposal) are stepped into the pure core at
once and wake the replica.  Three tasks then carry out the driver contract of
:mod:`nyala.consensus.core` as a pipeline, so that the disk, the network and the state
machine work at the same time:

1. drive: take each Ready; send its before-sync messages at once (the leader's AppendEntries
   and heartbeats: the leader appends in parallel with replication); start persisting it:
   WAL truncation and append (queued in order, one group commit) and, when term, vote or the
   committed config changed, an atomic rewrite of the consensus metadata (chained, so the
   rewrites land in order too).  The next Ready may be taken before this one is durable.
2. complete: as each Ready becomes durable, in the order they were taken, send its
   after-sync messages (votes, acknowledgements), hand its committed entries to the apply
   stage, serve its confirmed reads and ``advance`` the core.
3. apply: apply committed WRITE entries to the state machine on the apply executor (the
   tablet store blocks), coalescing everything committed meanwhile into one call, complete
   the proposals they answer, compact the in-memory log and garbage-collect the WAL.  A
   follower lingers briefly first (``follower_apply_linger_ms``) so that one transaction
   takes many entries: nobody waits on a follower's apply but its own readers.

While the disk is busy, new proposals keep arriving and land in the next Ready, so entries
proposed during one fsync share the next one.

A proposal (a write, or an operator's config change) waits for its own entry to come back
committed with the term it was proposed in; the same index with another term means a new
leader replaced it, and the caller gets Aborted.  A config change is answered when its
committed entry reaches the apply stage, in log order, with the config it carries (nothing
is applied to the state machine for it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nyala.common.config import setting
from nyala.consensus.core import (
    AppendRequest,
    ConfigChange,
    EntryType,
    HardState,
    Heartbeat,
    LogEntry,
    Message,
    OpId,
    PeerProgress,
    PersistentState,
    RaftConfig,
    RaftCore,
    RaftOptions,
    Ready,
    Role,
    decode_config,
)
from nyala.consensus.runtime.cmeta import ConsensusMetadata
from nyala.consensus.runtime.transport import RaftTransport
from nyala.errors import (
    Aborted,
    AlreadyPresent,
    IllegalState,
    NotFound,
    NotTheLeader,
    NyalaError,
    ServiceUnavailable,
    TimedOut,
)
from nyala.wal import AnchorKind, Log, LogAnchorRegistry, WalOptions
from nyala.wal import LogEntry as WalEntry

__all__ = ["RaftReplica", "ReplicaOptions", "StateMachine"]

log = logging.getLogger("nyala.consensus")

WAL_DIR = "wal"


class StateMachine(Protocol):
    """What a replica applies committed entries to: a tablet's store, or the master's catalog."""

    def applied_index(self) -> int:
        """The last index durably applied (entries after it are handed out again at restart)."""
        ...

    def apply(self, entries: Sequence[LogEntry]) -> Sequence[Any]:
        """Apply committed WRITE entries in order, durably; one result per entry.

        Runs on the apply executor and may block.  A result answers the proposal of that entry
        (row errors, for a tablet).  Raising means the replica can no longer apply and fails.
        """
        ...


@dataclass(frozen=True)
class ReplicaOptions:
    """How a replica uses memory and disk, besides the Raft timing in ``raft``."""

    raft: RaftOptions = field(default_factory=RaftOptions)
    wal: WalOptions = field(default_factory=WalOptions)
    log_cache_entries: int = setting(
        20_000,
        "Entries kept in memory behind the applied index for lagging followers; a follower further "
        "behind needs a tablet copy.",
        "advanced",
    )
    max_unsynced_readies: int = setting(
        8, "Readies a replica may have in flight to its disk at once (the persist pipeline's depth).", "advanced"
    )
    follower_apply_linger_ms: int = setting(
        50,
        "How long a follower lets committed entries accumulate before applying them together; the "
        "leader applies at once, since clients wait for its results.",
        "advanced",
    )
    wal_gc_interval_s: float = setting(
        10.0, "How often a replica deletes WAL segments that nothing needs any more.", "advanced"
    )


class RaftReplica:
    """A live member of one Raft group.  Create with :meth:`create` or :meth:`open`."""

    def __init__(
        self,
        directory: Path,
        core: RaftCore,
        wal: Log,
        anchors: LogAnchorRegistry,
        committed_config: RaftConfig,
        state_machine: StateMachine,
        transport: RaftTransport,
        executor: Executor | None,
        options: ReplicaOptions,
    ) -> None:
        self.directory = directory
        self._core = core
        self._wal = wal
        self._anchors = anchors
        self._applied_anchor = anchors.register(max(1, state_machine.applied_index()), "applied entries")
        self._cmeta = ConsensusMetadata(core.hard_state, committed_config)
        self._sm = state_machine
        self._transport = transport
        self._executor = executor
        self._options = options
        self._metrics = transport.metrics
        #: Loop time at which this leader proposed each entry still uncommitted (commit latency).
        self._proposed_at: dict[int, float] = {}
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        # Readies taken but not yet durable, in order, with what their persistence waits on.
        self._unsynced: deque[tuple[Ready, asyncio.Future[Any] | None]] = deque()
        self._synced_wake = asyncio.Event()
        self._cmeta_chain: asyncio.Future[Any] | None = None
        # Committed entries waiting for the state machine, in order.
        self._to_apply: list[LogEntry] = []
        self._apply_wake = asyncio.Event()
        self._retention_anchor = anchors.register(
            max(1, state_machine.applied_index()), "lagging peers", AnchorKind.RETENTION
        )
        self._next_gc = 0.0
        self._pending: dict[int, tuple[int, asyncio.Future[Any]]] = {}
        self._reads: dict[int, asyncio.Future[int]] = {}
        self._read_ids = itertools.count(1)
        self._applied = core.applied_index
        self._apply_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._failed: NyalaError | None = None
        self._closed = False
        self.role = core.role
        self.leader_id = core.leader_id
        self.term = core.term
        self.active_config = committed_config
        #: Called after the role, leader, term or config changed (tablet reports use it).
        self.on_change: Callable[[RaftReplica], None] | None = None
        #: Called on a follower with the leader's commit index each time a message of the current
        #: leader arrives (it had committed that much when it sent it): follower reads use it.
        self.on_leader_contact: Callable[[int], None] | None = None
        #: Called, while leading, with each peer that needs a tablet copy: one whose next entries
        #: this leader has compacted away (the core repeats it every few election timeouts).
        self.on_copy_needed: Callable[[RaftReplica, str], None] | None = None
        self._tasks = [
            self._loop.create_task(self._guard(self._drive), name=f"raft-drive-{core.group_id}"),
            self._loop.create_task(self._guard(self._complete), name=f"raft-complete-{core.group_id}"),
            self._loop.create_task(self._guard(self._apply_loop), name=f"raft-apply-{core.group_id}"),
        ]

    # -- lifecycle --------------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        directory: Path,
        group_id: str,
        peer_id: str,
        config: RaftConfig,
        state_machine: StateMachine,
        transport: RaftTransport,
        *,
        executor: Executor | None = None,
        options: ReplicaOptions | None = None,
        rng: random.Random | None = None,
    ) -> RaftReplica:
        """Create a brand-new replica of a new group with its initial config, then open it."""
        await asyncio.to_thread(_create_metadata, directory, group_id, config)
        return await cls.open(
            directory, group_id, peer_id, state_machine, transport, executor=executor, options=options, rng=rng
        )

    @classmethod
    async def open(
        cls,
        directory: Path,
        group_id: str,
        peer_id: str,
        state_machine: StateMachine,
        transport: RaftTransport,
        *,
        executor: Executor | None = None,
        options: ReplicaOptions | None = None,
        rng: random.Random | None = None,
    ) -> RaftReplica:
        """Reopen a replica from its metadata and WAL (bootstrap): replay past the applied index, rejoin."""
        options = options or ReplicaOptions()
        cmeta = ConsensusMetadata.load(directory)
        anchors = LogAnchorRegistry()
        wal = await asyncio.to_thread(
            Log.open, directory / WAL_DIR, group_id, options.wal, anchors, transport.metrics.wal
        )
        try:
            state = _persistent_state(cmeta, wal, state_machine.applied_index(), options.log_cache_entries)
            core = RaftCore(group_id, peer_id, state, rng or random.Random(), options.raft)
        except BaseException:
            wal.close()
            raise
        replica = cls(
            directory, core, wal, anchors, cmeta.committed_config, state_machine, transport, executor, options
        )
        transport.register(replica)
        replica._kick()
        return replica

    async def close(self) -> None:
        """Stop the replica: no more messages, proposals fail, the WAL is closed."""
        if self._closed:
            return
        self._closed = True
        self._transport.unregister(self.group_id)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._cmeta_chain is not None:
            await asyncio.gather(self._cmeta_chain, return_exceptions=True)
        self._fail_all(ServiceUnavailable(f"replica of {self.group_id} is shutting down"))
        await self._save_commit_hint()
        await asyncio.to_thread(self._wal.close)

    async def _save_commit_hint(self) -> None:
        """Record how far the log is known committed, so a restart applies that far at once.

        The metadata is otherwise rewritten only when the term, the vote or the config
        changes, so its commit index lags far behind; a replica restarted alone then applied
        nothing past its store's durable index until it heard from a leader.  A replica that
        failed writes nothing: its state is what the failure left.
        """
        if self._failed is not None:
            return
        hard = self._core.hard_state
        if hard.commit <= self._cmeta.hard_state.commit:
            return
        self._cmeta = ConsensusMetadata(hard, self._cmeta.committed_config)
        try:
            await asyncio.to_thread(self._cmeta.save, self.directory)
        except (OSError, NyalaError) as exc:  # only a hint: the log is the truth
            log.warning("%s: could not save the commit index at close: %s", self.group_id, exc)

    @property
    def group_id(self) -> str:
        return self._core.group_id

    @property
    def peer_id(self) -> str:
        return self._core.peer_id

    @property
    def applied_index(self) -> int:
        return self._applied

    @property
    def commit_index(self) -> int:
        return self._core.commit_index

    @property
    def last_index(self) -> int:
        return self._core.last_index

    @property
    def last_term(self) -> int:
        """The term of the last entry in the log (what a vote request compares)."""
        return self._core.last_term

    @property
    def committed_config(self) -> RaftConfig:
        return self._cmeta.committed_config

    @property
    def wal(self) -> Log:
        """The replica's WAL (a tablet copy source lists its segments)."""
        return self._wal

    @property
    def log_anchors(self) -> LogAnchorRegistry:
        """The anchors on the replica's WAL (a tablet copy session holds one)."""
        return self._anchors

    @property
    def first_log_index(self) -> int:
        """The first entry still in memory: a peer that needs an earlier one needs a tablet copy."""
        return self._core.first_index

    @property
    def failed(self) -> NyalaError | None:
        """Why the replica stopped working, or None while it works."""
        return self._failed

    # -- inputs (transport, clients) -------------------------------------------------------

    def receive(self, message: Message) -> None:
        if self._closed or self._failed:
            return
        self._core.step(message)
        if self.on_leader_contact is not None and isinstance(message, (AppendRequest, Heartbeat)):
            self._note_leader_contact(message)
        self._kick()

    def _note_leader_contact(self, message: AppendRequest | Heartbeat) -> None:
        core = self._core
        # Only a message the core took as coming from its current leader says what that leader
        # had committed; a stale leader's message (lower term) was refused.
        if core.is_leader or core.term != message.term or core.leader_id != message.sender:
            return
        commit = message.commit_index if isinstance(message, AppendRequest) else message.leader_commit
        # A new leader's commit index covers everything committed before it only once an entry of
        # its own term committed (its NO_OP); until then it may lag what its predecessor committed.
        if commit > 0 and core.term_at(commit) == message.term and self.on_leader_contact is not None:
            self.on_leader_contact(commit)

    def tick(self, now_tick: int | None = None) -> None:
        """One tick; ``now_tick`` is the process-wide tick number that aligns heartbeat phases."""
        if self._closed or self._failed:
            return
        self._core.tick(now_tick)
        if self._core.take_health_changed() and self.on_change is not None:
            self.on_change(self)  # the master hears of a failed member now, not a heartbeat later
        self._kick()

    async def replicate(self, payload: bytes) -> Any:
        """Replicate ``payload`` as a WRITE entry; return the state machine's result once applied.

        Raises NotTheLeader (with a hint) or ServiceUnavailable at once when this replica cannot
        take writes now, and Aborted when a new leader replaced the entry before it committed
        (it was then never applied: retrying is safe).
        """
        self._check_usable()
        op = self._core.propose(payload)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[op.index] = (op.term, future)
        self._proposed_at[op.index] = self._loop.time()
        self._kick()
        try:
            return await future
        finally:
            self._pending.pop(op.index, None)

    async def read_index(self) -> int:
        """A linearizable read barrier: the index to wait for (already applied on return)."""
        self._check_usable()
        request_id = next(self._read_ids)
        future: asyncio.Future[int] = self._loop.create_future()
        self._reads[request_id] = future
        try:
            self._core.read_index(request_id)
            self._kick()
            index = await future
        finally:
            self._reads.pop(request_id, None)
        await self.wait_applied(index)
        return index

    async def wait_applied(self, index: int) -> None:
        """Wait until the state machine has applied ``index`` (use with a timeout)."""
        if self._applied >= index:
            return
        self._check_usable()
        future: asyncio.Future[None] = self._loop.create_future()
        self._apply_waiters.append((index, future))
        await future

    def step_down(self) -> None:
        """Abrupt step-down of the leader: stop leading now, let the others elect."""
        self._check_usable()
        self._core.step_down()
        self._kick()

    def transfer_leadership(self, target: str = "") -> str:
        """Graceful step-down to ``target`` (or the most caught-up voter); returns the chosen peer."""
        self._check_usable()
        chosen = self._core.transfer_leadership(target)
        self._kick()
        return chosen

    # -- membership (operator calls) --------------------------------------------------------

    async def change_config(
        self, changes: Sequence[ConfigChange], cas_config_opid_index: int | None = None
    ) -> RaftConfig:
        """Replicate a config change (one entry, however many changes); return the new config
        once its entry is committed.

        The core decides and refuses at once, changing nothing: NotTheLeader (with a hint),
        ServiceUnavailable (a CONFIGURING or transferring leader), IllegalState (a change is
        still pending), Aborted (CAS_FAILED), InvalidArgument / NotFound / AlreadyPresent (a
        bad change).  Removing or demoting this leader itself is refused with NotTheLeader
        naming the voter it is now handing leadership to.  Aborted after the proposal means a
        new leader replaced the entry: the change did not happen and may be retried.
        """
        self._check_usable()
        try:
            op = self._core.change_config(changes, cas_config_opid_index)
        finally:
            self._kick()  # a refused removal of the leader itself has started a transfer
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[op.index] = (op.term, future)
        try:
            config: RaftConfig = await future
        finally:
            self._pending.pop(op.index, None)
        return config

    def campaign(self) -> bool:
        """Start an election now, even while a leader is alive (Kudu's RunLeaderElection).

        False when this replica already leads (nothing to do).  IllegalState when it is not a
        voter of its active config.  The election skips the pre-vote: voters grant it even
        while they hear from the current leader, which then steps down if this one wins.
        """
        self._check_usable()
        if self._core.is_leader:
            return False
        self._core.campaign(ignore_live_leader=True)
        self._kick()
        return True

    def unsafe_change_config(self, peer_ids: Sequence[str]) -> OpId:
        """Force this replica's config to ``peer_ids`` (majority-loss recovery; may lose data).

        The members must all be in the committed config, this replica among its voters.  The
        forced config is appended at a new term and the replica campaigns at once; the call
        returns the op id of that entry without waiting for it to commit.
        """
        self._check_usable()
        committed = self._core.committed_config
        strangers = [p for p in peer_ids if not committed.contains(p)]
        if strangers:
            raise NotFound(
                f"{strangers} not in the committed config {list(committed.peer_ids)} of {self.group_id}: "
                "an unsafe config change may only keep members of the committed config"
            )
        op = self._core.unsafe_change_config(peer_ids)
        self._kick()
        return op

    def note_contact(self, peer_id: str) -> None:
        """``peer_id``'s server answered, though not for this group (see ``RaftCore.note_contact``)."""
        if not self._closed and self._failed is None:
            self._core.note_contact(peer_id)

    def peer_progress(self) -> tuple[PeerProgress, ...]:
        """The leader's view of every other member's log; empty unless leading."""
        return self._core.peer_progress()

    @property
    def busy(self) -> bool:
        """Whether the pipeline has work under way: an input not yet driven, a Ready not yet
        durable, committed entries not yet applied.  A test that ticks a virtual clock waits
        for this to clear between ticks, so that the clock never outruns the disk."""
        if self._closed or self._failed is not None:
            return False
        return bool(
            self._wake.is_set()
            or self._unsynced
            or self._to_apply
            or self._apply_wake.is_set()
            or self._applied < self._core.commit_index
        )

    @property
    def transfer_target(self) -> str:
        """The voter a graceful step-down is handing leadership to, or empty."""
        return self._core.transfer_target

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self._closed:
            raise ServiceUnavailable(f"replica of {self.group_id} is shut down")

    def _kick(self) -> None:
        self._wake.set()

    # -- the pipeline ----------------------------------------------------------------------------

    async def _guard(self, stage: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run one stage; any failure stops the whole replica, loudly.

        The stage's coroutine is made here, not by the caller, so a replica closed before its
        tasks first run leaves no never-awaited coroutine behind.
        """
        try:
            await stage()
        except asyncio.CancelledError:
            raise
        except NyalaError as exc:
            self._fail(exc)
        except Exception as exc:  # AssertionError from the core included
            log.critical("Raft replica of %s failed", self.group_id, exc_info=exc)
            self._fail(IllegalState(f"replica of {self.group_id} failed: {type(exc).__name__}: {exc}"))

    async def _drive(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while (
                self._failed is None
                and len(self._unsynced) < self._options.max_unsynced_readies
                and self._core.has_ready()
            ):
                ready = self._core.ready()
                self._transport.send(ready.messages_before_sync)
                self._unsynced.append((ready, self._start_persist(ready)))
                self._synced_wake.set()

    def _start_persist(self, ready: Ready) -> asyncio.Future[Any] | None:
        """Queue this Ready's writes behind every earlier one's; None when it writes nothing."""
        waits: list[asyncio.Future[Any]] = []
        if ready.entries:
            first = ready.entries[0].index
            if first < self._wal.next_index:  # the new entries replace persisted or queued ones
                waits.append(self._wal.truncate_after_async(first - 1))
            batch = [WalEntry(e.term, e.index, int(e.type), e.payload) for e in ready.entries]
            # Resolved in bulk per group commit: one loop wake-up per fsync, not one per append.
            waits.append(self._wal.append_async(batch))
        hard = ready.hard_state
        old = self._cmeta
        term_or_vote = hard is not None and (hard.term, hard.vote) != (old.hard_state.term, old.hard_state.vote)
        if term_or_vote or ready.committed_config is not None:
            self._cmeta = ConsensusMetadata(hard or old.hard_state, ready.committed_config or old.committed_config)
            self._cmeta_chain = self._loop.create_task(self._save_cmeta(self._cmeta_chain, self._cmeta))
            waits.append(self._cmeta_chain)
        if not waits:
            return None
        return waits[0] if len(waits) == 1 else asyncio.gather(*waits)

    async def _save_cmeta(self, previous: asyncio.Future[Any] | None, cmeta: ConsensusMetadata) -> None:
        if previous is not None:
            await previous  # metadata rewrites land in the order the Readies were taken
        await self._loop.run_in_executor(None, cmeta.save, self.directory)

    async def _complete(self) -> None:
        while True:
            if not self._unsynced:
                self._synced_wake.clear()
                await self._synced_wake.wait()
                continue
            ready, persisted = self._unsynced[0]
            if persisted is not None:
                await persisted  # a failed write stops the replica (contract rule 8)
            self._unsynced.popleft()
            self._transport.send(ready.messages_after_sync)
            self._note_changes(ready)
            if ready.committed_entries:
                if self._proposed_at:
                    self._note_committed(ready.committed_entries)
                self._to_apply.extend(ready.committed_entries)
                self._apply_wake.set()
            self._core.advance(ready)
            self._kick()  # the leader's own entries now count: commit may move

    def _note_committed(self, entries: Sequence[LogEntry]) -> None:
        now = self._loop.time()
        latency = self._metrics.commit_latency
        for entry in entries:
            proposed = self._proposed_at.pop(entry.index, None)
            if proposed is not None:
                latency.observe(now - proposed)

    def _note_changes(self, ready: Ready) -> None:
        if ready.soft_state is not None:
            old = (self.role, self.leader_id, self.term)
            self.role, self.leader_id, self.term = (
                ready.soft_state.role,
                ready.soft_state.leader_id,
                ready.soft_state.term,
            )
            self._metrics.note_soft_state(old, (self.role, self.leader_id, self.term))
            if self.role is not Role.LEADER:
                self._drop_reads()
                self._proposed_at.clear()  # entries of a lost term commit (or not) under another leader
        if ready.active_config is not None:
            self.active_config = ready.active_config
        for read in ready.read_states:
            future = self._reads.get(read.request_id)
            if future is not None and not future.done():
                future.set_result(read.index)
        for request_id in ready.dropped_reads:
            future = self._reads.get(request_id)
            if future is not None and not future.done():
                future.set_exception(NotTheLeader("leadership changed during a read", self.leader_id))
        if ready.tablet_copy_targets:
            if self.on_copy_needed is None:
                log.warning("%s: peers %s need a tablet copy", self.group_id, ready.tablet_copy_targets)
            else:
                for peer_id in ready.tablet_copy_targets:
                    self.on_copy_needed(self, peer_id)
        if (ready.soft_state or ready.active_config or ready.committed_config) and self.on_change is not None:
            self.on_change(self)

    async def _apply_loop(self) -> None:
        linger_s = self._options.follower_apply_linger_ms / 1000
        while True:
            await self._apply_wake.wait()
            self._apply_wake.clear()
            if linger_s and self.role is not Role.LEADER:
                # A follower's apply is off the write path: waiting a moment lets one state-machine
                # transaction take many entries (a DuckDB transaction costs milliseconds of CPU
                # whatever its size), at the price of follower reads lagging by about this much.
                await asyncio.sleep(linger_s)
            while self._to_apply:
                committed, self._to_apply = self._to_apply, []
                await self._apply(committed)
            self._maybe_compact()
            await self._maybe_gc()

    async def _apply(self, committed: list[LogEntry]) -> None:
        writes = [e for e in committed if e.type is EntryType.WRITE]
        results: Sequence[Any] = ()
        if writes:
            results = await self._loop.run_in_executor(self._executor, self._sm.apply, writes)
            if len(results) != len(writes):
                raise AssertionError(f"state machine returned {len(results)} results for {len(writes)} entries")
        by_index = {e.index: r for e, r in zip(writes, results, strict=True)}
        for entry in committed:
            pending = self._pending.get(entry.index)
            if pending is None or pending[1].done():
                continue
            term, future = pending
            if term == entry.term and entry.index in by_index:
                future.set_result(by_index[entry.index])
            elif term == entry.term and entry.type is EntryType.CHANGE_CONFIG:
                # The proposed config entry itself committed (same index and term): the change
                # took effect.  Its config is durable already: the Ready that committed it
                # wrote the consensus metadata before its entries reached this stage.
                future.set_result(decode_config(entry.payload))
            else:
                future.set_exception(Aborted(f"entry {entry.index} was replaced by a new leader; it was not applied"))
        self._applied = committed[-1].index
        self._anchors.update(self._applied_anchor, max(1, self._sm.applied_index()))
        self._wake_apply_waiters()

    async def _maybe_gc(self) -> None:
        """Every few seconds, drop WAL segments that nothing needs any more."""
        now = self._loop.time()
        if now < self._next_gc:
            return
        self._next_gc = now + self._options.wal_gc_interval_s
        durable = max(1, self._sm.applied_index())
        if self.role is Role.LEADER:
            # Keep what lagging peers still need, within the WAL's max_segments_to_retain.
            matched = [p.match for p in self._core.peer_progress() if p.peer_id != self.peer_id]
            retain = min([durable, *(m + 1 for m in matched)])
        else:
            retain = durable
        self._anchors.update(self._retention_anchor, max(1, retain))
        deleted = await self._loop.run_in_executor(None, self._wal.gc)
        if deleted:
            log.debug("%s: WAL GC deleted %d segment(s)", self.group_id, len(deleted))

    def _wake_apply_waiters(self) -> None:
        still = []
        for index, future in self._apply_waiters:
            if future.done():
                continue
            if index <= self._applied:
                future.set_result(None)
            else:
                still.append((index, future))
        self._apply_waiters = still

    def _maybe_compact(self) -> None:
        keep = self._options.log_cache_entries
        durable = self._sm.applied_index()
        target = min(durable, self._applied) - keep
        # Compact in chunks of a quarter of the cache, not on every apply.
        if target > self._core.first_index + keep // 4:
            self._core.compact(target)

    def _drop_reads(self) -> None:
        for future in self._reads.values():
            if not future.done():
                future.set_exception(NotTheLeader("this replica is no longer the leader", self.leader_id))

    def _fail(self, error: NyalaError) -> None:
        self._failed = error
        log.error("Raft replica of %s stopped: %s", self.group_id, error)
        self._fail_all(error)

    def _fail_all(self, error: NyalaError) -> None:
        # A proposal may have reached the followers already and may still commit there, so its
        # outcome is unknown (contract rule 8): report it as such, never as failed.
        unknown = TimedOut(f"outcome unknown: the replica of {self.group_id} stopped ({error})")
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(unknown)
        for read in self._reads.values():
            if not read.done():
                read.set_exception(error)
        for _, waiter in self._apply_waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._apply_waiters = []


def _create_metadata(directory: Path, group_id: str, config: RaftConfig) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    try:
        ConsensusMetadata.load(directory)
    except NotFound:
        ConsensusMetadata(HardState(), config).save(directory)
    else:
        raise AlreadyPresent(f"a Raft replica of {group_id} already exists in {directory}")


def _persistent_state(cmeta: ConsensusMetadata, wal: Log, applied: int, cache_entries: int) -> PersistentState:
    """What the core restarts from: the metadata, and the WAL from a little before the applied index."""
    if wal.last_index == 0:
        return PersistentState(cmeta.hard_state, cmeta.committed_config, OpId(0, 0), (), 0)
    applied = min(applied, wal.last_index)
    if applied == 0:
        base = OpId(0, 0)
        if wal.first_index > 1:
            raise IllegalState(f"WAL starts at {wal.first_index} but nothing was applied: entries are missing")
    else:
        base_index = max(wal.first_index, applied - cache_entries)
        base = OpId(wal.term_at(base_index), base_index)
    entries = tuple(LogEntry(e.term, e.index, EntryType(e.type), e.payload) for e in wal.entries(base.index + 1))
    return PersistentState(cmeta.hard_state, cmeta.committed_config, base, entries, applied)
