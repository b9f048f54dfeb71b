"""A set of 64-bit integers kept as sorted numpy arrays, for tablets keyed by one integer column.

The MemRowSet of such a tablet indexes its keys here instead of in a Python dict: a dict
costs about 100 ns a key to fill and as much again to probe, every key a Python object,
while numpy sorts and binary-searches thousands of keys in a few nanoseconds each.

One sorted array would make every addition copy the whole set, which is what many small
entries (single-row writes) do.  So additions go to a small sorted array, which is cheap to
copy, and the small array is merged into the large one once it holds more than a fixed
share of it: each value is copied a bounded number of times on average, as in an LSM tree
with two levels.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["IntArray", "SortedInts", "distinct_sorted", "has_repeats", "member_of", "merge"]

IntArray = npt.NDArray[np.int64]

# The small array is merged into the large one when it grows past this many values or past
# an eighth of the large one, whichever is more.
_SMALL_MAX = 4096
_SMALL_SHARE = 8
# Below this many values a Python set beats numpy's per-call cost (measured: 0.5 against 4 us).
_FEW = 32


def distinct_sorted(values: IntArray) -> IntArray:
    """``values`` sorted, each once (numpy 2's ``np.unique`` is far slower on integers)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    distinct: IntArray = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    return distinct


def has_repeats(values: IntArray) -> bool:
    """Whether any value occurs twice."""
    if len(values) < 2:
        return False
    if len(values) <= _FEW:
        return len(set(values.tolist())) < len(values)
    ordered = np.sort(values)
    return bool((ordered[1:] == ordered[:-1]).any())


def member_of(ordered: IntArray, values: IntArray) -> npt.NDArray[np.bool_]:
    """For each of ``values``, whether the sorted array ``ordered`` holds it."""
    if not len(ordered) or not len(values):
        return np.zeros(len(values), np.bool_)
    at = np.minimum(np.searchsorted(ordered, values), len(ordered) - 1)
    found: npt.NDArray[np.bool_] = ordered[at] == values
    return found


def merge(ordered: IntArray, more: IntArray) -> IntArray:
    """Two sorted arrays as one sorted array.  A stable sort of the two end to end is a merge
    of two runs (Timsort finds them), about three times cheaper than ``np.insert``."""
    if not len(ordered):
        return more
    merged = np.concatenate((ordered, more))
    merged.sort(kind="stable")
    return merged


class SortedInts:
    """A set of int64 values: membership of many values at once, and additions."""

    def __init__(self) -> None:
        self._large: IntArray = np.empty(0, np.int64)
        self._small: IntArray = np.empty(0, np.int64)

    def __len__(self) -> int:
        return len(self._large) + len(self._small)

    def held(self, values: IntArray) -> npt.NDArray[np.bool_]:
        """For each of ``values``, whether the set holds it."""
        found = member_of(self._large, values)
        if len(self._small):
            found |= member_of(self._small, values)
        return found

    def add(self, values: IntArray) -> int:
        """Add ``values`` (repeats and values already held are fine); returns how many were new."""
        new = distinct_sorted(values)
        new = new[~self.held(new)]
        self.add_new(new)
        return len(new)

    def add_new(self, values: IntArray) -> None:
        """Add distinct values the set does not hold (the caller knows: no check is made)."""
        if not len(values):
            return
        self._small = merge(self._small, np.sort(values))
        if len(self._small) > max(_SMALL_MAX, len(self._large) // _SMALL_SHARE):
            self._large = merge(self._large, self._small)
            self._small = np.empty(0, np.int64)

    def values(self) -> IntArray:
        """Every value held, in no particular order."""
        if not len(self._small):
            return self._large
        return np.concatenate((self._large, self._small))

    def clear(self) -> None:
        self._large = np.empty(0, np.int64)
        self._small = np.empty(0, np.int64)
