"""GC: anchors decide which closed segments may go; min and max retention bound it."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.errors import IllegalState, InvalidArgument, NotFound
from nyala.wal import AnchorKind, Log, LogAnchorRegistry, WalOptions
from nyala.wal.anchors import segments_to_delete

from .helpers import check_entries, fill

REQUIRED, RETENTION = AnchorKind.REQUIRED, AnchorKind.RETENTION


@pytest.mark.parametrize(
    ("max_indexes", "required", "retention", "min_retain", "max_retain", "expected"),
    [
        ([10, 20, 30, 40], None, None, 1, 80, 3),  # nothing anchored: all but the minimum
        ([10, 20, 30, 40], 25, None, 1, 80, 2),  # 10 and 20 are below the required anchor
        ([10, 20, 30, 40], 20, None, 1, 80, 1),  # a segment holding the anchored index stays
        ([10, 20, 30, 40], 5, None, 1, 80, 0),
        ([10, 20, 30, 40], None, 15, 1, 80, 1),  # a lagging peer holds segments back ...
        ([10, 20, 30, 40], None, 5, 1, 2, 2),  # ... but only up to max_retain segments
        ([10, 20, 30, 40], 15, 5, 1, 2, 1),  # required anchors are never overridden
        ([10, 20, 30, 40], 100, 100, 3, 80, 1),  # min_retain keeps the newest three
        ([10, 20, 30, 40], 100, None, 4, 80, 0),
        ([], None, None, 1, 80, 0),
        ([0, 10, 20], 5, None, 1, 80, 1),  # a segment of only truncation markers (max 0)
        ([10, 50, 20, 60], 30, None, 1, 80, 1),  # only a prefix is ever deleted
    ],
)
def test_segments_to_delete(max_indexes, required, retention, min_retain, max_retain, expected) -> None:
    assert segments_to_delete(max_indexes, required, retention, min_retain, max_retain) == expected


def test_anchor_registry() -> None:
    registry = LogAnchorRegistry()
    assert registry.earliest(REQUIRED) is None
    apply = registry.register(50, "apply")
    copy = registry.register(30, "tablet copy")
    peer = registry.register(10, "peer-3", RETENTION)
    assert (registry.earliest(REQUIRED), registry.earliest(RETENTION)) == (30, 10)
    registry.update(copy, 70)
    assert registry.earliest(REQUIRED) == 50
    registry.release(apply)
    registry.release(peer)
    assert (registry.earliest(REQUIRED), registry.earliest(RETENTION)) == (70, None)
    assert [(a.owner, a.index) for a in registry.snapshot()] == [("tablet copy", 70)]
    with pytest.raises(IllegalState, match=r"anchor .* of 'apply' is not registered"):
        registry.release(apply)
    with pytest.raises(IllegalState, match="not registered"):
        LogAnchorRegistry().update(copy, 5)
    with pytest.raises(InvalidArgument, match="anchor index must be an integer >= 0"):
        registry.register(-1, "x")
    with pytest.raises(InvalidArgument, match="anchor index"):
        registry.update(copy, "7")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="anchor kind"):
        registry.register(1, "x", "required")  # type: ignore[arg-type]
    assert registry.earliest(REQUIRED) == 70  # the failed calls changed nothing


@pytest.fixture
def gc_log(log_dir: Path):
    options = WalOptions(segment_size_bytes=8192, fsync_enabled=False, max_segments_to_retain=4)
    with Log.open(log_dir, "tablet-1", options) as log:
        fill(log, 1, 800, per_append=2)
        yield log


def closed_segments(log: Log):
    return [s for s in log.segments() if s.closed]


def test_gc_honours_a_required_anchor(gc_log: Log) -> None:
    anchor = gc_log.anchors.register(300, "unapplied")
    before = closed_segments(gc_log)
    deleted = gc_log.gc()
    assert deleted == [s for s in before if s.max_index < 300]
    assert all(not Path(s.path).exists() for s in deleted)
    assert gc_log.first_index == deleted[-1].max_index + 1 <= 300
    check_entries(list(gc_log.entries(gc_log.first_index)), gc_log.first_index, 800)
    with pytest.raises(NotFound):
        gc_log.term_at(gc_log.first_index - 1)
    assert gc_log.gc() == []  # nothing more may go
    gc_log.anchors.update(anchor, 700)
    more = gc_log.gc()
    assert more
    assert more[-1].max_index < 700


def test_retention_anchors_hold_up_to_max_segments(gc_log: Log) -> None:
    gc_log.anchors.register(1, "lagging peer", RETENTION)
    closed = closed_segments(gc_log)
    assert len(closed) > 4
    deleted = gc_log.gc()
    assert deleted == closed[: len(closed) - 4]  # max_segments_to_retain=4 closed segments stay
    assert len(closed_segments(gc_log)) == 4


def test_without_anchors_gc_keeps_min_segments(gc_log: Log) -> None:
    closed = closed_segments(gc_log)
    deleted = gc_log.gc()
    assert deleted == closed[:-1]
    assert closed_segments(gc_log) == closed[-1:]
    assert gc_log.first_index == closed[-1].min_index
    check_entries(list(gc_log.entries(gc_log.first_index)), gc_log.first_index, 800)


def test_reopen_after_gc(gc_log: Log, log_dir: Path) -> None:
    gc_log.anchors.register(500, "unapplied")
    gc_log.gc()
    first = gc_log.first_index
    gc_log.close()
    with Log.open(log_dir, "tablet-1") as log:
        assert (log.first_index, log.last_index) == (first, 800)
        check_entries(list(log.entries(first)), first, 800)
        fill(log, 801, 5)
