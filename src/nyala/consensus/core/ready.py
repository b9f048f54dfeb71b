"""What the core hands to its driver (:class:`Ready`) and what the driver hands back at restart
(:class:`PersistentState`).  The driver's duties for each field are listed in the package
docstring; each field's comment says what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from nyala.consensus.core.config import RaftConfig
from nyala.consensus.core.messages import Message
from nyala.consensus.core.types import HardState, LeaderState, LogEntry, OpId, Role

__all__ = ["PersistentState", "ReadState", "Ready", "SoftState"]


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile facts a driver routes by; never persisted."""

    role: Role
    leader_id: str  # empty when no leader is known
    term: int
    leader_state: LeaderState | None  # set only while this replica leads


@dataclass(frozen=True, slots=True)
class ReadState:
    """A confirmed read-index request: serve it once the state machine has applied ``index``."""

    request_id: int
    index: int


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work for the driver.  Empty fields mean nothing to do."""

    # Persist when not None: atomically with ``entries``, before or after them (its commit index
    # never covers entries that were not durable before this Ready).
    hard_state: HardState | None
    # Append to the log; an entry replaces any persisted entry with the same or a higher index.
    entries: tuple[LogEntry, ...]
    # Every message, those that may leave before the sync first (see the two properties below).
    # A driver that sends all of them once this Ready is durable is correct, only slower.
    messages: tuple[Message, ...]
    # How many of ``messages`` (a prefix) may be sent before this Ready is durable.
    before_sync_count: int
    # Apply to the state machine, in order; all are committed and were in earlier or this Ready's entries.
    committed_entries: tuple[LogEntry, ...]
    # A newly committed config: write it to the consensus metadata (it outlives log GC).
    committed_config: RaftConfig | None
    # The config now in effect (it changes when a CHANGE_CONFIG entry is appended or truncated).
    active_config: RaftConfig | None
    # Role, leader or term changed.
    soft_state: SoftState | None
    # Read-index requests now confirmed.
    read_states: tuple[ReadState, ...]
    # Read-index requests dropped because this replica stopped leading; the client must retry.
    dropped_reads: tuple[int, ...]
    # Peers that need entries this leader has compacted: start a tablet copy to each.
    tablet_copy_targets: tuple[str, ...]
    # Whether entries, term or vote changed: they must be synced before ``messages_after_sync``
    # go out.  (A changed commit index alone needs no sync.)
    must_sync: bool

    @property
    def messages_before_sync(self) -> tuple[Message, ...]:
        """Send at once, even before this Ready is durable: the leader's AppendEntries and
        heartbeats of a term that is already durable (the leader appends in parallel with
        replication; its own unsynced entries do not count toward commit)."""
        return self.messages[: self.before_sync_count]

    @property
    def messages_after_sync(self) -> tuple[Message, ...]:
        """Send only once this Ready's entries and hard state, and those of every earlier
        Ready, are durable: votes, vote requests, acknowledgements and everything else."""
        return self.messages[self.before_sync_count :]


@dataclass(frozen=True, slots=True)
class PersistentState:
    """Everything a replica reloads at restart (or receives from a tablet copy).

    ``log_base`` is the last entry dropped by compaction (or (0, 0)); ``entries`` follow it.
    ``applied_index`` is what the state machine has durably applied; entries after it are
    handed out again as committed entries.
    """

    hard_state: HardState
    committed_config: RaftConfig
    log_base: OpId
    entries: tuple[LogEntry, ...]
    applied_index: int

    @classmethod
    def bootstrap(cls, config: RaftConfig) -> PersistentState:
        """The state of a brand-new replica of a new tablet with initial ``config``."""
        return cls(HardState(), config, OpId(0, 0), (), 0)
