"""One simulated replica: a RaftCore driven exactly as the driver contract says.

After every input (a tick, a message, a client call) the node takes the core's Ready if it
has one.  A Ready that must be synced goes to the disk after a simulated fsync latency; only
when the sync completes are its (after-sync) messages sent, its committed entries applied
and the core advanced.  Two drivers exist, as in production:

- *sequential*: no second Ready is taken until this one is done, and every message waits for
  the sync (the simple driver);
- *pipelined*: the leader's early messages (``Ready.messages_before_sync``) leave at once,
  before the leader's own sync, and further Readies are taken while earlier ones are still
  being written; syncs complete in order (one log), each Ready then completes in turn.

A crash loses every Ready not yet synced, or with a torn write keeps the earlier ones and
part of one, which is what a real machine does to writes that were not reported durable.
Only the leader's unsynced entries are then lost that its followers may already hold.

A node passes ``now_tick`` (its process's own tick counter) to ``tick()`` when its heartbeats
are *aligned*, as the production transport does for all the replicas of a process.

A paused node (SIGSTOP) neither ticks nor handles messages or sync completions; they wait
in a backlog that it works through when resumed.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nyala.consensus.core import (
    EntryType,
    LogEntry,
    Message,
    OpId,
    RaftConfig,
    RaftCore,
    Ready,
    Role,
    decode_config,
)
from nyala.testing.sim.disk import SimDisk, Snapshot
from nyala.testing.sim.kv import apply_write

if TYPE_CHECKING:
    from nyala.testing.sim.cluster import Cluster

__all__ = ["PendingOp", "SimNode"]


class PendingOp:
    """A client operation a node has accepted; the node calls back exactly once at most."""

    __slots__ = ("done", "on_result")

    def __init__(self, on_result: Callable[[str, Any], None]) -> None:
        self.on_result = on_result  # ("ok", value) | ("fail", None) | ("unknown", None)
        self.done = False

    def finish(self, outcome: str, value: Any = None) -> None:
        if not self.done:
            self.done = True
            self.on_result(outcome, value)


class SimNode:
    def __init__(
        self,
        cluster: Cluster,
        peer_id: str,
        disk: SimDisk,
        seed: int,
        tick_us: int,
        pipelined: bool = True,
        aligned: bool = False,
    ) -> None:
        self.cluster = cluster
        self.peer_id = peer_id
        self.disk = disk
        self.tick_us = tick_us
        self.pipelined = pipelined
        self.aligned = aligned
        #: Per-node fsync latency range in microseconds (a slow disk); None: the cluster's.
        self.fsync_us: tuple[int, int] | None = None
        self._seed = seed
        self.core: RaftCore | None = None
        self.up = False
        self.paused = False
        self.incarnation = 0
        self.now_tick = 0  # the process's tick counter (passed to tick() when aligned)
        self.kv: dict[str, str] = {}
        self.applied = 0
        self.applied_config: RaftConfig = disk.snapshot.config
        self._writing: deque[Ready] = deque()  # taken, not yet synced and completed, in order
        self._last_sync_due = 0
        self._checked_commit = -1  # the commit index the checks last saw (checked only when leading)
        self._crash_trap: Callable[[int], None] | None = None
        self._backlog: list[tuple[Callable[[Any], None], Any]] = []
        self._pending_writes: dict[int, list[tuple[int, PendingOp]]] = {}
        self._read_waiters: dict[int, PendingOp] = {}
        self._reads_to_serve: list[tuple[int, PendingOp, str]] = []
        self._read_keys: dict[int, str] = {}
        self._next_read_id = 0

    def __repr__(self) -> str:
        core = self.core
        state = "down" if core is None else f"{core.role.value} t{core.term} c{core.commit_index} l{core.last_index}"
        return f"SimNode({self.peer_id}, {state}{', paused' if self.paused else ''})"

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        if self.up:
            return
        self.incarnation += 1
        rng = random.Random(self._seed * 1_000_003 + self.incarnation)
        self.core = RaftCore(
            self.cluster.group_id, self.peer_id, self.disk.persistent_state(), rng, self.cluster.options
        )
        snapshot = self.disk.snapshot
        self.kv = dict(snapshot.kv)
        self.applied = snapshot.index
        self.applied_config = snapshot.config
        self.up = True
        self.paused = False
        self._writing = deque()
        self._backlog = []
        self._checked_commit = -1
        self.now_tick = rng.randint(0, 999)  # a new process: its clock has some other phase
        self.cluster.loop.call_later(rng.randint(0, self.tick_us), self._on_tick, self.incarnation)
        self._pump()

    @property
    def busy(self) -> bool:
        """Whether a Ready is being written."""
        return bool(self._writing)

    @property
    def writing(self) -> tuple[Ready, ...]:
        """The Readies taken but not yet synced, oldest first (what a crash may lose)."""
        return tuple(self._writing)

    def crash(self, torn_rng: random.Random | None = None) -> None:
        """Stop dead.  With ``torn_rng``, part of the unsynced Readies may reach the disk."""
        if not self.up:
            return
        if torn_rng is not None and self._writing:
            writing = list(self._writing)
            whole = torn_rng.randint(0, len(writing) - 1) if len(writing) > 1 else 0
            for rd in writing[:whole]:  # written in order: earlier ones may be complete
                self._persist(rd.entries, rd)
            self._persist_torn(writing[whole], torn_rng)
        self.up = False
        self.paused = False
        self.core = None
        self._writing = deque()
        self._crash_trap = None
        self._backlog = []
        self.incarnation += 1
        self._fail_client_ops("unknown")

    def pause(self) -> None:
        if self.up:
            self.paused = True

    def resume(self) -> None:
        if not self.up or not self.paused:
            return
        self.paused = False
        backlog, self._backlog = self._backlog, []
        for fn, arg in backlog:
            if not self.up or self.paused:
                self._backlog.append((fn, arg))
                continue
            fn(arg)

    # ------------------------------------------------------------------ inputs

    def _on_tick(self, incarnation: int) -> None:
        if incarnation != self.incarnation:
            return
        self.cluster.loop.call_later(self.tick_us, self._on_tick, incarnation)
        if self.paused:
            return
        assert self.core is not None
        self.now_tick += 1
        self.core.tick(self.now_tick if self.aligned else None)
        self._pump()

    def deliver(self, m: Message) -> None:
        if not self.up:
            return
        if self.paused:
            self._backlog.append((self._deliver_now, (self.incarnation, m)))
            return
        assert self.core is not None
        self.core.step(m)
        self._pump()

    def _deliver_now(self, arg: tuple[int, Message]) -> None:
        incarnation, m = arg
        if incarnation == self.incarnation and self.core is not None:
            self.core.step(m)
            self._pump()

    def call(self, fn: Callable[[RaftCore], Any]) -> Any:
        """Run an admin call (change_config, transfer_leadership, ...) on the core, then pump."""
        assert self.core is not None
        try:
            return fn(self.core)
        finally:
            self._pump()

    def propose(self, payload: bytes) -> OpId:
        """Propose ``payload`` here without tracking its outcome."""
        assert self.core is not None
        op_id = self.core.propose(payload)
        self._pump()
        return op_id

    def submit_write(self, payload: bytes, op: PendingOp) -> None:
        """Propose ``payload`` here; raises what ``RaftCore.propose`` raises."""
        assert self.core is not None
        op_id = self.core.propose(payload)
        self._pending_writes.setdefault(op_id.index, []).append((op_id.term, op))
        self._pump()

    def submit_read(self, key: str, op: PendingOp) -> None:
        """Start a read-index read of ``key``; raises what ``RaftCore.read_index`` raises."""
        assert self.core is not None
        self._next_read_id += 1
        self.core.read_index(self._next_read_id)
        self._read_waiters[self._next_read_id] = op
        self._read_keys[self._next_read_id] = key
        self._pump()

    # ------------------------------------------------------------------ Ready processing

    def _pump(self) -> None:
        core = self.core
        loop = self.cluster.loop
        while core is self.core and core is not None and not self.paused and core.has_ready():
            if core.commit_index != self._checked_commit:
                # Ready.hard_state carries the commit only as far as it is durable here, so
                # follow the leader's own commit index.  Only what this replica commits as
                # leader is checked against its configs: a commit index it learnt as a follower
                # was decided by an earlier leader, possibly under a config entry (one server
                # removed) that never reached this replica, and a majority of that config need
                # not be a majority of this one's.
                self._checked_commit = core.commit_index
                if core.is_leader:
                    self.cluster.checker.on_leader_commit(core)
                    self.cluster.check_commit_is_durable(core)
            if self._writing and not self.pipelined:
                return  # the sequential driver: one Ready at a time
            rd = core.ready()
            if rd.soft_state is not None and rd.soft_state.role is Role.LEADER:
                self.cluster.checker.on_leader(self.peer_id, core)
            if self.pipelined:
                send = self.cluster.network.send
                for m in rd.messages_before_sync:
                    send(m)
            if not rd.must_sync and not self._writing:
                self._complete(rd)
                continue
            # Syncs complete in order (one log); a Ready with nothing to sync waits for the earlier ones.
            due = loop.now + self._fsync_delay() if rd.must_sync else loop.now
            due = self._last_sync_due = max(due, self._last_sync_due) if self._writing else due
            self._writing.append(rd)
            loop.call_at(due, self._synced, (self.incarnation, rd))
            if rd.entries and core.is_leader and self._crash_trap is not None:
                trap, self._crash_trap = self._crash_trap, None
                trap(due - loop.now)

    def _fsync_delay(self) -> int:
        if self.fsync_us is None:
            return self.cluster.fsync_delay()
        return self.cluster.fsync_delay(self.fsync_us)

    def arm_crash_before_sync(self, trap: Callable[[int], None] | None) -> None:
        """Call ``trap(microseconds until the sync)`` when this node next queues a leader's
        Ready with entries: its early messages are already out, its own write is not done."""
        self._crash_trap = trap

    def _synced(self, arg: tuple[int, Ready]) -> None:
        incarnation, rd = arg
        if incarnation != self.incarnation:
            return  # the crash came first: this Ready never reached the disk
        if self.paused:
            self._backlog.append((self._synced, arg))
            return
        head = self._writing.popleft()
        assert head is rd, f"{self.peer_id}: syncs completed out of order"
        self._complete(rd)
        self._pump()

    def _complete(self, rd: Ready) -> None:
        assert self.core is not None
        self._persist(rd.entries, rd)
        send = self.cluster.network.send
        for m in rd.messages_after_sync if self.pipelined else rd.messages:
            send(m)
        for entry in rd.committed_entries:
            self._apply(entry)
        for read in rd.read_states:
            op = self._read_waiters.pop(read.request_id, None)
            key = self._read_keys.pop(read.request_id, "")
            if op is not None:
                self._reads_to_serve.append((read.index, op, key))
        for request_id in rd.dropped_reads:
            self._read_keys.pop(request_id, None)
            dropped = self._read_waiters.pop(request_id, None)
            if dropped is not None:
                dropped.finish("fail")
        self._serve_reads()
        for target in rd.tablet_copy_targets:
            self.cluster.request_tablet_copy(self.peer_id, target, self.core.term)
        self.core.advance(rd)

    def _persist(self, entries: tuple[LogEntry, ...], rd: Ready | None) -> None:
        disk = self.disk
        checker = self.cluster.checker
        if entries:
            first = entries[0].index
            assert first <= disk.last_index + 1, f"{self.peer_id}: Ready skips from {disk.last_index} to {first}"
            if first <= disk.last_index:
                checker.on_truncate(self.peer_id, disk.truncate_after(first - 1))
            for entry in entries:
                checker.on_append(self.peer_id, entry, disk.append(entry))
        if rd is not None:
            if rd.hard_state is not None:
                disk.hard_state = rd.hard_state
            if rd.committed_config is not None:
                disk.committed_config = rd.committed_config

    def _persist_torn(self, rd: Ready, rng: random.Random) -> None:
        """A crash mid-write: keep a prefix of the entries, or only the hard state."""
        if rd.entries and rng.random() < 0.5:
            self._persist(rd.entries[: rng.randint(0, len(rd.entries))], None)
        elif rd.hard_state is not None and rng.random() < 0.5:
            self.disk.hard_state = rd.hard_state

    def _apply(self, entry: LogEntry) -> None:
        self.cluster.checker.on_apply(self.peer_id, entry)
        if entry.type is EntryType.WRITE:
            apply_write(self.kv, entry.payload)
        elif entry.type is EntryType.CHANGE_CONFIG:
            self.applied_config = decode_config(entry.payload)
        self.applied = entry.index
        waiting = self._pending_writes.pop(entry.index, None)
        if waiting:
            for term, op in waiting:
                # Another term at this index means the proposal was overwritten: it can never commit.
                if term == entry.term:
                    op.finish("ok", OpId(entry.term, entry.index))
                else:
                    op.finish("fail")

    def _serve_reads(self) -> None:
        if not self._reads_to_serve:
            return
        still_waiting = []
        for index, op, key in self._reads_to_serve:
            if index <= self.applied:
                op.finish("ok", self.kv.get(key))
            else:
                still_waiting.append((index, op, key))
        self._reads_to_serve = still_waiting

    def _fail_client_ops(self, outcome: str) -> None:
        for waiting in self._pending_writes.values():
            for _, op in waiting:
                op.finish(outcome)
        for op in self._read_waiters.values():
            op.finish(outcome)
        for _, op, _ in self._reads_to_serve:
            op.finish(outcome)
        self._pending_writes = {}
        self._read_waiters = {}
        self._read_keys = {}
        self._reads_to_serve = []

    # ------------------------------------------------------------------ compaction and copies

    def take_snapshot_and_compact(self, retention: int) -> None:
        """Snapshot the state machine durably, then compact the log up to ``retention`` entries before it."""
        core = self.core
        if core is None or self.busy or self.applied <= self.disk.snapshot.index:
            return
        term = core.term_at(self.applied)
        assert term is not None
        self.disk.snapshot = Snapshot(self.applied, term, dict(self.kv), self.applied_config)
        index = max(self.applied - retention, core.first_index - 1)
        core.compact(index)
        self.disk.compact(index)

    def install_tablet_copy(self, snapshot: Snapshot, base_chain: int) -> None:
        """Replace this replica with a copy of another's snapshot (restarting it if it ran)."""
        was_up = self.up
        self.crash()
        self.disk.install_copy(snapshot, base_chain)
        if was_up:
            self.start()

    def holds(self, index: int, term: int) -> bool:
        """Whether this replica's log (or compacted prefix) holds entry ``index``@``term``."""
        if self.core is not None:
            return self.core.term_at(index) == term or index <= self.core.commit_index
        if index <= self.disk.snapshot.index:
            return True
        entry = self.disk.entry(index)
        return entry is not None and entry.term == term
