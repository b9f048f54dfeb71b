"""The master's view of the cluster that placement works from.

``ClusterState`` holds tablet servers (uuid, location, live or not) and, per server, the
replicas they host, counted three ways: in total, per table and per range (a range is
``(table_id, range start key)``; every hash bucket of one range partition shares it).  Each
count has two parts: *reported* replicas, fed by the master as tablet servers report them, and
*pending* replicas, recorded when the master places one and decaying with a half-life
(see :mod:`nyala.placement.decay`).

The per-table and per-range counts live in *contexts*, one per (table, location) and
(range, location), holding only the servers that have a non-zero count there.  That keeps
them small and is what the indexed ranking in :mod:`nyala.placement.ranking` relies on: a
server absent from a context has count zero in it.

Every mutation is incremental (no rescans of the cluster).  Operations that can lower a load
(removing a replica, a server going down or moving, the decay epoch moving) bump a generation
number, which tells the indexes to rebuild themselves lazily the next time they are used.

The state owns its ranking index: the heaps live in its contexts and locations, and the
layout of a heap entry, the packed key of a context member (:func:`context_key`) and the
upkeep a growing load needs (:func:`push_member`) are defined here, so a mutation keeps the
index current without calling up into the code that searches it.  That search is
:mod:`nyala.placement.ranking`, and placing a tablet is :mod:`nyala.placement.placer`; both
take a ``ClusterState``, which knows neither.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from heapq import heappush
from typing import TYPE_CHECKING, Final

from nyala.errors import AlreadyPresent, InvalidArgument, NotFound
from nyala.placement.decay import DecayClock
from nyala.placement.location import validate_location
from nyala.placement.options import PlacementOptions
from nyala.placement.tally import ONE_REPORTED, PENDING_MASK, REPORTED_SHIFT, reported_of, scaled_load

if TYPE_CHECKING:
    from random import Random

__all__ = [
    "KEY_SHIFT",
    "LOAD_BITS",
    "SID_MASK",
    "ClusterState",
    "RangeKey",
    "TServerInfo",
    "context_entries",
    "context_key",
    "key_growth",
    "push_member",
]

RangeKey = tuple[str, bytes]
"""A range: (table id, range start key)."""

#: Bits of each load packed in a key (most significant first); see :func:`context_key`.
LOAD_BITS: Final = 128
#: A heap entry is ``key << KEY_SHIFT | tie_breaker << 32 | sid``.
KEY_SHIFT: Final = 64
SID_MASK: Final = (1 << 32) - 1


class Context:
    """The servers of one location with a non-zero count for one table or one range."""

    __slots__ = (
        "count_gen",
        "heap",
        "heap_gen",
        "heap_weight",
        "live_members",
        "outside",
        "outside_children",
        "outside_gen",
        "outside_weight",
        "parent",
        "stats",
    )

    def __init__(self, parent: Context | None = None) -> None:
        self.parent = parent  # a range's context points at its table's context in the same location
        self.stats: dict[int, int] = {}  # sid -> packed tally, see REPORTED_SHIFT
        self.live_members = 0
        self.count_gen = -1
        # Index of the members (see nyala.placement.ranking), valid for one generation and weight.
        self.heap: list[int] = []
        self.heap_gen = -1
        self.heap_weight = -1
        # Index of the non-members (servers of the location, or members of the parent), built on demand.
        self.outside: list[int] = []
        self.outside_gen = -1
        self.outside_weight = -1
        self.outside_children: list[Context] = []  # ranges of this table that hold an outside index


class Server:
    __slots__ = ("live", "location", "pending", "reported", "sid", "uuid")

    def __init__(self, sid: int, uuid: str, location: str, live: bool) -> None:
        self.sid = sid
        self.uuid = uuid
        self.location = location
        self.live = live
        self.reported = 0
        self.pending = 0


class Location:
    __slots__ = (
        "heap",
        "heap_gen",
        "heap_weight",
        "live_sids",
        "name",
        "pending",
        "ranges",
        "reported",
        "sids",
        "tables",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.sids: set[int] = set()
        self.live_sids: set[int] = set()
        self.reported = 0  # reported replicas on live servers
        self.pending = 0  # scaled pending sum on live servers
        self.tables: dict[str, Context] = {}
        self.ranges: dict[str, dict[bytes, Context]] = {}
        self.heap: list[int] = []
        self.heap_gen = -1
        self.heap_weight = -1


@dataclasses.dataclass(frozen=True, slots=True)
class TServerInfo:
    """What placement knows about one tablet server."""

    uuid: str
    location: str
    live: bool
    reported_replicas: int
    pending_replicas: float


class ClusterState:
    """Tablet servers, their replica counts and pending placements; the input of every placement.

    The master registers servers, feeds reported replicas as they come and go, and asks for
    placements with :func:`nyala.placement.placer.place_new_tablet` and
    :func:`~nyala.placement.placer.place_replacement`, passing the state and its monotonic
    clock as ``now_s``.  ``rng`` breaks ties; seed it for reproducible placements.
    """

    def __init__(self, rng: Random, options: PlacementOptions | None = None) -> None:
        self.options = options or PlacementOptions()
        self.rng = rng
        self.clock = DecayClock(self.options)
        self.gen = 0
        self.servers: list[Server | None] = []
        self.by_uuid: dict[str, Server] = {}
        self.locations: dict[str, Location] = {}
        self._free_sids: list[int] = []
        self._live_per_location: dict[str, int] = {}
        self._live_per_location_gen = -1
        self._live_servers = 0
        self.location_heap: list[tuple[float, int, str]] = []  # see nyala.placement.location_choice
        self.location_heap_gen = -1
        self.location_heap_weight = -1
        self.outside_cache: dict[int, Context] = {}  # FIFO of contexts holding an outside index

    # ----------------------------------------------------------------- servers

    def register_tserver(self, uuid: str, location: str, *, live: bool = True) -> None:
        """Add a tablet server, or update its location and liveness when it re-registers."""
        _check_name("tablet server uuid", uuid)
        validate_location(location)
        server = self.by_uuid.get(uuid)
        if server is None:
            sid = self._free_sids.pop() if self._free_sids else len(self.servers)
            server = Server(sid, uuid, location, live=False)
            if sid == len(self.servers):
                self.servers.append(server)
            else:
                self.servers[sid] = server
            self.by_uuid[uuid] = server
            self._location(location).sids.add(sid)
            self.gen += 1
        elif server.location != location:
            self._move_server(server, location)
        self.set_tserver_live(uuid, live)

    def set_tserver_live(self, uuid: str, live: bool) -> None:
        """Mark a server live (it heartbeats) or dead; dead servers receive no replicas."""
        server = self._server(uuid)
        if server.live == live:
            return
        loc = self.locations[server.location]
        sign = 1 if live else -1
        server.live = live
        loc.reported += sign * server.reported
        loc.pending += sign * server.pending
        if live:
            loc.live_sids.add(server.sid)
        else:
            loc.live_sids.discard(server.sid)
        self.gen += 1

    def remove_tserver(self, uuid: str) -> None:
        """Forget a server and every replica counted on it."""
        server = self._server(uuid)
        self.set_tserver_live(uuid, False)
        loc = self.locations[server.location]
        self._take_stats(server.sid, loc)
        loc.sids.discard(server.sid)
        if not loc.sids:
            del self.locations[loc.name]
        del self.by_uuid[uuid]
        self.servers[server.sid] = None
        self._free_sids.append(server.sid)
        self.gen += 1

    def _move_server(self, server: Server, new_location: str) -> None:
        """Re-registration under a new location: carry the server's counts over."""
        validate_location(new_location)
        was_live = server.live
        self.set_tserver_live(server.uuid, False)
        old = self.locations[server.location]
        moved = self._take_stats(server.sid, old)
        old.sids.discard(server.sid)
        if not old.sids:
            del self.locations[old.name]
        server.location = new_location
        new = self._location(new_location)
        new.sids.add(server.sid)
        for table, range_key, tally in moved:
            if range_key is None:
                new.tables.setdefault(table, Context()).stats[server.sid] = tally
            else:
                ranges = new.ranges.setdefault(table, {})
                ranges.setdefault(range_key, Context(new.tables[table])).stats[server.sid] = tally
        self.set_tserver_live(server.uuid, was_live)
        self.gen += 1

    def _take_stats(self, sid: int, loc: Location) -> list[tuple[str, bytes | None, int]]:
        """Remove a server from every context of its location, returning what it had."""
        taken: list[tuple[str, bytes | None, int]] = []
        for table, ctx in list(loc.tables.items()):
            tally = ctx.stats.pop(sid, None)
            if tally is None:
                continue
            taken.append((table, None, tally))
            ranges = loc.ranges[table]
            for range_key, rctx in list(ranges.items()):
                rtally = rctx.stats.pop(sid, None)
                if rtally is not None:
                    taken.append((table, range_key, rtally))
                    if not rctx.stats:
                        del ranges[range_key]
            if not ctx.stats:
                del loc.tables[table]
                del loc.ranges[table]
        return taken

    # ----------------------------------------------------------------- replicas

    def add_replica(self, table_id: str, range_key: bytes, tserver_uuid: str) -> None:
        """Count a replica that a tablet server reports hosting."""
        _check_range(table_id, range_key)
        server = self._server(tserver_uuid)
        loc = self.locations[server.location]
        server.reported += 1
        if server.live:
            loc.reported += 1
        self._bump(loc, table_id, range_key, server, 1)

    def remove_replica(self, table_id: str, range_key: bytes, tserver_uuid: str) -> None:
        """Stop counting a replica (deleted, moved away, or no longer reported)."""
        _check_range(table_id, range_key)
        server = self._server(tserver_uuid)
        loc = self.locations[server.location]
        rctx = loc.ranges.get(table_id, {}).get(range_key)
        tally = rctx.stats.get(server.sid) if rctx else None
        if rctx is None or tally is None or reported_of(tally) == 0:
            raise NotFound(f"tablet server {tserver_uuid} has no replica of table {table_id!r} range {range_key!r}")
        server.reported -= 1
        if server.live:
            loc.reported -= 1
        tctx = loc.tables[table_id]
        for ctx in (rctx, tctx):
            left = ctx.stats[server.sid] - ONE_REPORTED
            if left:
                ctx.stats[server.sid] = left
            else:
                del ctx.stats[server.sid]
        if not rctx.stats:
            del loc.ranges[table_id][range_key]
        if not tctx.stats:
            del loc.tables[table_id]
            del loc.ranges[table_id]
        self.gen += 1

    def remove_table(self, table_id: str) -> None:
        """Stop counting every reported replica of a deleted table (its pending weight keeps decaying)."""
        _check_name("table id", table_id)
        for loc in self.locations.values():
            ctx = loc.tables.pop(table_id, None)
            loc.ranges.pop(table_id, None)
            if ctx is None:
                continue
            for sid, tally in ctx.stats.items():
                server = self.servers[sid]
                assert server is not None
                server.reported -= reported_of(tally)
                if server.live:
                    loc.reported -= reported_of(tally)
        self.gen += 1

    def contexts(self, loc: Location, table_id: str, range_key: bytes) -> tuple[Context, Context]:
        """The table's and the range's contexts in ``loc``, created empty when missing."""
        tctx = loc.tables.get(table_id)
        if tctx is None:
            tctx = loc.tables[table_id] = Context()
            ranges = loc.ranges[table_id] = {}
        else:
            ranges = loc.ranges[table_id]
        rctx = ranges.get(range_key)
        if rctx is None:
            rctx = ranges[range_key] = Context(tctx)
        return tctx, rctx

    def record_pending(self, loc: Location, tctx: Context, rctx: Context, server: Server) -> None:
        """Count a replica just placed on ``server`` (in ``loc``) as pending, at the current weight."""
        weight = self.clock.weight
        server.pending += weight
        if server.live:
            loc.pending += weight
        sid = server.sid
        gen = self.gen
        for ctx in (tctx, rctx):  # _count, inlined: this is the hot path of every placement
            stats = ctx.stats
            tally = stats.get(sid)
            if tally is not None:
                stats[sid] = tally + weight
                continue
            stats[sid] = weight
            if server.live:
                if ctx.count_gen == gen:
                    ctx.live_members += 1
                if ctx.heap_gen == gen or ctx.outside_children:
                    push_member(self, ctx, sid)

    def _bump(self, loc: Location, table_id: str, range_key: bytes, server: Server, reported: int) -> None:
        tctx, rctx = self.contexts(loc, table_id, range_key)
        self._count(tctx, server, reported, 0)
        self._count(rctx, server, reported, 0)

    def _count(self, ctx: Context, server: Server, reported: int, pending: int) -> None:
        """Raise a server's count in a context; loads only grow, so the indexes stay valid."""
        tally = ctx.stats.get(server.sid)
        added = reported * ONE_REPORTED + pending
        if tally is not None:
            ctx.stats[server.sid] = tally + added
            return
        ctx.stats[server.sid] = added
        if server.live:
            # Keep the member count and the indexes current instead of rebuilding them.
            if ctx.count_gen == self.gen:
                ctx.live_members += 1
            if ctx.heap_gen == self.gen or ctx.outside_children:
                push_member(self, ctx, server.sid)

    # ----------------------------------------------------------------- time

    def advance_clock(self, now_s: float) -> None:
        """Move the decay clock to ``now_s`` (monotonic seconds), rebasing stored sums when due."""
        shift = self.clock.advance(now_s)
        if shift:
            self._rebase(shift)

    def _rebase(self, shift: int) -> None:
        for server in self.servers:
            if server is not None:
                server.pending >>= shift
        for loc in self.locations.values():
            loc.pending = sum(s.pending for sid in loc.live_sids if (s := self.servers[sid]) is not None)
            for table in list(loc.tables):
                for range_key in list(loc.ranges[table]):
                    if not _shift_context(loc.ranges[table][range_key], shift):
                        del loc.ranges[table][range_key]
                if not _shift_context(loc.tables[table], shift):
                    del loc.tables[table]
                    del loc.ranges[table]
        self.gen += 1

    # ----------------------------------------------------------------- queries

    def tserver(self, uuid: str) -> TServerInfo:
        server = self._server(uuid)
        return TServerInfo(
            server.uuid, server.location, server.live, server.reported, self.clock.decayed(server.pending)
        )

    def tservers(self) -> list[TServerInfo]:
        return [self.tserver(uuid) for uuid in sorted(self.by_uuid)]

    def servers_per_location(self, *, live_only: bool = False) -> dict[str, int]:
        """Every location with a registered server, and how many (live) servers it has."""
        return {
            name: len(loc.live_sids) if live_only else len(loc.sids) for name, loc in sorted(self.locations.items())
        }

    def live_servers_per_location(self) -> dict[str, int]:
        """The locations the policy counts, with their live servers (do not mutate).

        These are the locations with at least one live server: the rule of
        :func:`nyala.placement.policy.policy_locations`, kept incrementally.
        """
        if self._live_per_location_gen != self.gen:
            self._live_per_location = {
                name: len(loc.live_sids) for name, loc in self.locations.items() if loc.live_sids
            }
            self._live_servers = sum(self._live_per_location.values())
            self._live_per_location_gen = self.gen
        return self._live_per_location

    @property
    def live_servers(self) -> int:
        """How many tablet servers are live."""
        self.live_servers_per_location()
        return self._live_servers

    def replica_counts(self, uuid: str, table_id: str, range_key: bytes) -> tuple[float, float, float]:
        """The ranking triple of a server for a range: (range, table, total) replicas incl. decayed pending."""
        server = self._server(uuid)
        loc = self.locations[server.location]
        weight = self.clock.weight
        tctx = loc.tables.get(table_id)
        rctx = loc.ranges.get(table_id, {}).get(range_key)
        return (
            _scaled(rctx, server.sid, weight) / weight,
            _scaled(tctx, server.sid, weight) / weight,
            (server.reported * weight + server.pending) / weight,
        )

    # ----------------------------------------------------------------- helpers

    def _server(self, uuid: str) -> Server:
        server = self.by_uuid.get(uuid)
        if server is None:
            raise NotFound(f"unknown tablet server {uuid!r}")
        return server

    def _location(self, name: str) -> Location:
        loc = self.locations.get(name)
        if loc is None:
            loc = self.locations[name] = Location(name)
        return loc

    def sids_of(self, uuids: Iterable[str]) -> list[int]:
        sids = []
        seen: set[str] = set()
        for uuid in uuids:
            if uuid in seen:
                raise AlreadyPresent(f"tablet server {uuid!r} is listed twice among the replicas")
            seen.add(uuid)
            sids.append(self._server(uuid).sid)
        return sids


