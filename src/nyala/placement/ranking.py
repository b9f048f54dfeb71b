"""Range-aware choice of a tablet server inside one location, without scanning the location.

Seed 001 ranks the servers of a location by the triple (replicas of this range, replicas of
this table, replicas in total), each counting reported plus decayed pending replicas, and
takes the lowest; ties go to a random server.  Kudu evaluates the triple for every server on
every placement.  Nyala finds the same minimum in three cases, from lazily maintained heaps:

1. Some eligible server holds nothing of the table: its triple is ``(0, 0, total)``, which
   beats every table member, so the answer is the least-loaded server *outside* the table's
   context.
2. Every eligible server holds the table but some hold nothing of the range: the answer is
   the lowest ``(table, total)`` among table members outside the range's context.
3. Every eligible server holds the range: the lowest full triple among the range's members.

"Outside a context" is answered first from the shared heap (the location's heap keyed by
total for case 1, the table context's heap keyed by ``(table, total)`` for case 2) by skipping
members, which costs nothing while members are few or heavily loaded.  When more than
``SKIP_BUDGET`` members sit at the top, the context gets its own *outside heap*: the
non-members only, from which a server that has since joined the context is dropped for good
the moment it surfaces.  Membership only grows until the generation changes, so each server
is dropped at most once: the cost is amortized O(log n) per placement.  Outside heaps live in
a small FIFO cache (``OUTSIDE_HEAPS_CACHED``) so memory stays bounded.

A heap entry is one integer, ``key << 64 | tie_breaker << 32 | sid``, where ``key`` packs the
ranked loads into ``LOAD_BITS``-bit fields (most significant first): comparing two such ints
compares the lexicographic keys, in C, which is several times faster than comparing tuples.
The tie-breaker is a fresh random draw, so equal keys come out in random order.  The heaps
belong to :class:`~nyala.placement.state.ClusterState`, which defines this layout and pushes a
server into them as it joins a context; this module builds them and searches them.

Keys are scaled integer loads (:mod:`nyala.placement.decay`) that only grow while the
generation number stays the same, so a stored key is a lower bound of the server's current
key: when the top entry is out of date it is replaced by the current key and the search goes
on, and when it is up to date it is the true minimum.  The server chosen is about to get a
pending replica (the placer records it at once), so its entry is replaced right away by the
key it will then have (:func:`~nyala.placement.state.key_growth`) instead of being refreshed
by the next search.  A change that can lower a key bumps the
generation and the heap is rebuilt (heapified, O(n)) on its next use; so is a heap built
before the decay weight last changed, since nearly every key moved.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from heapq import heapify, heappop, heappush, heapreplace
from typing import Final

from nyala.placement.state import (
    KEY_SHIFT,
    SID_MASK,
    ClusterState,
    Context,
    Location,
    context_entries,
    context_key,
    key_growth,
)

__all__ = ["OUTSIDE_HEAPS_CACHED", "SKIP_BUDGET", "choose_server", "live_members"]

SKIP_BUDGET: Final = 16
OUTSIDE_HEAPS_CACHED: Final = 64


class _OverBudget:
    """Returned by a heap search that skipped more members than its budget allows."""


_OVER_BUDGET: Final = _OverBudget()
_NOBODY: Final[frozenset[int]] = frozenset()
_UNLIMITED: Final = 1 << 62


def choose_server(state: ClusterState, loc: Location, tctx: Context, rctx: Context, excluded: set[int]) -> int | None:
    """The lowest-ranked live server of ``loc`` not in ``excluded``, or None when there is none.

    The caller records one pending replica of the range on the server returned, at once and at
    the current weight (as :func:`nyala.placement.placer.place_new_tablet` does): the heap it
    was found in already holds the key it has after that (see the module's docstring).
    """
    table_members = tctx.stats
    heap = loc.heap
    weight = state.clock.weight
    live_sids = loc.live_sids
    # The fast path is pointless once the table has a replica on (about) every server of the
    # location, as it soon does for a table of many tablets: skip its heap upkeep then.
    if heap and loc.heap_gen == state.gen and loc.heap_weight == weight and len(table_members) < len(live_sids):
        # Fast path: the least-loaded server of the location is eligible and holds nothing of the
        # table, so case 1 applies and nobody outside the table is less loaded.
        servers = state.servers
        while True:
            entry = heap[0]
            sid = entry & SID_MASK
            server = servers[sid]
            assert server is not None
            current = server.reported * weight + server.pending
            if current == entry >> KEY_SHIFT:
                break
            heapreplace(heap, current << KEY_SHIFT | state.rng.getrandbits(32) << 32 | sid)
        if sid not in excluded and sid not in table_members:
            heapreplace(heap, (current + weight) << KEY_SHIFT | state.rng.getrandbits(32) << 32 | sid)
            return sid
    in_table = tctx.live_members if tctx.count_gen == state.gen else live_members(state, tctx)
    outside = len(live_sids) - in_table
    for sid in excluded:
        if sid in live_sids and sid not in table_members:
            outside -= 1
    if outside > 0:
        return _outside(state, loc, tctx, None, excluded)
    range_members = rctx.stats
    in_range = live_members(state, rctx)
    table_only = in_table - in_range
    for sid in excluded:
        if sid in live_sids and sid in table_members and sid not in range_members:
            table_only -= 1
    if table_only > 0:
        return _outside(state, loc, tctx, rctx, excluded)
    found = _pick(_context_heap(state, rctx), state, rctx, _NOBODY, _NOBODY, excluded, _UNLIMITED)
    assert not isinstance(found, _OverBudget)
    return found


def _outside(state: ClusterState, loc: Location, tctx: Context, rctx: Context | None, excluded: set[int]) -> int | None:
    """Case 1 (``rctx`` None): least loaded outside the table; case 2: best table member outside the range."""
    ctx = rctx if rctx is not None else tctx
    members = ctx.stats
    key_ctx = None if rctx is None else tctx  # case 1 ranks by total, case 2 by (table, total)
    if ctx.outside_gen != state.gen or ctx.outside_weight != state.clock.weight:
        shared = _location_heap(state, loc) if rctx is None else _context_heap(state, tctx)
        found = _pick(shared, state, key_ctx, members, _NOBODY, excluded, SKIP_BUDGET)
        if not isinstance(found, _OverBudget):
            return found
        candidates = loc.live_sids if rctx is None else tctx.stats
        _build_outside_heap(state, ctx, key_ctx, (sid for sid in candidates if sid not in members))
    found = _pick(ctx.outside, state, key_ctx, _NOBODY, members, excluded, _UNLIMITED)
    assert not isinstance(found, _OverBudget)
    return found


def _pick(
    heap: list[int],
    state: ClusterState,
    key_ctx: Context | None,
    skip: Container[int],
    discard: Container[int],
    excluded: Container[int],
    budget: int,
) -> int | _OverBudget | None:
    """Pop to the lowest up-to-date entry not skipped, discarded or excluded.

    Entries in ``skip`` and ``excluded`` are put back afterwards; entries in ``discard`` are
    dropped for good.  ``key_ctx`` None means the key is the total load, else the context's key.
    """
    servers = state.servers
    weight = state.clock.weight
    draw = state.rng.getrandbits
    held: list[int] = []
    chosen: int | _OverBudget | None = None
    grow = key_growth(key_ctx, weight)
    while heap:
        entry = heap[0]
        sid = entry & SID_MASK
        if sid in discard:  # joined the context since: gone for good, whatever its key
            heappop(heap)
            continue
        if key_ctx is None:
            server = servers[sid]
            assert server is not None
            current = server.reported * weight + server.pending
        else:
            current = context_key(state, key_ctx, sid)
        if current != entry >> KEY_SHIFT:
            heapreplace(heap, current << KEY_SHIFT | draw(32) << 32 | sid)
        elif sid in skip or sid in excluded:
            held.append(heappop(heap))
            if len(held) > budget:
                chosen = _OVER_BUDGET
                break
        else:
            chosen = sid
            # The caller records a replica on it now: store the key it will have, so the next
            # search finds its entry current instead of refreshing it (still a lower bound).
            heapreplace(heap, (current + grow) << KEY_SHIFT | draw(32) << 32 | sid)
            break
    for kept in held:
        heappush(heap, kept)
    return chosen


def live_members(state: ClusterState, ctx: Context) -> int:
    """How many members of a context are live servers (recounted after a generation change)."""
    if ctx.count_gen != state.gen:
        servers = state.servers
        ctx.live_members = sum(1 for sid in ctx.stats if (s := servers[sid]) is not None and s.live)
        ctx.count_gen = state.gen
    return ctx.live_members


def _location_heap(state: ClusterState, loc: Location) -> list[int]:
    weight = state.clock.weight
    if loc.heap_gen != state.gen or loc.heap_weight != weight:
        loc.heap = _entries(state, None, loc.live_sids)
        loc.heap_gen, loc.heap_weight = state.gen, weight
    return loc.heap


def _context_heap(state: ClusterState, ctx: Context) -> list[int]:
    if ctx.heap_gen != state.gen or ctx.heap_weight != state.clock.weight:
        ctx.heap = _entries(state, ctx, ctx.stats)
        ctx.heap_gen, ctx.heap_weight = state.gen, state.clock.weight
    return ctx.heap


def _entries(state: ClusterState, key_ctx: Context | None, sids: Iterable[int]) -> list[int]:
    """A heap of the live servers among ``sids``, keyed by total load or by ``key_ctx``'s key."""
    if key_ctx is not None:
        heap = context_entries(state, key_ctx, sids)
        heapify(heap)
        return heap
    servers = state.servers
    weight = state.clock.weight
    draw = state.rng.getrandbits
    heap = []
    for sid in sids:
        server = servers[sid]
        if server is None or not server.live:
            continue
        heap.append((server.reported * weight + server.pending) << KEY_SHIFT | draw(32) << 32 | sid)
    heapify(heap)
    return heap


def _build_outside_heap(state: ClusterState, ctx: Context, key_ctx: Context | None, sids: Iterable[int]) -> None:
    ctx.outside = _entries(state, key_ctx, sids)
    ctx.outside_gen, ctx.outside_weight = state.gen, state.clock.weight
    if ctx.parent is not None and ctx not in ctx.parent.outside_children:
        ctx.parent.outside_children.append(ctx)
    cache = state.outside_cache
    cache.pop(id(ctx), None)
    cache[id(ctx)] = ctx
    if len(cache) > OUTSIDE_HEAPS_CACHED:
        evicted = cache.pop(next(iter(cache)))
        evicted.outside, evicted.outside_gen = [], -1
        if evicted.parent is not None and evicted in evicted.parent.outside_children:
            evicted.parent.outside_children.remove(evicted)
