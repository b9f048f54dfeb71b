"""Tablet metadata: its file, atomic replacement, and pending schema changes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nyala.errors import Corruption, NotFound
from nyala.schema import ColumnSchema
from nyala.tserver.metadata import META_FILE, DataState, MetadataFile, PendingAlter, TabletMetadata

from .conftest import SCHEMA, metadata


def test_metadata_round_trips_through_its_file(tmp_path: Path) -> None:
    meta = replace(metadata(), pending_alter=PendingAlter(5, 2, SCHEMA.drop_column("s")), tombstone_reason="x")
    meta.save(tmp_path)
    assert TabletMetadata.load(tmp_path) == meta
    assert not (tmp_path / (META_FILE + ".tmp")).exists()


def test_missing_file_is_not_found_and_damaged_file_is_corruption(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        TabletMetadata.load(tmp_path)
    (tmp_path / META_FILE).write_text('{"format_version": 1, "tablet_id": "x"}')
    with pytest.raises(Corruption, match="unreadable"):
        TabletMetadata.load(tmp_path)
    (tmp_path / META_FILE).write_text("{}")
    with pytest.raises(Corruption, match="format version"):
        TabletMetadata.load(tmp_path)


def test_pending_change_becomes_current_only_if_the_store_applied_it() -> None:
    new_schema = SCHEMA.add_column(ColumnSchema.of("extra", "int32"))
    meta = replace(metadata(), pending_alter=PendingAlter(10, 3, new_schema))
    applied = meta.settle_alter(10)
    assert (applied.schema, applied.schema_version, applied.pending_alter) == (new_schema, 3, None)
    not_applied = meta.settle_alter(9)
    assert (not_applied.schema, not_applied.schema_version, not_applied.pending_alter) == (SCHEMA, 0, None)


def test_metadata_file_saves_before_publishing(tmp_path: Path) -> None:
    file = MetadataFile(tmp_path, metadata())
    updated = file.update(lambda m: m.with_state(DataState.TOMBSTONED, "dropped"))
    assert file.current is updated
    assert TabletMetadata.load(tmp_path).data_state is DataState.TOMBSTONED
    assert TabletMetadata.load(tmp_path).tombstone_reason == "dropped"
