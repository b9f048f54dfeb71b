"""The write-ahead logs' metrics, summed over every log of a server (no per-tablet series).

The appender threads count here, once per group commit, with ``prometheus_client``'s own
(locked, thread-safe) metrics; the segment gauge is read at scrape time from the logs open
now.
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry

__all__ = ["NullWalMetrics", "WalMetrics"]


class _Counts(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Observes(Protocol):
    def observe(self, amount: float) -> None: ...


class _CountsSegments(Protocol):
    """What the segment gauge reads of a log (a :class:`~nyala.wal.Log`)."""

    @property
    def segment_count(self) -> int: ...


FSYNC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class WalMetrics:
    """Appends, bytes, group sizes, sync latency, segments and GC of a server's logs."""

    appends: _Counts
    entries: _Counts
    written_bytes: _Counts
    group_size: _Observes
    fsync_latency: _Observes
    segments_gc: _Counts

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.appends = Counter(
            "nyala_wal_appends", "Append requests made durable (each holds one or more entries).", registry=registry
        )
        self.entries = Counter("nyala_wal_entries", "Log entries made durable.", registry=registry)
        self.written_bytes = Counter(
            "nyala_wal_written_bytes", "Bytes of entry batches written to WAL segments.", registry=registry
        )
        self.group_size = Histogram(
            "nyala_wal_group_commit_size_requests",
            "Append requests written and synced together by one group commit.",
            buckets=GROUP_BUCKETS,
            registry=registry,
        )
        self.fsync_latency = Histogram(
            "nyala_wal_fsync_duration_seconds",
            "Time of the fdatasync (or fsync) that makes one group commit durable.",
            buckets=FSYNC_BUCKETS_S,
            registry=registry,
        )
        self.segments_gc = Counter(
            "nyala_wal_gc_segments", "Closed WAL segments deleted because nothing needed them.", registry=registry
        )
        self._logs: weakref.WeakSet[_CountsSegments] = weakref.WeakSet()
        self._lock = threading.Lock()  # logs open on worker threads while a scrape iterates
        segments = Gauge("nyala_wal_segments", "WAL segment files of the open logs, the active ones included.",
                         registry=registry)  # fmt: skip
        segments.set_function(self._count_segments)

    def track(self, log: _CountsSegments) -> None:
        with self._lock:
            self._logs.add(log)

    def _count_segments(self) -> float:
        with self._lock:
            logs = list(self._logs)
        return float(sum(log.segment_count for log in logs))


class _Nothing:
    """Takes every count and observation and keeps none."""

    def inc(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


class NullWalMetrics(WalMetrics):
    """The WAL metrics of a server with metrics off: no lock taken, nothing kept or exported."""

    def __init__(self) -> None:  # no super().__init__: nothing is created or registered
        nothing = _Nothing()
        self.appends = self.entries = self.written_bytes = self.segments_gc = nothing
        self.group_size = self.fsync_latency = nothing

    def track(self, log: _CountsSegments) -> None:
        pass


_unexported: WalMetrics | None = None


def unexported() -> WalMetrics:
    """Metrics for logs opened without a server's: counted, never exported (one shared set)."""
    global _unexported
    if _unexported is None:
        _unexported = WalMetrics(None)
    return _unexported
