from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nyala.consensus.core import ENTRY_OVERHEAD_BYTES, EntryType, LogEntry, OpId
from nyala.consensus.core.log import RaftLog


def entries(terms: list[int], start: int = 1, size: int = 10) -> list[LogEntry]:
    return [LogEntry(t, start + i, EntryType.WRITE, b"x" * size) for i, t in enumerate(terms)]


def test_term_at_covers_base_entries_and_nothing_else() -> None:
    log = RaftLog(OpId(2, 5), entries([2, 3], start=6))
    assert (log.first_index, log.last_index, log.last_term) == (6, 7, 3)
    assert log.term_at(5) == 2  # the compacted base keeps its term
    assert log.term_at(7) == 3
    assert log.term_at(4) is None
    assert log.term_at(8) is None


def test_append_must_be_contiguous_and_terms_never_decrease() -> None:
    log = RaftLog(OpId(0, 0), entries([1, 2]))
    with pytest.raises(AssertionError):
        log.append(LogEntry(2, 4, EntryType.WRITE, b""))
    with pytest.raises(AssertionError):
        log.append(LogEntry(1, 3, EntryType.WRITE, b""))


def test_batches_respect_the_byte_limit_but_always_carry_one_entry() -> None:
    log = RaftLog(OpId(0, 0), entries([1] * 10, size=100))
    per_entry = 100 + ENTRY_OVERHEAD_BYTES
    assert len(log.entries_from(1, 3 * per_entry)) == 3
    assert len(log.entries_from(1, 3 * per_entry - 1)) == 2
    assert len(log.entries_from(4, 1)) == 1
    assert log.entries_from(11, 10_000) == ()
    assert [e.index for e in log.entries_from(2, 10_000, upto=4)] == [2, 3, 4]


def test_bytes_between_counts_entries_in_the_half_open_range() -> None:
    log = RaftLog(OpId(0, 0), entries([1] * 5, size=10))
    per_entry = 10 + ENTRY_OVERHEAD_BYTES
    assert log.bytes_between(0, 5) == 5 * per_entry
    assert log.bytes_between(2, 4) == 2 * per_entry
    assert log.bytes_between(4, 2) == 0
    log.compact(3)
    assert log.bytes_between(0, 5) == 2 * per_entry  # compacted entries are not counted


def test_conflict_hint_skips_a_whole_term() -> None:
    # terms: 1 1 1 4 4 4 4 (indexes 1..7); a leader asks about index 7 with term 3
    log = RaftLog(OpId(0, 0), entries([1, 1, 1, 4, 4, 4, 4]))
    assert log.conflict_hint(7, 3) == (3, 1)
    assert log.conflict_hint(20, 4) == (7, 4)  # beyond the end: start from the last entry
    assert log.conflict_hint(2, 0) == (0, 0)


def test_truncate_and_compact() -> None:
    log = RaftLog(OpId(0, 0), entries([1, 1, 2, 2]))
    log.truncate_after(2)
    assert log.last_index == 2
    log.compact(1)
    assert log.base == OpId(1, 1)
    assert log.first_index == 2
    with pytest.raises(AssertionError):
        log.truncate_after(0)  # below the compacted base
    with pytest.raises(AssertionError):
        log.entries_from(1, 100)


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=30), st.integers(0, 40))
def test_conflict_hint_is_the_last_entry_with_a_term_not_above(steps: list[int], probe: int) -> None:
    terms, term = [], 1
    for step in steps:
        term += step
        terms.append(term)
    log = RaftLog(OpId(0, 0), entries(terms))
    for ask_term in range(term + 2):
        index, hint_term = log.conflict_hint(probe, ask_term)
        expected = max((i for i in range(1, min(probe, len(terms)) + 1) if terms[i - 1] <= ask_term), default=0)
        assert index == expected
        assert hint_term == (terms[index - 1] if index else 0)
