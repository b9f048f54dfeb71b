"""The log index: which batch holds an op index, and the term of every index, kept compactly.

One row per batch (not per entry) in three parallel ``array('q')`` columns: the first op
index the batch contributes, the segment sequence number and the batch's byte offset.  The
rows are sorted by first index (and by segment), so lookups are a bisect; a batch's range ends
just before the next row's first index (or at ``last_index`` for the last row), which also
hides entries that a later truncation marker superseded.  Terms are kept as runs (first index
of each run and its term), since a term usually spans many entries.

Not thread-safe: the log guards it with its state lock.  Rebuilt by scanning on open.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from nyala.errors import NotFound

__all__ = ["BatchSpan", "LogIndex"]


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """The op indexes ``lo..hi`` (inclusive) live in the batch at ``offset`` of segment ``seqno``."""

    lo: int
    hi: int
    seqno: int
    offset: int


class LogIndex:
    """Op index to (segment, batch offset), and op index to term, for the entries in the log."""

    def __init__(self) -> None:
        self._first = array("q")
        self._seqno = array("q")
        self._offset = array("q")
        self._run_start = array("q")
        self._run_term = array("q")
        self.first_index = 1
        self.last_index = 0

    def __len__(self) -> int:
        """Number of entries (not batches) in the log."""
        return self.last_index - self.first_index + 1

    @property
    def last_term(self) -> int | None:
        return self._run_term[-1] if len(self) else None

    def add(self, seqno: int, offset: int, first: int, last: int, runs: Iterable[tuple[int, int]]) -> None:
        """Record that entries ``first..last`` (with the given term runs) are durable in that batch."""
        if self.last_index >= self.first_index:
            assert first == self.last_index + 1, f"index {first} does not follow {self.last_index}"
        else:
            self.first_index = first
        offsets = self._offset
        if not (offsets and offsets[-1] == offset and self._seqno[-1] == seqno):
            self._first.append(first)
            self._seqno.append(seqno)
            offsets.append(offset)
        terms = self._run_term
        for start, term in runs:
            if not terms or terms[-1] != term:
                self._run_start.append(start)
                terms.append(term)
        self.last_index = last

    def truncate_after(self, index: int) -> None:
        """Forget entries above ``index``; the next entry added must be ``index + 1``."""
        keep = bisect_right(self._first, index)
        del self._first[keep:], self._seqno[keep:], self._offset[keep:]
        keep_runs = bisect_right(self._run_start, index)
        del self._run_start[keep_runs:], self._run_term[keep_runs:]
        self.last_index = index
        self.first_index = self._first[0] if self._first else index + 1

    def drop_segments_through(self, seqno: int) -> None:
        """Forget the batches of segments up to ``seqno`` (they were garbage collected)."""
        cut = bisect_right(self._seqno, seqno)
        del self._first[:cut], self._seqno[:cut], self._offset[:cut]
        self.first_index = self._first[0] if self._first else self.last_index + 1
        runs_cut = max(bisect_right(self._run_start, self.first_index) - 1, 0)
        del self._run_start[:runs_cut], self._run_term[:runs_cut]

    def term_at(self, index: int) -> int:
        if not self.first_index <= index <= self.last_index:
            raise NotFound(f"index {index} is not in the log (it holds {self._describe_range()})")
        return self._run_term[bisect_right(self._run_start, index) - 1]

    def spans_from(self, index: int, max_spans: int) -> list[BatchSpan]:
        """Up to ``max_spans`` batches covering ``index`` onwards (``index`` must be in the log)."""
        row = bisect_right(self._first, index) - 1
        assert row >= 0, f"index {index} is below the first batch"
        spans: list[BatchSpan] = []
        stop = min(row + max_spans, len(self._first))
        for k in range(row, stop):
            hi = self._first[k + 1] - 1 if k + 1 < len(self._first) else self.last_index
            spans.append(BatchSpan(max(self._first[k], index), hi, self._seqno[k], self._offset[k]))
        return spans

    def segment_of(self, index: int) -> int:
        """Sequence number of the segment holding ``index`` (which must be in the log)."""
        return self._seqno[bisect_right(self._first, index) - 1]

    def _describe_range(self) -> str:
        if not len(self):
            return f"no entries; the next index is {self.last_index + 1}"
        return f"indexes {self.first_index}..{self.last_index}"
