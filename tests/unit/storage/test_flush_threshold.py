"""The default MemRowSet flush is a whole number of DuckDB's row groups (docs/storage.md)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from nyala.storage import StorageOptions
from nyala.storage.options import DUCKDB_ROW_GROUP_ROWS, FLUSH_THRESHOLD_ROWS


def test_duckdb_row_groups_hold_the_rows_the_flush_threshold_assumes(tmp_path: Path) -> None:
    # A DuckDB upgrade that changes the row group size would silently bring back flushes that
    # recompress a partly filled row group: this says so instead.
    conn = duckdb.connect(":memory:")
    conn.execute(f"ATTACH '{tmp_path / 'rows.duckdb'}' AS t")
    conn.execute(f"CREATE TABLE t.rows AS SELECT range AS id FROM range({DUCKDB_ROW_GROUP_ROWS + 1})")
    conn.execute("CHECKPOINT t")
    groups = conn.execute(
        "SELECT row_group_id, max(count) FROM pragma_storage_info('t.rows') GROUP BY ALL ORDER BY 1"
    ).fetchall()
    assert groups == [(0, DUCKDB_ROW_GROUP_ROWS), (1, 1)]


def test_the_default_flush_threshold_is_whole_row_groups() -> None:
    assert StorageOptions().flush_threshold_rows == FLUSH_THRESHOLD_ROWS
    assert FLUSH_THRESHOLD_ROWS % DUCKDB_ROW_GROUP_ROWS == 0
    assert FLUSH_THRESHOLD_ROWS >= 2 * DUCKDB_ROW_GROUP_ROWS
