"""The indexed ranking always agrees with Kudu's full scan (the oracle), whatever happens."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nyala.errors import ServiceUnavailable
from nyala.placement import ClusterState, ranking
from nyala.placement.placer import place_new_tablet, place_replacement
from nyala.placement.ranking import SKIP_BUDGET, choose_server
from nyala.placement.reference import lowest_ranked

from .helpers import Checked, assert_consistent, cluster

OPS = st.lists(
    st.tuples(
        st.sampled_from(["place", "place", "place", "report", "unreport", "kill", "revive", "replace", "tick", "drop"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=120,
)


def _apply(
    state: ClusterState,
    checked: Checked,
    op: str,
    arg: int,
    clock: list[float],
    placed: list[tuple[str, bytes, tuple[str, ...]]],
) -> None:
    rng = random.Random(arg)
    uuids = sorted(state.by_uuid)
    table, range_key = f"t{arg % 3}", bytes([arg % 4])
    if op == "place":
        try:
            result = place_new_tablet(state, table, range_key, 1 + arg % 4, now_s=clock[0], strategy=checked.strategy)
            placed.append((table, range_key, result.tserver_uuids))
        except ServiceUnavailable:
            pass
    elif op == "report" and placed:
        table, range_key, members = placed[arg % len(placed)]
        state.add_replica(table, range_key, members[0])
    elif op == "unreport":
        for table, range_key, members in placed:
            try:
                state.remove_replica(table, range_key, members[0])
                break
            except Exception:
                continue
    elif op == "kill":
        state.set_tserver_live(rng.choice(uuids), False)
    elif op == "revive":
        state.set_tserver_live(rng.choice(uuids), True)
    elif op == "replace" and placed:
        table, range_key, members = placed[arg % len(placed)]
        try:
            place_replacement(state, table, range_key, 3, members, now_s=clock[0], strategy=checked.strategy)
        except ServiceUnavailable:
            pass
    elif op == "tick":
        clock[0] += (arg % 5000) / 10  # up to 500 s: crosses quanta and half-lives
    elif op == "drop":
        state.remove_table(table)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4), seed=st.integers(0, 2**16), ops=OPS)
def test_indexed_pick_is_always_among_the_full_scan_minima(sizes, seed, ops) -> None:
    state = cluster(sizes, seed)
    checked = Checked()
    clock = [0.0]
    placed: list[tuple[str, bytes, tuple[str, ...]]] = []
    for op, arg in ops:
        _apply(state, checked, op, arg, clock, placed)
        assert_consistent(state)


@pytest.mark.parametrize("tables", [1, 7])
def test_dense_tables_cross_every_case_and_agree_with_the_scan(tables: int, monkeypatch) -> None:
    # Many tablets of few ranges: tables and ranges become dense, so the shared heaps, the
    # outside heaps (cases 1 and 2) and the range heaps (case 3) all serve picks.
    used: Counter[str] = Counter()
    real_outside, real_build, real_heap = ranking._outside, ranking._build_outside_heap, ranking._context_heap

    def outside(state, loc, tctx, rctx, excluded):
        used["case 1" if rctx is None else "case 2"] += 1
        return real_outside(state, loc, tctx, rctx, excluded)

    def build(state, ctx, key_ctx, sids):
        used["outside heap, case 1" if key_ctx is None else "outside heap, case 2"] += 1
        return real_build(state, ctx, key_ctx, sids)

    def context_heap(state, ctx):
        used["case 3" if ctx.parent is not None else "table heap"] += 1
        return real_heap(state, ctx)

    monkeypatch.setattr(ranking, "_context_heap", context_heap)
    monkeypatch.setattr(ranking, "_outside", outside)
    monkeypatch.setattr(ranking, "_build_outside_heap", build)
    state = cluster([40, 30])
    checked = Checked()
    for k in range(1500):
        table = f"t{k % tables}"
        place_new_tablet(state, table, bytes([k % 5]), 3, now_s=k * 0.01, strategy=checked.strategy)
        if k % 7 == 0:
            state.add_replica(table, bytes([k % 5]), f"L0-{k % 40}")
    assert checked.picks == 4500
    expected = {"case 1", "case 2", "case 3", "table heap", "outside heap, case 2"}
    if tables > 1:
        expected.add("outside heap, case 1")
    assert expected <= set(used), used


def test_skipping_past_many_members_builds_an_outside_heap() -> None:
    # The least loaded servers all hold the table already: the answer lies past them.
    state = cluster([SKIP_BUDGET * 3])
    loc = state.locations["/L0"]
    for i in range(SKIP_BUDGET * 2):
        state.add_replica("busy", b"", f"L0-{i}")  # busy servers get load from another table
    for i in range(SKIP_BUDGET * 2, SKIP_BUDGET * 3):
        for _ in range(5):
            state.add_replica("other", b"", f"L0-{i}")
    state.advance_clock(0.0)
    tctx, rctx = state.contexts(loc, "busy", b"")
    sid = choose_server(state, loc, *state.contexts(loc, "hot", b""), set())
    assert sid in lowest_ranked(state, loc, *state.contexts(loc, "hot", b""), set())
    # For table "busy" the members are the least loaded: the pick must skip all of them.
    sid = choose_server(state, loc, tctx, rctx, set())
    assert sid is not None
    assert sid not in tctx.stats
    assert tctx.outside_gen == state.gen
