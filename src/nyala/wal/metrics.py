"""The write-ahead logs' metrics, summed over every log of a server (no per-tablet series).

Each open log counts into its own :class:`WalTally`: plain integers and lock-free histogram
series that only the log's committer (one thread at a time) updates, once per group commit.
:class:`WalMetrics`, the server's collector, sums the tallies of the open logs and of the
logs closed since the server started when the registry is scraped; a log folds its tally
into that retired total when it closes, so the counters never go down.  ``prometheus_client``'s
own metrics took a lock per update (about 12 us of the group commit's thread per group, five
updates, measured); the tallies take none.  The segment gauge is read at scrape time from
the logs open now.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from nyala.metrics.loop import HistogramChild, NullHistogramChild, _float_text

__all__ = ["FSYNC_BUCKETS_S", "GROUP_BUCKETS", "WalMetrics", "WalTally"]


class _CountsSegments(Protocol):
    """What the segment gauge reads of a log (a :class:`~nyala.wal.Log`)."""

    @property
    def segment_count(self) -> int: ...


FSYNC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class WalTally:
    """One log's counts; only its committer updates them (and GC, ``gc_segments``)."""

    __slots__ = ("__weakref__", "appends", "entries", "fsync", "gc_segments", "group_size", "written_bytes")

    def __init__(self, enabled: bool = True) -> None:
        self.appends = 0  # append requests made durable
        self.entries = 0  # log entries made durable
        self.written_bytes = 0
        self.gc_segments = 0
        histogram = HistogramChild if enabled else NullHistogramChild
        self.group_size = histogram([float(b) for b in GROUP_BUCKETS])
        self.fsync = histogram(FSYNC_BUCKETS_S)

    def add(self, other: WalTally) -> None:
        self.appends += other.appends
        self.entries += other.entries
        self.written_bytes += other.written_bytes
        self.gc_segments += other.gc_segments
        for mine, theirs in ((self.group_size, other.group_size), (self.fsync, other.fsync)):
            mine.sum += theirs.sum
            for i, count in enumerate(theirs.counts):
                mine.counts[i] += count


class WalMetrics(Collector):
    """Appends, bytes, group sizes, sync latency, segments and GC of a server's logs.

    ``enabled=False`` (a server with metrics off): histograms record nothing and nothing is
    exported.
    """

    def __init__(self, registry: CollectorRegistry | None = None, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()  # logs open and close on worker threads while a scrape sums
        self._logs: weakref.WeakSet[_CountsSegments] = weakref.WeakSet()
        self._tallies: weakref.WeakSet[WalTally] = weakref.WeakSet()
        self._retired = WalTally()
        if registry is not None and enabled:
            registry.register(self)

    def tally(self) -> WalTally:
        """A new log's tally, summed into every scrape until :meth:`retire`."""
        tally = WalTally(self.enabled)
        with self._lock:
            self._tallies.add(tally)
        return tally

    def retire(self, tally: WalTally) -> None:
        """A log closed: keep its counts in the total, stop reading its tally."""
        with self._lock:
            if tally in self._tallies:
                self._tallies.discard(tally)
                self._retired.add(tally)

    def track(self, log: _CountsSegments) -> None:
        with self._lock:
            self._logs.add(log)

    def totals(self) -> WalTally:
        """Every log's counts, the closed ones' included."""
        total = WalTally()
        with self._lock:
            tallies = [self._retired, *self._tallies]
        for tally in tallies:
            total.add(tally)
        return total

    def segments(self) -> int:
        with self._lock:
            logs = list(self._logs)
        return sum(log.segment_count for log in logs)

    def collect(self) -> Iterator[Metric]:
        total = self.totals()
        for name, documentation, value in (
            ("nyala_wal_appends", "Append requests made durable (each holds one or more entries).", total.appends),
            ("nyala_wal_entries", "Log entries made durable.", total.entries),
            ("nyala_wal_written_bytes", "Bytes of entry batches written to WAL segments.", total.written_bytes),
            ("nyala_wal_gc_segments", "Closed WAL segments deleted because nothing needed them.", total.gc_segments),
        ):
            counter = CounterMetricFamily(name, documentation)
            counter.add_metric([], value)
            yield counter
        yield _histogram(
            "nyala_wal_group_commit_size_requests",
            "Append requests written and synced together by one group commit.",
            GROUP_BUCKETS,
            total.group_size,
        )
        yield _histogram(
            "nyala_wal_fsync_duration_seconds",
            "Time of the fdatasync (or fsync) that makes one group commit durable.",
            FSYNC_BUCKETS_S,
            total.fsync,
        )
        segments = GaugeMetricFamily(
            "nyala_wal_segments", "WAL segment files of the open logs, the active ones included."
        )
        segments.add_metric([], float(self.segments()))
        yield segments

    def describe(self) -> Iterator[Metric]:
        # Names only: registration checks them for clashes without reading any log.
        for name in ("nyala_wal_appends", "nyala_wal_entries", "nyala_wal_written_bytes", "nyala_wal_gc_segments"):
            yield CounterMetricFamily(name, "")
        yield HistogramMetricFamily("nyala_wal_group_commit_size_requests", "")
        yield HistogramMetricFamily("nyala_wal_fsync_duration_seconds", "")
        yield GaugeMetricFamily("nyala_wal_segments", "")


def _histogram(name: str, documentation: str, bounds: Sequence[float], child: HistogramChild) -> Metric:
    family = HistogramMetricFamily(name, documentation)
    cumulative = 0
    buckets: list[tuple[str, float]] = []
    for bound, count in zip((*bounds, float("inf")), child.counts, strict=True):
        cumulative += count
        buckets.append((_float_text(float(bound)), cumulative))
    family.add_metric([], buckets, child.sum)
    return family


_unexported: WalMetrics | None = None


def unexported() -> WalMetrics:
    """Metrics for logs opened without a server's: counted, never exported (one shared set)."""
    global _unexported
    if _unexported is None:
        _unexported = WalMetrics(None)
    return _unexported
