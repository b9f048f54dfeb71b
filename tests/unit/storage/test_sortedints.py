"""SortedInts against a Python set, through many small additions and the merges they cause."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from nyala.storage.diskkeys import DiskKeys
from nyala.storage.sortedints import SortedInts, distinct_sorted, has_repeats

INT64 = st.integers(-(2**63), 2**63 - 1)


def test_many_additions_of_every_size_match_a_set() -> None:
    rng = np.random.default_rng(7)
    held = SortedInts()
    model: set[int] = set()
    for _ in range(300):
        # Sizes from single values to thousands: the small array fills and is merged many times.
        size = int(rng.choice([1, 3, 40, 2_000, 5_000]))
        values = rng.integers(-50_000, 50_000, size)
        new = len(set(values.tolist()) - model)
        assert held.add(values) == new
        model.update(values.tolist())
        assert len(held) == len(model)
        probe = rng.integers(-60_000, 60_000, 500)
        assert held.held(probe).tolist() == [v in model for v in probe.tolist()]
    assert sorted(held.values().tolist()) == sorted(model)
    held.clear()
    assert len(held) == 0
    assert not held.held(np.array([0, 1], np.int64)).any()


@given(st.lists(st.lists(INT64, max_size=20), max_size=10), st.lists(INT64, max_size=20))
def test_extreme_values_match_a_set(additions: list[list[int]], probe: list[int]) -> None:
    held = SortedInts()
    model: set[int] = set()
    for values in additions:
        held.add(np.array(values, np.int64))
        model.update(values)
    assert held.held(np.array(probe, np.int64)).tolist() == [v in model for v in probe]


@given(st.lists(INT64, max_size=30))
def test_distinct_and_repeats(values: list[int]) -> None:
    array = np.array(values, np.int64)
    assert distinct_sorted(array).tolist() == sorted(set(values))
    assert has_repeats(array) == (len(set(values)) != len(values))


def test_integer_disk_keys_index_values_not_hashes() -> None:
    # hash(-1) == hash(-2) and hash(2**61 - 1) == hash(0): fingerprints by value keep them apart.
    keys = DiskKeys([np.array([-1, 2**61 - 1], np.int64)], integer_keys=True)
    assert keys.holds(np.array([-1, -2, 0, 2**61 - 1], np.int64)).tolist() == [True, False, False, True]
    keys.add([5, -2])  # Python ints are taken by value too
    assert keys.maybe_held([-2, 5, 6]) == [-2, 5]
    assert len(keys) == 4
