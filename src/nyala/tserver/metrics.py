"""The tablet server's own metrics: rows written and scanned, MemRowSets, flushes, copies.

Counts kept per server, never per tablet, so a server with 10,000 tablets exports as many
series as one with ten (the ``/tablets`` page shows each tablet's figures):

- rows written, by operation (``insert``, ``upsert``, ``update``, ``delete``; the ``_IGNORE``
  variants count as their base operation), counted by the leader that answered the write:
  the rows applied without error; rows refused (row errors) count apart;
- rows and bytes scanned (Arrow bytes sent in scan responses);
- gauges read when scraped: MemRowSet rows and bytes, replicas by state, open scanners,
  tablet copies in progress; bytes on disk is the sum :meth:`TabletServerMetrics.refresh_disk_bytes`
  last took, on a worker thread at every maintenance pass (two ``stat`` calls a tablet: 10,000
  tablets kept a scrape on the event loop for over 100 ms, measured);
- counters kept by other components, read when scraped: MemRowSet flushes (the store
  manager's), tablet copies as destination (:class:`~nyala.tserver.tablet_copy_client.CopyCounters`)
  and as source (:class:`~nyala.tserver.tablet_copy_source.TabletCopySourceManager`).

Counting runs on the event loop with the lock-free families of :mod:`nyala.metrics.loop`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from nyala.metrics import LoopMetrics
from nyala.metrics.loop import HistogramChild, _float_text
from nyala.proto import tserver_pb2 as tpb
from nyala.storage.store import DuckDBTabletStore
from nyala.tserver.tablet_copy_client import COPY_DURATION_BUCKETS_S, CopyCounters
from nyala.tserver.write_metrics import WriteMetrics

if TYPE_CHECKING:  # the tablet and copy-source modules import this one
    from nyala.tserver.tablet import TabletReplica
    from nyala.tserver.tablet_copy_source import TabletCopySourceManager

__all__ = ["TabletServerMetrics"]


class _CopyDurations(Collector):
    """The copy-duration histograms of :class:`CopyCounters`, by outcome."""

    def __init__(self, read: Callable[[], Sequence[tuple[str, HistogramChild]]], bounds: Sequence[float]) -> None:
        self._read = read
        self._bounds = tuple(bounds)

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(
            "nyala_tablet_copy_duration_seconds",
            "Time from a tablet copy's start (this server the destination) to its end, by outcome.",
            labels=["outcome"],
        )
        for outcome, child in self._read():
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip((*self._bounds, float("inf")), child.counts, strict=True):
                cumulative += count
                buckets.append((_float_text(bound), cumulative))
            family.add_metric([outcome], buckets, child.sum)
        yield family


class TabletServerMetrics:
    """Every tablet-server metric beyond RPC, Raft and WAL; :meth:`watch` says where to read."""

    def __init__(self, registry: CollectorRegistry | None = None, enabled: bool = True) -> None:
        self._set = metrics = LoopMetrics(enabled)
        self.writes = WriteMetrics(metrics)
        self.rows_scanned = metrics.counter(
            "nyala_tablet_rows_scanned_total", "Rows returned by scans of this server's replicas."
        ).child()
        self.bytes_scanned = metrics.counter(
            "nyala_tablet_scanned_bytes_total", "Bytes of row data (Arrow IPC) returned by scans."
        ).child()
        self._tablets: Callable[[], Sequence[TabletReplica]] = list
        self._flushes: Callable[[], int] = lambda: 0
        self._scanners_open: Callable[[], int] = lambda: 0
        self._scanners_expired: Callable[[], int] = lambda: 0
        self._copy: Callable[[], CopyCounters | None] = lambda: None
        self._source: Callable[[], TabletCopySourceManager | None] = lambda: None
        self._copies_in_progress: Callable[[], int] = lambda: 0
        metrics.gauge("nyala_tablets", "Tablet replicas on this server, by state.", self._by_state, ["state"])
        metrics.gauge(
            "nyala_tablet_memrowset_bytes",
            "Arrow bytes of the rows held in MemRowSets (not yet flushed to DuckDB), all tablets.",
            lambda: [((), float(sum(s.memrowset_bytes() for s in self._stores())))],
        )
        metrics.gauge(
            "nyala_tablet_memrowset_rows",
            "Rows held in MemRowSets, all tablets.",
            lambda: [((), float(sum(s.memrowset_rows() for s in self._stores())))],
        )
        #: Bytes on disk of every tablet at the last :meth:`refresh_disk_bytes`.
        self.disk_bytes = 0
        metrics.gauge(
            "nyala_tablet_on_disk_bytes",
            "Bytes of the tablets' DuckDB files and their DuckDB WALs (not the Raft WAL), all tablets, as of "
            "the last maintenance pass.",
            lambda: [((), float(self.disk_bytes))],
        )
        metrics.counter_callback(
            "nyala_tablet_flushes_total",
            "MemRowSets written to DuckDB (when full, and by maintenance when old).",
            lambda: [((), float(self._flushes()))],
        )
        metrics.gauge("nyala_scanners_open", "Open scanners.", lambda: [((), float(self._scanners_open()))])
        metrics.counter_callback(
            "nyala_scanners_expired_total",
            "Scanners closed because their client went idle for longer than the scanner TTL.",
            lambda: [((), float(self._scanners_expired()))],
        )
        metrics.counter_callback(
            "nyala_tablet_copies_total",
            "Tablet copies into this server, by outcome: started, completed (installed), failed.",
            self._copies,
            ["outcome"],
        )
        metrics.gauge(
            "nyala_tablet_copies_in_progress",
            "Tablet copies into this server running now.",
            lambda: [((), float(self._copies_in_progress()))],
        )
        metrics.counter_callback(
            "nyala_tablet_copy_fetched_bytes_total",
            "Bytes fetched by tablet copies into this server, from a source in the same location or another.",
            self._fetched,
            ["scope"],
        )
        metrics.counter_callback(
            "nyala_tablet_copy_source_sessions_total",
            "Tablet copy sessions this server began as the source.",
            lambda: [((), float(source.sessions_started if (source := self._source()) else 0))],
        )
        metrics.gauge(
            "nyala_tablet_copy_source_sessions",
            "Tablet copy sessions open on this server as the source.",
            lambda: [((), float(len(source.sessions()) if (source := self._source()) else 0))],
        )
        metrics.counter_callback(
            "nyala_tablet_copy_served_bytes_total",
            "Bytes this server sent as a tablet copy source.",
            lambda: [((), float(source.bytes_served if (source := self._source()) else 0))],
        )
        metrics.register_on(registry)
        if registry is not None and enabled:
            registry.register(_CopyDurations(self._copy_durations, COPY_DURATION_BUCKETS_S))

    def watch(
        self,
        *,
        tablets: Callable[[], Sequence[TabletReplica]],
        flushes: Callable[[], int],
        scanners_open: Callable[[], int],
        scanners_expired: Callable[[], int],
        copy_counters: Callable[[], CopyCounters | None],
        copy_source: Callable[[], TabletCopySourceManager | None],
        copies_in_progress: Callable[[], int],
    ) -> None:
        """Where the scrape-time values are read (the server's components, once built)."""
        self._tablets = tablets
        self._flushes = flushes
        self._scanners_open = scanners_open
        self._scanners_expired = scanners_expired
        self._copy = copy_counters
        self._source = copy_source
        self._copies_in_progress = copies_in_progress

    async def refresh_disk_bytes(self) -> None:
        """Sum the tablets' file sizes on a worker thread (the list of stores is taken here, on the loop)."""
        stores = self._stores()
        self.disk_bytes = await asyncio.to_thread(lambda: sum(s.file_size_bytes() for s in stores))

    def _stores(self) -> list[DuckDBTabletStore]:
        return [t.store for t in self._tablets() if t.store is not None]

    def _by_state(self) -> list[tuple[Sequence[str], float]]:
        counts = Counter(int(t.state) for t in self._tablets())
        return [((str(tpb.TabletStatePB.Name(state)),), float(counts.get(state, 0)))
                for state in tpb.TabletStatePB.values()]  # fmt: skip

    def _copies(self) -> list[tuple[Sequence[str], float]]:
        c = self._copy()
        if c is None:
            return []
        return [(("started",), float(c.started)), (("completed",), float(c.completed)), (("failed",), float(c.failed))]

    def _fetched(self) -> list[tuple[Sequence[str], float]]:
        c = self._copy()
        if c is None:
            return []
        return [(("within_location",), float(c.bytes_within_location)),
                (("across_locations",), float(c.bytes_across_locations))]  # fmt: skip

    def _copy_durations(self) -> list[tuple[str, HistogramChild]]:
        c = self._copy()
        if c is None:
            return []
        return [("installed", c.installed_s), ("failed", c.failed_s)]
