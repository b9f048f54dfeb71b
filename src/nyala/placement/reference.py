"""The straightforward placement Kudu runs, kept as the oracle and the benchmark baseline.

:func:`scan_choose_server` evaluates the (range, table, total) triple of every live server of
the location on every placement, exactly as Kudu's ``PickTabletServer`` does, and picks among
the lowest at random.  It is O(servers in the location) per replica, where
:func:`nyala.placement.ranking.choose_server` reads the same minimum from indexes; the tests
check that the two always agree on the set of acceptable answers.

:data:`KUDU` pairs it with Kudu's location choice, whose load counts only reported replicas;
:data:`SCAN` pairs it with Nyala's location choice (pending replicas count too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nyala.placement.placer import Strategy
from nyala.placement.tally import scaled_load

if TYPE_CHECKING:
    from nyala.placement.state import ClusterState, Context, Location

__all__ = ["KUDU", "SCAN", "lowest_ranked", "scan_choose_server"]


def lowest_ranked(state: ClusterState, loc: Location, tctx: Context, rctx: Context, excluded: set[int]) -> list[int]:
    """Every eligible server of ``loc`` whose (range, table, total) triple is the minimum, sorted."""
    weight = state.clock.weight
    best: tuple[int, int, int] | None = None
    ties: list[int] = []
    for sid in sorted(loc.live_sids):
        if sid in excluded:
            continue
        server = state.servers[sid]
        assert server is not None
        key = (_scaled(rctx, sid, weight), _scaled(tctx, sid, weight), server.reported * weight + server.pending)
        if best is None or key < best:
            best, ties = key, [sid]
        elif key == best:
            ties.append(sid)
    return ties


def scan_choose_server(
    state: ClusterState, loc: Location, tctx: Context, rctx: Context, excluded: set[int]
) -> int | None:
    ties = lowest_ranked(state, loc, tctx, rctx, excluded)
    if not ties:
        return None
    return ties[0] if len(ties) == 1 else state.rng.choice(ties)


def _scaled(ctx: Context | None, sid: int, weight: int) -> int:
    tally = ctx.stats.get(sid) if ctx is not None else None
    return scaled_load(tally, weight) if tally is not None else 0


KUDU = Strategy("kudu-range", scan_choose_server, location_load_counts_pending=False)
SCAN = Strategy("nyala-scan", scan_choose_server, location_load_counts_pending=True)
