"""Placement speed with a table's own placement policy, beside the same cluster without one.

1,000 tablet servers in 10 locations, ``/eu/r0`` .. ``/eu/r4`` and ``/us/r0`` .. ``/us/r4``
(100 each); 10,000 RF 3 tablets of 100 tables over 40 ranges each, one logical millisecond
apart, placed by ``place_new_tablet``:

- ``unconstrained``: the cluster-wide policy only (the indexed path of
  :mod:`nyala.placement.location_choice`);
- ``pinned /eu``: every tablet confined to ``/eu`` (the scan of
  :mod:`nyala.placement.constraint_choice` over its five locations, no rack majority);
- ``pinned /eu, leader /eu/r1``: the same with a leader location.

Each line also checks every placement: no replica outside ``/eu`` and one per rack.  Figures
are replica placements per second of CPU time, best of ``--runs``; the reference line is
``placement_bench``'s bare power-of-two-choices loop, measured in the same run.

Usage: ``python bench/placement_constraint_bench.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.placement_bench import bare_p2c_rate
from nyala.placement import ClusterState, PlacementConstraint, place_new_tablet

TABLETS = 10_000


def cluster() -> tuple[ClusterState, dict[str, str]]:
    state = ClusterState(random.Random(1))
    location_of = {}
    for i in range(1000):
        uuid, location = f"ts{i}", f"/{'eu' if i % 2 else 'us'}/r{i % 10 // 2}"
        state.register_tserver(uuid, location)
        location_of[uuid] = location
    return state, location_of


def rate(constraint: PlacementConstraint | None) -> float:
    state, location_of = cluster()
    placed = []
    start = time.process_time()
    for t in range(TABLETS):
        result = place_new_tablet(state, f"t{t // 100}", bytes([t % 40]), 3, now_s=t / 1000, constraint=constraint)
        placed.append(result.tserver_uuids)
    elapsed = time.process_time() - start
    if constraint is not None:
        for uuids in placed:
            racks = sorted(location_of[u] for u in uuids)
            if len(set(racks)) != 3 or not all(r.startswith("/eu/") for r in racks):
                raise RuntimeError(f"a pinned tablet was placed on {racks}")
    return 3 * TABLETS / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"reference: bare power-of-two-choices loop, 1,000 servers: {bare_p2c_rate():,.0f} placements/s (CPU)")
    cases = [
        ("unconstrained", None),
        ("pinned /eu", PlacementConstraint.of(["/eu"])),
        ("pinned /eu, leader /eu/r1", PlacementConstraint.of(["/eu"], leader_location="/eu/r1")),
    ]
    for name, constraint in cases:
        best = max(rate(constraint) for _ in range(args.runs))
        print(f"{name:<28} {best:>12,.0f} replica placements/s (CPU)")


if __name__ == "__main__":
    main()
