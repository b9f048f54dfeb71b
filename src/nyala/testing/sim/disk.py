"""A replica's durable state in the simulator: what survives a crash.

It mirrors what the production driver keeps: the consensus metadata (hard state and
committed config), the log (a compacted base plus entries), and a snapshot of the state
machine with the index it has applied (DuckDB's applied index in a real tablet).  A Ready
reaches the disk only when its simulated fsync completes; a crash before that loses it.

Each entry also carries a chain hash: the hash of the previous chain hash and the entry.
Two logs with equal chain hashes at an index are equal up to it, which turns Raft's
log-matching property into one dictionary lookup per appended entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nyala.consensus.core import HardState, LogEntry, OpId, PersistentState, RaftConfig

__all__ = ["SimDisk", "Snapshot", "chain_hash"]


def chain_hash(previous: int, entry: LogEntry) -> int:
    return hash((previous, entry.term, entry.index, entry.type, entry.payload))


@dataclass(slots=True)
class Snapshot:
    """The state machine as durably applied up to ``index``."""

    index: int
    term: int
    kv: dict[str, str]
    config: RaftConfig


@dataclass(slots=True)
class SimDisk:
    hard_state: HardState
    committed_config: RaftConfig
    snapshot: Snapshot
    base: OpId = field(default_factory=lambda: OpId(0, 0))
    base_chain: int = 0
    entries: list[LogEntry] = field(default_factory=list)
    chains: list[int] = field(default_factory=list)

    @classmethod
    def fresh(cls, config: RaftConfig) -> SimDisk:
        return cls(HardState(), config, Snapshot(0, 0, {}, config))

    @property
    def last_index(self) -> int:
        return self.base.index + len(self.entries)

    def entry(self, index: int) -> LogEntry | None:
        offset = index - self.base.index - 1
        return self.entries[offset] if 0 <= offset < len(self.entries) else None

    def holds(self, index: int, term: int) -> bool:
        """Whether entry ``index``@``term`` is durable here (a compacted or copied prefix counts:
        only committed entries are ever compacted)."""
        if index <= self.base.index:
            return True
        entry = self.entry(index)
        return entry is not None and entry.term == term

    def chain_at(self, index: int) -> int | None:
        if index == self.base.index:
            return self.base_chain
        offset = index - self.base.index - 1
        return self.chains[offset] if 0 <= offset < len(self.chains) else None

    def persistent_state(self) -> PersistentState:
        return PersistentState(
            hard_state=self.hard_state,
            committed_config=self.committed_config,
            log_base=self.base,
            entries=tuple(self.entries),
            applied_index=self.snapshot.index,
        )

    def truncate_after(self, index: int) -> list[LogEntry]:
        """Drop entries after ``index``; returns them."""
        keep = index - self.base.index
        dropped = self.entries[keep:]
        del self.entries[keep:]
        del self.chains[keep:]
        return dropped

    def append(self, entry: LogEntry) -> int:
        previous = self.chains[-1] if self.chains else self.base_chain
        chain = chain_hash(previous, entry)
        self.entries.append(entry)
        self.chains.append(chain)
        return chain

    def compact(self, index: int) -> None:
        if index <= self.base.index:
            return
        drop = index - self.base.index
        last = self.entries[drop - 1]
        self.base_chain = self.chains[drop - 1]
        self.base = OpId(last.term, last.index)
        del self.entries[:drop]
        del self.chains[:drop]

    def install_copy(self, snapshot: Snapshot, base_chain: int) -> None:
        """Replace the log and state machine with a tablet copy; term and vote are kept."""
        self.snapshot = Snapshot(snapshot.index, snapshot.term, dict(snapshot.kv), snapshot.config)
        self.base = OpId(snapshot.term, snapshot.index)
        self.base_chain = base_chain
        self.entries = []
        self.chains = []
        self.committed_config = snapshot.config
        hs = self.hard_state
        self.hard_state = HardState(
            max(hs.term, snapshot.term), hs.vote if hs.term >= snapshot.term else "", snapshot.index
        )
