"""Kudu's own placement tests (placement_policy-test, create-table-itest), as placement.md records them."""

from __future__ import annotations

from collections import Counter

import pytest

from nyala.placement import place_new_tablet

from .helpers import cluster


def _fill(state, uuid: str, table: str, range_key: bytes, count: int) -> None:
    for _ in range(count):
        state.add_replica(table, range_key, uuid)


def test_extreme_case_rf1_spreads_the_range_not_the_total() -> None:
    # Two servers holding 0 and 500 replicas (of another table); 1000 RF 1 tablets of one range.
    # Power of two choices gives 750/250; range-aware ranking gives 500/500.
    state = cluster([2])
    _fill(state, "L0-1", "other", b"", 500)
    placed = Counter(place_new_tablet(state, "t1", b"a1", 1, now_s=0.0).tserver_uuids[0] for _ in range(1000))
    assert placed == {"L0-0": 500, "L0-1": 500}


@pytest.mark.parametrize("seconds_per_tablet", [0.0, 0.001])
def test_ranges_and_tables(seconds_per_tablet: float) -> None:
    # RF 3 on four servers holding 0, 0, 500 replicas of t2/a1 and 500 of t1/a1; 1000 tablets of
    # t1/a1.  Kudu: 871-881 on each of the first three, 368-378 on the fourth (ideal 875/375).
    state = cluster([4])
    _fill(state, "L0-2", "t2", b"a1", 500)
    _fill(state, "L0-3", "t1", b"a1", 500)
    placed: Counter[str] = Counter()
    for k in range(1000):
        placed.update(place_new_tablet(state, "t1", b"a1", 3, now_s=k * seconds_per_tablet).tserver_uuids)
    if seconds_per_tablet == 0:
        assert placed == {"L0-0": 875, "L0-1": 875, "L0-2": 875, "L0-3": 375}
    else:
        assert all(abs(placed[f"L0-{i}"] - 875) <= 5 for i in range(3)), placed
        assert abs(placed["L0-3"] - 375) <= 5, placed


def test_spread_replicas_like_create_table_itest() -> None:
    # Five servers, RF 3, four tables of four ranges; table 1 has 10 hash buckets, the others 5.
    # Kudu: exactly 60 replicas per server, and 6 (table 1) or 3 replicas of each range per server.
    state = cluster([5])
    per_range: dict[tuple[str, int], Counter[str]] = {}
    for table in range(1, 5):
        buckets = 10 if table == 1 else 5
        for range_index in range(4):
            counts = per_range.setdefault((f"table{table}", range_index), Counter())
            for _ in range(buckets):
                uuids = place_new_tablet(state, f"table{table}", bytes([range_index]), 3, now_s=0.0).tserver_uuids
                counts.update(uuids)
    totals = Counter({info.uuid: info.pending_replicas for info in state.tservers()})
    assert set(totals.values()) == {60}
    for (table_id, _), counts in per_range.items():
        assert set(counts.values()) == ({6} if table_id == "table1" else {3}), (table_id, counts)
        assert len(counts) == 5
