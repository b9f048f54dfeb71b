"""The in-memory index of a tablet's DuckDB keys: never a false "no"."""

from __future__ import annotations

import datetime
import decimal

from hypothesis import given
from hypothesis import strategies as st

from nyala.storage.diskkeys import DiskKeys

KEYS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.tuples(st.integers(-5, 5), st.text(max_size=3)),
    st.binary(max_size=4),
)


@given(held=st.lists(KEYS, max_size=40), later=st.lists(KEYS, max_size=40), asked=st.lists(KEYS, max_size=40))
def test_every_added_key_is_maybe_held(held: list[object], later: list[object], asked: list[object]) -> None:
    keys = DiskKeys([held])
    keys.add(later)
    everything = set(held) | set(later)
    question = asked + held + later
    answer = keys.maybe_held(question)
    assert [k for k in question if k in everything] == [k for k in answer if k in everything]
    assert set(answer) <= set(question)


def test_keys_never_added_are_ruled_out() -> None:
    keys = DiskKeys([range(0, 1000, 2)])
    keys.add([datetime.datetime(2024, 1, 1), decimal.Decimal("1.50"), "x"])
    assert keys.maybe_held(range(1, 1000, 2)) == []
    assert keys.maybe_held([decimal.Decimal("1.5"), "y", 998, 1000]) == [decimal.Decimal("1.5"), 998]
    assert len(keys) == 503


def test_an_index_built_from_several_chunks_equals_one_built_from_one() -> None:
    chunks = [range(50), range(25, 100, 3), []]
    keys = DiskKeys(chunks)
    assert len(keys) == len(DiskKeys([[k for c in chunks for k in c]]))
    assert keys.maybe_held(range(-10, 120)) == sorted({*range(50), *range(25, 100, 3)})
    assert len(DiskKeys([])) == 0


def test_fingerprint_collisions_answer_maybe() -> None:
    keys = DiskKeys([[-1]])  # hash(-1) == hash(-2) in Python
    assert keys.maybe_held([-2, -3]) == [-2]
    assert DiskKeys().maybe_held([1, 2]) == []
