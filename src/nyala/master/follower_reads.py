"""Follower masters serve catalog reads within a staleness bound (Kudu's KUDU-500).

Every master keeps a :class:`FollowerCatalog`: a :class:`~nyala.catalog.CatalogState` loaded
from the sys catalog when it opens and then folded with every catalog write as the write is
applied, never with tablet reports.  So it holds exactly what the catalog holds: tables,
tablets, each tablet's committed Raft config and the leader last persisted for it (the leader
master writes a tablet's new leader when its report shows one, so a follower's locations name
leaders too).  Tablet servers heartbeat to every master, so a follower knows their addresses.

A request with ``max_staleness_ms = N > 0`` may be answered from this view when the master can
prove its view is no older than N ms.  The proof (:class:`Freshness`): each message of the
current leader carries the leader's commit index C (AppendEntries' commit index, a heartbeat's
``leader_commit``), so when it arrives at time t everything acknowledged before t is at or
below C.  Once this master has applied C, its view is at least as new as the leader's was at
t; the view's staleness is ``now - t`` for the latest such t.  A leader whose own NO_OP has not
committed yet may know a commit index lower than what its predecessor committed, so its
messages count only when the entry at C is of the leader's own term (checked by the Raft
replica).  Times are this master's monotonic clock at receipt; the message's time in flight is
not counted (sub-millisecond between hosts of one cluster; a follower whose process was
suspended while the leader's message waited in its socket would overstate its freshness by as
long as it was suspended).

When the bound cannot be met, the follower refuses with NotTheLeader naming the leader, and
the client goes there.  The ready leader always answers from its own view (always current).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from nyala.catalog import CatalogState, TableInfo, TabletInfo
from nyala.errors import NotTheLeader, ServiceUnavailable
from nyala.proto import master_pb2 as mpb

__all__ = ["FollowerCatalog", "FollowerView", "Freshness", "create_done"]

#: Receipt points kept while this master's apply lags; beyond this the oldest are dropped (the
#: freshness proof only gets more conservative).
_MAX_POINTS = 256


class Freshness:
    """Since when this master's applied catalog is provably as new as the leader's (pure)."""

    def __init__(self, max_points: int = _MAX_POINTS) -> None:
        self._max_points = max_points
        # (received at, leader's commit index) not yet covered by what this master applied; both
        # ascend (a leader's commit index only grows, and so does the committed prefix).
        self._points: deque[tuple[float, int]] = deque()
        self._fresh_at: float | None = None
        self._applied = 0

    @property
    def fresh_at(self) -> float | None:
        """The receipt time of the latest leader message whose commit index is applied here."""
        return self._fresh_at

    def heard_from_leader(self, now: float, leader_commit: int) -> None:
        """A message of the current leader arrived at ``now``: it had committed ``leader_commit``."""
        if leader_commit <= self._applied:
            self._fresh_at = now
            self._points.clear()
            return
        while self._points and self._points[-1][1] >= leader_commit:
            self._points.pop()  # an older point that asks as much or more is dominated by this one
        self._points.append((now, leader_commit))
        if len(self._points) > self._max_points:
            self._points.popleft()

    def applied(self, index: int) -> None:
        """This master's catalog now holds every entry up to ``index``."""
        self._applied = max(self._applied, index)
        while self._points and self._points[0][1] <= self._applied:
            self._fresh_at = self._points.popleft()[0]

    def staleness_s(self, now: float) -> float | None:
        """How old the applied catalog may be at ``now``; None before any proof."""
        return None if self._fresh_at is None else max(0.0, now - self._fresh_at)


def create_done(catalog: CatalogState, table: TableInfo) -> bool:
    """Every live tablet of the table is RUNNING (its replicas reported a leader)."""
    return all(t.running for t in catalog.tablets_of(table.table_id))


class FollowerCatalog:
    """The catalog as this master applied it, and the proof of how stale it may be."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.catalog: CatalogState | None = None
        self.freshness = Freshness()
        self._applied_index: Callable[[], int] = lambda: 0

    # -- fed by the sys catalog -----------------------------------------------------------

    def open(self, catalog: CatalogState) -> None:
        """Start from the stored catalog (before the Raft replica applies anything after it)."""
        self.catalog = catalog

    def attach(self, applied_index: Callable[[], int]) -> None:
        """``applied_index`` is the Raft replica's applied index, which never runs ahead of the
        writes handed to :meth:`writes_applied` (they are handed over before it moves)."""
        self._applied_index = applied_index

    def writes_applied(self, writes: Iterable[mpb.CatalogWritePB]) -> None:
        """Fold writes the sys catalog just applied (in log order, on the event loop)."""
        if self.catalog is None:
            return
        for write in writes:
            self.catalog.apply(write)

    def heard_from_leader(self, leader_commit: int) -> None:
        self.freshness.applied(self._applied_index())
        self.freshness.heard_from_leader(self.clock(), leader_commit)

    # -- serving -----------------------------------------------------------------------------

    def staleness_ms(self) -> float | None:
        """How old this master's catalog may be now, in ms (None: unknown)."""
        if self.catalog is None:
            return None
        self.freshness.applied(self._applied_index())
        staleness = self.freshness.staleness_s(self.clock())
        return None if staleness is None else staleness * 1000

    def view(self, max_staleness_ms: int, leader_hint: str) -> FollowerView:
        """The view to answer a read bounded by ``max_staleness_ms``; NotTheLeader when it is not
        provably that fresh (the hint names the leader master)."""
        catalog = self.catalog
        if catalog is None:
            raise ServiceUnavailable("the sys catalog is not open yet: this master is still starting")
        staleness = self.staleness_ms()
        where = f"the leader is {leader_hint}" if leader_hint else "no leader is known yet"
        if staleness is None:
            raise NotTheLeader(
                f"this master is not the leader and cannot prove how fresh its catalog is; {where}", leader_hint
            )
        if staleness > max_staleness_ms:
            raise NotTheLeader(
                f"this master's catalog may be {staleness:.0f} ms old, more than the {max_staleness_ms} ms "
                f"the request allows (it last heard from the leader that long ago); {where}",
                leader_hint,
            )
        return FollowerView(catalog)


class FollowerView:
    """What a follower answers from: the applied catalog, leaders as persisted in it."""

    def __init__(self, catalog: CatalogState) -> None:
        self.catalog = catalog

    def leader_of(self, tablet: TabletInfo) -> str:
        return tablet.leader_uuid

    def create_done(self, table: TableInfo) -> bool:
        return create_done(self.catalog, table)
