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

A tablet keyed by one integer column indexes the key values themselves (``integer_keys``):
no two keys then share a fingerprint, and the store passes keys as numpy arrays, with no
Python objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable

import numpy as np
import numpy.typing as npt

from .memrowset import Key
from .sortedints import IntArray, distinct_sorted, member_of, merge

__all__ = ["DiskKeys"]

Keys = Collection[Key] | IntArray


def _hashes(keys: Keys) -> IntArray:
    return np.fromiter(map(hash, keys), np.int64, len(keys))


def _values(keys: Keys) -> IntArray:
    return np.asarray(keys, np.int64)


class DiskKeys:
    """A superset of the keys in the file, as sorted fingerprints."""

    def __init__(self, chunks: Iterable[Keys] = (), *, integer_keys: bool = False) -> None:
        """The index of every key in ``chunks`` (batches of keys), sorted once at the end.
        With ``integer_keys`` the fingerprint of a key is its value, which must be an integer."""
        self._fingerprints = _values if integer_keys else _hashes
        prints = [self._fingerprints(chunk) for chunk in chunks]
        self._sorted = distinct_sorted(np.concatenate(prints) if prints else np.empty(0, np.int64))

    def __len__(self) -> int:
        return len(self._sorted)

    def add(self, keys: Keys) -> None:
        """Record keys just written to the file."""
        new = distinct_sorted(self._fingerprints(keys))
        if not len(new):
            return
        self._sorted = merge(self._sorted, new[~member_of(self._sorted, new)])

    def maybe_held(self, keys: Collection[Key]) -> list[Key]:
        """The keys of ``keys`` that may be in the file (every one that is, and almost no other)."""
        if not len(self._sorted) or not keys:
            return []
        return list(itertools.compress(keys, member_of(self._sorted, self._fingerprints(keys)).tolist()))

    def holds(self, keys: Keys) -> npt.NDArray[np.bool_]:
        """For each key, whether it may be in the file."""
        return member_of(self._sorted, self._fingerprints(keys))
