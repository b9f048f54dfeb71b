"""The unit the log stores: one operation of the consensus layer."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_ENTRY_TYPE", "LogEntry"]

# ``type`` is stored in 16 bits; the consensus layer owns the meaning of each value.
MAX_ENTRY_TYPE = 0xFFFF


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One log entry: Raft term and index, an opaque small ``type`` and the payload bytes.

    Nothing is checked here, to keep construction cheap on the hot path; :meth:`Log.append`
    validates every field (non-negative term, index >= 1, type in 0..65535, bytes payload).
    """

    term: int
    index: int
    type: int
    payload: bytes
