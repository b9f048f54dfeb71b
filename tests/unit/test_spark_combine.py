"""nyala.spark.combine.pack: small tablets share partitions, never above the bound, in order."""

from __future__ import annotations

from nyala.client import ScanToken
from nyala.spark.combine import pack


def token(name: str) -> ScanToken:
    return ScanToken((), "table-id", "t", name, {}, {}, ())


def names(groups: list[list[ScanToken]]) -> list[list[str]]:
    return [[t.tablet_id for t in group] for group in groups]


def test_small_tablets_are_packed_in_order_up_to_the_bound() -> None:
    tokens = [token(n) for n in "abcdef"]
    sizes: list[int | None] = [100, 300, None, 500, 50, 2000]
    # a+b fit in 600; c's size is unknown; d would pass 600 beside a+b, so starts a group; f is over.
    assert names(pack(tokens, sizes, 600)) == [["a", "b"], ["c"], ["d", "e"], ["f"]]
    assert names(pack(tokens, sizes, 10_000)) == [["a", "b", "d", "e", "f"], ["c"]]
    # Every token is in exactly one group, whatever the bound.
    for bound in (1, 60, 400, 1000, 5000):
        flat = sorted(t.tablet_id for group in pack(tokens, sizes, bound) for t in group)
        assert flat == list("abcdef")


def test_tablets_of_unknown_size_or_over_the_bound_stay_alone() -> None:
    tokens = [token(n) for n in "abc"]
    assert names(pack(tokens, [None, None, None], 1 << 20)) == [["a"], ["b"], ["c"]]
    assert names(pack(tokens, [10, 5000, 10], 100)) == [["a", "c"], ["b"]]
