"""A tablet's own metadata: table, partition, schema and version, and where its data stands.

Kept as ``tablet_meta.json`` in the tablet's directory and always replaced atomically
(temporary file, fsync, rename, fsync of the directory), so a crash leaves the old or the new
file.  ``data_state`` makes creation and deletion crash-safe:

- ``CREATING`` is written before anything else exists; a tablet found in this state at
  startup without consensus metadata never got a vote out and is garbage to remove;
- ``READY`` means store, WAL and consensus metadata exist;
- ``TOMBSTONED`` is written before the data files are deleted; startup finishes the deletion;
- ``COPYING`` is written before a tablet copy puts anything in place (:mod:`.tablet_copy_client`);
  a tablet found in this state at startup is a copy that did not finish: whatever it
  installed is deleted and it becomes a tombstone (when it has consensus metadata, so its
  term is kept) or disappears.

A schema change is applied to the store in the same DuckDB transaction as its Raft index, but
the schema *version* lives here, so the change is announced first as ``pending_alter``
(index, version, schema).  At startup a pending change whose index the store has applied is
made current; otherwise it is dropped, and the WAL replays it.
"""

from __future__ import annotations

import enum
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nyala.errors import Corruption, InvalidArgument, NotFound
from nyala.files import write_atomically
from nyala.schema import Partition, PartitionSchema, Schema

__all__ = ["META_FILE", "TABLET_ID_PATTERN", "DataState", "MetadataFile", "PendingAlter", "TabletMetadata"]

META_FILE = "tablet_meta.json"
FORMAT_VERSION = 1
#: What a tablet id may look like (it names a directory and a file).
TABLET_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class DataState(enum.Enum):
    CREATING = "CREATING"
    READY = "READY"
    TOMBSTONED = "TOMBSTONED"
    COPYING = "COPYING"


@dataclass(frozen=True, slots=True)
class PendingAlter:
    """A schema change about to be applied at Raft index ``index``."""

    index: int
    version: int
    schema: Schema


@dataclass(frozen=True, slots=True)
class TabletMetadata:
    """What a tablet server knows about one tablet besides its rows and its log."""

    tablet_id: str
    table_id: str
    table_name: str
    partition: Partition
    partition_schema: PartitionSchema
    schema: Schema
    schema_version: int
    data_state: DataState = DataState.CREATING
    pending_alter: PendingAlter | None = None
    tombstone_reason: str = ""

    def with_state(self, state: DataState, reason: str = "") -> TabletMetadata:
        return replace(self, data_state=state, tombstone_reason=reason)

    def settle_alter(self, applied_index: int) -> TabletMetadata:
        """Make a pending change current if the store applied it, else forget it (the WAL has it)."""
        pending = self.pending_alter
        if pending is None:
            return self
        if applied_index >= pending.index:
            return replace(self, schema=pending.schema, schema_version=pending.version, pending_alter=None)
        return replace(self, pending_alter=None)

    # -- the file -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        pending = self.pending_alter
        return {
            "format_version": FORMAT_VERSION,
            "tablet_id": self.tablet_id,
            "table_id": self.table_id,
            "table_name": self.table_name,
            "partition": self.partition.to_dict(),
            "partition_schema": self.partition_schema.to_dict(),
            "schema": self.schema.to_dict(),
            "schema_version": self.schema_version,
            "data_state": self.data_state.value,
            "pending_alter": None
            if pending is None
            else {"index": pending.index, "version": pending.version, "schema": pending.schema.to_dict()},
            "tombstone_reason": self.tombstone_reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TabletMetadata:
        if d.get("format_version") != FORMAT_VERSION:
            raise Corruption(f"unknown tablet metadata format version {d.get('format_version')!r}")
        pending = d.get("pending_alter")
        return cls(
            tablet_id=str(d["tablet_id"]),
            table_id=str(d["table_id"]),
            table_name=str(d["table_name"]),
            partition=Partition.from_dict(d["partition"]),
            partition_schema=PartitionSchema.from_dict(d["partition_schema"]),
            schema=Schema.from_dict(d["schema"]),
            schema_version=int(d["schema_version"]),
            data_state=DataState(d["data_state"]),
            pending_alter=None
            if pending is None
            else PendingAlter(int(pending["index"]), int(pending["version"]), Schema.from_dict(pending["schema"])),
            tombstone_reason=str(d.get("tombstone_reason", "")),
        )

    def save(self, directory: Path) -> None:
        """Replace the metadata file in ``directory`` atomically and durably."""
        data = json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True).encode()
        write_atomically(directory / META_FILE, data)

    @classmethod
    def load(cls, directory: Path) -> TabletMetadata:
        """Read the metadata; NotFound when there is none, Corruption when it does not parse."""
        path = directory / META_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no tablet metadata at {path}") from None
        try:
            return cls.from_dict(json.loads(data))
        except (ValueError, KeyError, TypeError, InvalidArgument) as e:
            raise Corruption(f"tablet metadata {path} is unreadable: {e}") from e


class MetadataFile:
    """The current metadata of one tablet and its file; updates save first, then publish.

    Readers (RPC handlers on the event loop) take ``current`` without locking: it is an
    immutable value replaced in one assignment.  Writers (the apply thread, admin calls) are
    serialised by a lock so two saves never interleave.
    """

    def __init__(self, directory: Path, metadata: TabletMetadata) -> None:
        self.directory = directory
        self.current = metadata
        self._lock = threading.Lock()

    def update(self, change: Callable[[TabletMetadata], TabletMetadata]) -> TabletMetadata:
        with self._lock:
            new = change(self.current)
            if new != self.current:
                new.save(self.directory)
                self.current = new
            return new
