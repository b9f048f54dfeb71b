"""Builders shared by the placement tests."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from nyala.placement import ClusterState
from nyala.placement.placer import Strategy
from nyala.placement.ranking import choose_server
from nyala.placement.reference import lowest_ranked
from nyala.placement.tally import pending_of, reported_of


def cluster(sizes: Sequence[int], seed: int = 1, dead: Sequence[str] = ()) -> ClusterState:
    """Locations /L0, /L1, ... with ``sizes[i]`` servers named ``L<i>-<j>``."""
    state = ClusterState(random.Random(seed))
    for i, size in enumerate(sizes):
        for j in range(size):
            state.register_tserver(f"L{i}-{j}", f"/L{i}", live=f"L{i}-{j}" not in dead)
    return state


def location_of(uuid: str) -> str:
    return "/" + uuid.split("-")[0]


def per_location(uuids: Sequence[str]) -> Counter[str]:
    return Counter(location_of(u) for u in uuids)


class Checked:
    """A strategy that picks with the indexed ranking and checks each pick against a full scan."""

    def __init__(self) -> None:
        self.picks = 0
        self.strategy = Strategy("checked", self.choose, location_load_counts_pending=True)

    def choose(self, state, loc, tctx, rctx, excluded):
        acceptable = lowest_ranked(state, loc, tctx, rctx, excluded)
        sid = choose_server(state, loc, tctx, rctx, excluded)
        assert (sid is None) == (not acceptable)
        assert sid is None or sid in acceptable, (sid, acceptable)
        self.picks += 1
        return sid


def assert_consistent(state: ClusterState) -> None:
    """Every aggregate equals the sum of what it aggregates."""
    for name, loc in state.locations.items():
        assert loc.sids, f"empty location {name} kept"
        servers = {sid: state.servers[sid] for sid in loc.sids}
        live = {sid for sid, server in servers.items() if server is not None and server.live}
        assert loc.live_sids == live
        assert loc.reported == sum(server.reported for server in servers.values() if server and server.live)
        assert loc.pending == sum(server.pending for server in servers.values() if server and server.live)
        assert set(loc.tables) == set(loc.ranges)
        for table, tctx in loc.tables.items():
            assert tctx.stats, f"empty table context {table} kept"
            sums: dict[int, list[int]] = {}
            for rctx in loc.ranges[table].values():
                assert rctx.stats
                assert rctx.parent is tctx
                for sid, tally in rctx.stats.items():
                    assert tally > 0
                    acc = sums.setdefault(sid, [0, 0])
                    acc[0] += reported_of(tally)
                    acc[1] += pending_of(tally)
            assert set(sums) <= set(tctx.stats)
            for sid, tally in tctx.stats.items():
                assert sid in loc.sids
                reported, pending = sums.get(sid, [0, 0])
                assert reported_of(tally) == reported
                assert pending_of(tally) >= pending  # shifting a sum right floors at most once per part
