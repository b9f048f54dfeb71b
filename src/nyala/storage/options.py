"""Settings of the process-wide DuckDB instance and of the tablets it holds.

Their own module, below both the manager that applies the instance-wide ones and the tablet
store that reads its flush thresholds, so neither imports the other for them.
"""

from __future__ import annotations

import dataclasses
import os

from nyala.common.config import setting

__all__ = ["DUCKDB_ROW_GROUP_ROWS", "FLUSH_THRESHOLD_ROWS", "StorageOptions"]

#: Rows in one of DuckDB's row groups, the unit a checkpoint compresses and writes.
DUCKDB_ROW_GROUP_ROWS = 122_880
#: A flush appends to the tablet's last, partly filled row group, and its checkpoint compresses
#: that whole row group again: with 100,000-row flushes about 1.6 rows were compressed per row
#: written.  Two row groups a flush halve the flushes and the share compressed twice: DuckDB
#: alone took 0.17 us a row (4 columns, one a decimal(22,1)) against 0.24, the tablet store
#: 0.37 to 0.41 against 0.46 (2026-11-28, docs/storage.md).
FLUSH_THRESHOLD_ROWS = 2 * DUCKDB_ROW_GROUP_ROWS


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    """Settings of the process-wide DuckDB instance that holds every tablet."""

    storage_threads: int = setting(
        0,
        "DuckDB worker threads shared by all tablets (a tablet server reads scan batches on as many); "
        "0 means one per CPU core.",
    )
    storage_memory_limit_bytes: int = setting(
        0, "One buffer-pool limit for all tablets of the process, in bytes; 0 keeps DuckDB's default (80% of RAM)."
    )
    storage_checkpoint_threshold_bytes: int = setting(
        1 << 30,
        "DuckDB WAL size that forces an automatic checkpoint, in bytes; kept high because the tablet server "
        "checkpoints each tablet explicitly and the 16 MiB default checkpoints on nearly every upsert commit.",
        "advanced",
    )
    tablet_block_size_bytes: int = setting(
        262144,
        "Block size of newly created tablet files, in bytes (DuckDB's default; measured faster and more "
        "compact than 16 KiB once a tablet holds a million rows).",
        "advanced",
    )
    flush_threshold_rows: int = setting(
        FLUSH_THRESHOLD_ROWS,
        "Rows a tablet's MemRowSet holds before it is flushed to the tablet's DuckDB file in one "
        "transaction; 0 applies every batch straight to DuckDB (no MemRowSet).",
    )
    flush_threshold_mb: int = setting(
        32, "Arrow data a tablet's MemRowSet holds before it is flushed, in MiB (Kudu: flush_threshold_mb)."
    )
    flush_threshold_secs: float = setting(
        60.0,
        "Age of the oldest row in a MemRowSet after which the tablet server's maintenance flushes it "
        "(Kudu: flush_threshold_secs); bounds how much Raft log a restart replays.",
    )
    small_tablet_block_size_bytes: int = setting(
        16384,
        "Block size of tablets created as small (such as the catalog tablet), in bytes; a 1,000-row "
        "tablet takes 108 KiB instead of 780 KiB.",
        "advanced",
    )

    @property
    def threads(self) -> int:
        """The storage threads this process uses: ``storage_threads``, or one per CPU core."""
        return self.storage_threads or os.cpu_count() or 1
