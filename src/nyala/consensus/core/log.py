"""The core's in-memory copy of the replicated log.

The core owns its log (rather than reading the driver's storage through a protocol, as etcd
does) so that every decision is a plain list lookup and the simulator needs no storage fake.
Memory stays bounded because the driver compacts the applied prefix: entries up to a
``base`` (index, term) are dropped and only their last op id is kept, the way Raft keeps a
snapshot's last included entry.  A leader whose follower needs an entry at or below the base
cannot send it and asks the driver for a tablet copy instead.

Entries are contiguous: entry ``i`` sits at position ``i - base_index - 1``.  A parallel list
of cumulative byte sizes turns "how many entries fit in one batch" and "how far behind in
bytes is this peer" into binary searches.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from nyala.consensus.core.types import LogEntry, OpId

__all__ = ["RaftLog"]


def _entry_term(entry: LogEntry) -> int:
    return entry.term


class RaftLog:
    """Entries after a compacted base, with byte accounting."""

    __slots__ = ("_base_index", "_base_term", "_cum_bytes", "_cum_start", "_entries")

    def __init__(self, base: OpId, entries: Sequence[LogEntry] = ()) -> None:
        if base.index < 0 or base.term < 0:
            raise AssertionError(f"log base {base} is negative")
        self._base_index = base.index
        self._base_term = base.term
        self._entries: list[LogEntry] = []
        self._cum_bytes: list[int] = []
        self._cum_start = 0
        for entry in entries:
            self.append(entry)

    @property
    def base(self) -> OpId:
        """The last compacted entry (0, 0 when nothing was compacted)."""
        return OpId(self._base_term, self._base_index)

    @property
    def first_index(self) -> int:
        return self._base_index + 1

    @property
    def last_index(self) -> int:
        return self._base_index + len(self._entries)

    @property
    def last_term(self) -> int:
        return self._entries[-1].term if self._entries else self._base_term

    def __len__(self) -> int:
        return len(self._entries)

    def term_at(self, index: int) -> int | None:
        """The term of entry ``index``; None when it was compacted away or does not exist yet."""
        offset = index - self._base_index
        if offset == 0:
            return self._base_term
        if 0 < offset <= len(self._entries):
            return self._entries[offset - 1].term
        return None

    def entry(self, index: int) -> LogEntry:
        offset = index - self._base_index
        if not 0 < offset <= len(self._entries):
            raise AssertionError(f"entry {index} is outside the log ({self.first_index}..{self.last_index})")
        return self._entries[offset - 1]

    def matches(self, index: int, term: int) -> bool:
        return self.term_at(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Whether a log ending at (last_term, last_index) is at least as up to date as this one."""
        return (last_term, last_index) >= (self.last_term, self.last_index)

    def entries_from(self, lo: int, max_bytes: int, upto: int | None = None) -> tuple[LogEntry, ...]:
        """Entries ``lo`` through ``upto`` (default: the last), as many as fit in ``max_bytes``
        but at least one if any exist."""
        start = lo - self._base_index - 1
        if start < 0:
            raise AssertionError(f"entry {lo} was compacted (log starts at {self.first_index})")
        stop = len(self._entries) if upto is None else min(upto - self._base_index, len(self._entries))
        if start >= stop:
            return ()
        before = self._cum_bytes[start - 1] if start else self._cum_start
        end = bisect.bisect_right(self._cum_bytes, before + max_bytes, start, stop)
        return tuple(self._entries[start : max(end, start + 1)])

    def entries_between(self, lo: int, hi: int) -> tuple[LogEntry, ...]:
        """Entries ``lo`` through ``hi`` inclusive."""
        start = lo - self._base_index - 1
        if start < 0 or hi > self.last_index:
            raise AssertionError(f"entries {lo}..{hi} are outside the log ({self.first_index}..{self.last_index})")
        return tuple(self._entries[start : hi - self._base_index])

    def bytes_between(self, after: int, upto: int) -> int:
        """Bytes of the entries with index in (``after``, ``upto``]."""
        after = max(after, self._base_index)
        upto = min(upto, self.last_index)
        if upto <= after:
            return 0
        hi = self._cum_bytes[upto - self._base_index - 1]
        lo = self._cum_bytes[after - self._base_index - 1] if after > self._base_index else self._cum_start
        return hi - lo

    def append(self, entry: LogEntry) -> None:
        if entry.index != self.last_index + 1:
            raise AssertionError(f"appending entry {entry.index} after {self.last_index}")
        if entry.term < self.last_term:
            raise AssertionError(f"appending term {entry.term} after term {self.last_term}")
        previous = self._cum_bytes[-1] if self._cum_bytes else self._cum_start
        self._entries.append(entry)
        self._cum_bytes.append(previous + entry.size_bytes)

    def truncate_after(self, index: int) -> None:
        """Drop every entry after ``index``."""
        if index < self._base_index:
            raise AssertionError(f"truncating to {index}, below the compacted base {self._base_index}")
        keep = index - self._base_index
        del self._entries[keep:]
        del self._cum_bytes[keep:]

    def conflict_hint(self, index: int, term: int) -> tuple[int, int]:
        """The last entry at or below ``index`` whose term is at most ``term``, as (index, term).

        Terms never decrease along a log, so this is a binary search.  At or below the base the
        answer is the base itself: compacted entries are committed and match every leader.
        """
        index = min(index, self.last_index)
        if index <= self._base_index:
            return self._base_index, self._base_term
        hi = index - self._base_index
        pos = bisect.bisect_right(self._entries, term, 0, hi, key=_entry_term)
        if pos == 0:
            return self._base_index, self._base_term
        found = self._entries[pos - 1]
        return found.index, found.term

    def compact(self, index: int) -> None:
        """Drop entries up to and including ``index`` (which must exist)."""
        if index <= self._base_index:
            return
        term = self.term_at(index)
        if term is None:
            raise AssertionError(f"compacting to {index}, beyond the last entry {self.last_index}")
        drop = index - self._base_index
        self._cum_start = self._cum_bytes[drop - 1]
        del self._entries[:drop]
        del self._cum_bytes[:drop]
        self._base_index = index
        self._base_term = term
