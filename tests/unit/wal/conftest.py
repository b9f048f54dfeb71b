from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nyala.wal import Log

from .helpers import SMALL


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "wal"


@pytest.fixture
def small_log(log_dir: Path) -> Iterator[Log]:
    """An open log with 16 KiB segments, closed after the test."""
    log = Log.open(log_dir, "tablet-1", SMALL)
    try:
        yield log
    finally:
        log.close()
