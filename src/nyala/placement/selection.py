"""Which planned moves to start now: the step both rebalancers (the CLI and the master) share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from nyala.placement.rebalance import Move

__all__ = ["select_moves"]


def select_moves(
    moves: Sequence[Move],
    busy: Collection[str],
    max_per_server: int,
    excluded: Collection[str] = frozenset(),
) -> tuple[list[Move], list[Move]]:
    """The moves to start in one round, and the moves held back because their tablet is ``busy``.

    The plan is walked in order and each tablet is looked at once: its first move is the only
    one valid on the current layout (its later moves assume it).  Tablets in ``excluded`` are
    skipped; tablets in ``busy`` (a config change under way) wait; a move is kept while its
    source is the source of fewer than ``max_per_server`` kept moves and its destination the
    destination of fewer (the two directions are counted apart, as Kudu does).  Moves of
    distinct tablets are independent under the placement policy (it is per tablet), so any
    such subset keeps every tablet within it.
    """
    seen: set[str] = set()
    chosen: list[Move] = []
    waiting: list[Move] = []
    as_source: Counter[str] = Counter()
    as_dest: Counter[str] = Counter()
    for move in moves:
        if move.tablet_id in seen:
            continue
        seen.add(move.tablet_id)
        if move.tablet_id in excluded:
            continue
        if move.tablet_id in busy:
            waiting.append(move)
            continue
        if as_source[move.from_uuid] >= max_per_server or as_dest[move.to_uuid] >= max_per_server:
            continue
        as_source[move.from_uuid] += 1
        as_dest[move.to_uuid] += 1
        chosen.append(move)
    return chosen, waiting