# ----------------------------------------------------------------- the ranking index


def context_key(state: ClusterState, ctx: Context, sid: int) -> int:
    """A member's current key, packed: (table, total) for a table context, (range, table, total) for a range."""
    weight = state.clock.weight
    server = state.servers[sid]
    assert server is not None
    tally = ctx.stats[sid]
    key = ((tally >> REPORTED_SHIFT) * weight + (tally & PENDING_MASK)) << LOAD_BITS
    parent = ctx.parent
    if parent is not None:
        table = parent.stats[sid]
        key = (key | ((table >> REPORTED_SHIFT) * weight + (table & PENDING_MASK))) << LOAD_BITS
    return key | (server.reported * weight + server.pending)


def key_growth(ctx: Context | None, weight: int) -> int:
    """How much a server's key grows when one pending replica is recorded on it at ``weight``.

    ``ctx`` None is a key of the total load alone; a table context's key also holds the table's
    count, a range context's the range's too: each field grows by ``weight``.
    """
    if ctx is None:
        return weight
    if ctx.parent is None:
        return (weight << LOAD_BITS) + weight
    return (weight << (2 * LOAD_BITS)) + (weight << LOAD_BITS) + weight


def context_entries(state: ClusterState, ctx: Context, sids: Iterable[int]) -> list[int]:
    """Heap entries (unordered) of the live servers among ``sids``, keyed as :func:`context_key` does.

    The same packing as :func:`context_key`, in one loop: building an index is the other hot
    path of a placement (a range's index is built once per range and location, and again after
    every change of the decay weight).
    """
    weight = state.clock.weight
    servers = state.servers
    draw = state.rng.getrandbits
    stats = ctx.stats
    parent = None if ctx.parent is None else ctx.parent.stats
    entries: list[int] = []
    for sid in sids:
        server = servers[sid]
        if server is None or not server.live:
            continue
        tally = stats[sid]
        key = ((tally >> REPORTED_SHIFT) * weight + (tally & PENDING_MASK)) << LOAD_BITS
        if parent is not None:
            table = parent[sid]
            key = (key | ((table >> REPORTED_SHIFT) * weight + (table & PENDING_MASK))) << LOAD_BITS
        key |= server.reported * weight + server.pending
        entries.append(key << KEY_SHIFT | draw(32) << 32 | sid)
    return entries


