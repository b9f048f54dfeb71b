"""Plain values shared by every part of the core: op ids, log entries, hard state, roles."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "ENTRY_OVERHEAD_BYTES",
    "EntryType",
    "HardState",
    "LeaderState",
    "LogEntry",
    "OpId",
    "Role",
]

# What an entry costs beyond its payload when batches are sized (term, index, type and framing);
# it keeps a flood of empty NO_OPs from counting as free.
ENTRY_OVERHEAD_BYTES = 24


class EntryType(enum.IntEnum):
    """What a log entry carries.  The numbers are Kudu's ``OperationType`` values."""

    NO_OP = 1  # appended by every new leader; empty payload
    WRITE = 3  # an operation for the state machine (tablet writes, catalog mutations); opaque bytes
    CHANGE_CONFIG = 5  # a new Raft config, encoded as RaftConfigPB (see config.py)


@dataclass(frozen=True, slots=True, order=True)
class OpId:
    """The position of an entry: its term, then its index (ordered by term first, as Raft compares logs)."""

    term: int
    index: int


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry of the replicated log, in the shape the WAL stores it."""

    term: int
    index: int
    type: EntryType
    payload: bytes

    @property
    def size_bytes(self) -> int:
        """The bytes this entry counts for in batch and memory limits."""
        return len(self.payload) + ENTRY_OVERHEAD_BYTES


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before any message that depends on it is sent.

    ``vote`` is the peer voted for in ``term`` (empty string: no vote).  ``commit`` is only a
    hint that speeds up restart; losing it is safe.  It never exceeds the entries that were
    durable when it was handed out, so it stays safe when written before (or without) the
    entries of the same Ready.
    """

    term: int = 0
    vote: str = ""
    commit: int = 0


class Role(enum.Enum):
    """A replica's role, as Kudu names them (consensus/metadata.proto)."""

    LEADER = "LEADER"
    CANDIDATE = "CANDIDATE"  # also while running a pre-election
    FOLLOWER = "FOLLOWER"  # a VOTER that is neither leader nor candidate
    LEARNER = "LEARNER"  # a NON_VOTER of the active config
    NON_PARTICIPANT = "NON_PARTICIPANT"  # not in the active config at all


class LeaderState(enum.Enum):
    """Kudu's leader states: a new leader is CONFIGURING until its NO_OP commits, then RUNNING."""

    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
