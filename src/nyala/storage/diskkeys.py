"""Which keys a tablet's DuckDB file may hold, answered in memory.

An insert must fail when its key exists and an upsert must hide the older row, so every key
the MemRowSet takes has to be checked against DuckDB.  A DuckDB query costs milliseconds
however few keys it asks about, and writes from several clients (Spark tasks writing
interleaved key ranges, random keys) put almost every key inside the file's key range, so
the store asks this index first and queries DuckDB only for the keys it cannot rule out.
Kudu keeps a Bloom filter per rowset for the same reason.

The index is a sorted numpy array of one 64-bit fingerprint per key ever written to the
file: Python's ``hash`` of the key, which is the value itself for most integer keys.  It
answers "maybe" for every key in the file, and for a key outside it only on a 64-bit
fingerprint collision, so a check costs a binary search and almost never a DuckDB query.
Deleted keys stay in it (still correct: "maybe" is then confirmed by DuckDB).  It costs 8
bytes a key, lives only in memory and is rebuilt from the file when the tablet opens.
Python salts ``hash`` of strings per process; that is fine for an index that never leaves it.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable

import numpy as np
import numpy.typing as npt

from .memrowset import Key

__all__ = ["DiskKeys"]


def fingerprints(keys: Collection[Key]) -> npt.NDArray[np.int64]:
    return np.fromiter(map(hash, keys), np.int64, len(keys))


def sorted_distinct(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    # Sort and drop neighbours: numpy 2's np.unique is over ten times slower on integers.
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    distinct: npt.NDArray[np.int64] = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    return distinct


class DiskKeys:
    """A superset of the keys in the file, as sorted fingerprints."""

    def __init__(self, chunks: Iterable[Collection[Key]] = ()) -> None:
        """The index of every key in ``chunks`` (batches of keys), sorted once at the end."""
        prints = [fingerprints(chunk) for chunk in chunks]
        self._sorted = sorted_distinct(np.concatenate(prints) if prints else np.empty(0, np.int64))

    def __len__(self) -> int:
        return len(self._sorted)

    def add(self, keys: Collection[Key]) -> None:
        """Record keys just written to the file."""
        new = sorted_distinct(fingerprints(keys))
        if not len(new):
            return
        held = self._sorted
        new = new[~self._holds(new)]
        self._sorted = np.insert(held, np.searchsorted(held, new), new)

    def maybe_held(self, keys: Collection[Key]) -> list[Key]:
        """The keys of ``keys`` that may be in the file (every one that is, and almost no other)."""
        if not len(self._sorted) or not keys:
            return []
        return list(itertools.compress(keys, self._holds(fingerprints(keys)).tolist()))

    def _holds(self, prints: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        held = self._sorted
        if not len(held):
            return np.zeros(len(prints), np.bool_)
        at = np.minimum(np.searchsorted(held, prints), len(held) - 1)
        found: npt.NDArray[np.bool_] = held[at] == prints
        return found