def unpack_key(key: int, fields: int) -> tuple[int, ...]:
    """The loads packed in a key, most significant first (for tests and debugging)."""
    mask = (1 << LOAD_BITS) - 1
    return tuple((key >> (LOAD_BITS * i)) & mask for i in reversed(range(fields)))


def push_member(state: ClusterState, ctx: Context, sid: int) -> None:
    """Index a live server that just joined a context, in every heap that must list it."""
    weight = state.clock.weight
    if ctx.heap_gen == state.gen and ctx.heap_weight == weight:
        heappush(ctx.heap, context_key(state, ctx, sid) << KEY_SHIFT | state.rng.getrandbits(32) << 32 | sid)
    if ctx.outside_children:
        # A new table member lies outside every range of the table it does not hold (case 2).
        current = [c for c in ctx.outside_children if c.outside_gen == state.gen and c.outside_weight == weight]
        ctx.outside_children = current
        for child in current:
            if sid not in child.stats:
                entry = context_key(state, ctx, sid) << KEY_SHIFT | state.rng.getrandbits(32) << 32 | sid
                heappush(child.outside, entry)


def _scaled(ctx: Context | None, sid: int, weight: int) -> int:
    tally = ctx.stats.get(sid) if ctx else None
    return scaled_load(tally, weight) if tally else 0


def _shift_context(ctx: Context, shift: int) -> bool:
    """Decay a context's pending sums by ``shift`` half-lives; drop members left at zero."""
    for sid, tally in list(ctx.stats.items()):
        decayed = (tally & ~PENDING_MASK) | ((tally & PENDING_MASK) >> shift)
        if decayed:
            ctx.stats[sid] = decayed
        else:
            del ctx.stats[sid]
    return bool(ctx.stats)


def _check_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string, got {value!r}")


def _check_range(table_id: object, range_key: object) -> None:
    _check_name("table id", table_id)
    if not isinstance(range_key, bytes):
        raise InvalidArgument(f"range start key must be bytes, got {type(range_key).__name__}")
