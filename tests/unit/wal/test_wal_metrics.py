"""The WAL's metrics: per-log tallies summed at scrape time, kept when a log closes."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from nyala.wal import Log
from nyala.wal.metrics import WalMetrics
from tests.unit.wal.helpers import fill
from tests.unit.web.test_metrics import samples


def test_group_commits_count_and_the_counts_survive_the_log_closing(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = WalMetrics(registry)
    log = Log.open(tmp_path / "a", "a" * 32, metrics=metrics)
    other = Log.open(tmp_path / "b", "b" * 32, metrics=metrics)
    try:
        fill(log, 1, 10)
        fill(other, 1, 5)
        got = samples(registry)
        assert got[("nyala_wal_entries_total", ())] == 15
        assert got[("nyala_wal_appends_total", ())] == 15
        assert got[("nyala_wal_written_bytes_total", ())] > 15 * 100
        assert (
            got[("nyala_wal_fsync_duration_seconds_count", ())]
            == got[("nyala_wal_group_commit_size_requests_count", ())]
        )
        assert got[("nyala_wal_segments", ())] == 2
    finally:
        log.close()
    got = samples(registry)
    assert got[("nyala_wal_entries_total", ())] == 15  # the closed log's counts stay in the total
    assert got[("nyala_wal_segments", ())] == 1
    other.close()
    assert samples(registry)[("nyala_wal_entries_total", ())] == 15


def test_a_server_with_metrics_off_exports_no_wal_metric(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = WalMetrics(registry, enabled=False)
    log = Log.open(tmp_path / "a", "a" * 32, metrics=metrics)
    try:
        fill(log, 1, 3)
    finally:
        log.close()
    assert samples(registry) == {}
    assert metrics.totals().fsync.count == 0  # histograms recorded nothing
