"""Rebuilding a lost sys catalog from what the tablet servers hold (Kudu's ``unsafe_rebuild``).

When every master's data is lost, the tablet servers still hold each replica's table id and
name, schema and schema version, partition and partition schema (``tablet_meta.json``) and
committed Raft config (consensus metadata).  ``nyala master unsafe-rebuild`` asks every tablet
server for them (``ListTablets`` with ``need_metadata``) and :func:`rebuild_write` folds them
into ONE catalog write, as a CreateTable of every table at once:

- a table per table id: the name and schema of its replica with the highest schema version
  (the table's version is that version), its partition schema, and as ranges every range a
  tablet of it holds; the replication factor is the largest number of voters a tablet has;
- a tablet per tablet id, RUNNING, with the committed config of the replica that has the
  highest config index (the leader is left for the first reports to name);
- tombstoned replicas are left out: their tablets were deleted or moved away.

The write is saved in the master's (empty) data directory; the master replicates it as soon as
it is the ready leader of a catalog without tables, and renames the file.  Limits, why it is
unsafe: a table whose every replica is gone does not come back, nor a tablet whose every replica
is gone (its key range then has no tablet), nor deleted tables' tombstones, maintenance states
or the cluster id (a new one is made); a table renamed or altered while replicas were away comes
back as its most advanced replica saw it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path

from nyala.catalog import NewTable, NewTablet, create_table_write
from nyala.errors import Corruption, InvalidArgument
from nyala.files import write_atomically
from nyala.proto import consensus_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import Partition, Partitioner, PartitionSchema, Schema

__all__ = ["REBUILD_FILE", "Rebuilt", "load_rebuild", "rebuild_write", "save_rebuild"]

#: In the master's data directory: the catalog write to replicate once leading an empty catalog.
REBUILD_FILE = "unsafe-rebuild-catalog.pb"

Status = tpb.ListTabletsResponsePB.StatusPB


@dataclasses.dataclass(frozen=True)
class Rebuilt:
    """What the rebuild found: the write, and what it holds."""

    write: mpb.CatalogWritePB
    tables: dict[str, str]  # table id -> name
    tablets: int
    skipped: list[str]  # why replicas were left out


def rebuild_write(statuses: Iterable[Status], now_us: int) -> Rebuilt:
    """One catalog write re-creating every table and tablet the replicas describe."""
    best: dict[str, Status] = {}  # tablet id -> the replica with the newest committed config
    newest: dict[str, Status] = {}  # table id -> the replica with the highest schema version
    skipped: list[str] = []
    for s in statuses:
        if s.state == tpb.TOMBSTONED:
            continue
        if not s.schema or not s.partition or not s.committed_config.peers:
            skipped.append(f"tablet {s.tablet_id}: no metadata or config in its report")
            continue
        known = best.get(s.tablet_id)
        if known is None or s.committed_config.opid_index > known.committed_config.opid_index:
            best[s.tablet_id] = s
        table = newest.get(s.table_id)
        if table is None or s.schema_version > table.schema_version:
            newest[s.table_id] = s
    write = mpb.CatalogWritePB()
    names = {}
    for table_id, table in sorted(newest.items()):
        tablets = [s for s in best.values() if s.table_id == table_id]
        write.mutations.extend(_table_mutations(table_id, table, tablets, now_us).mutations)
        names[table_id] = table.table_name
    if len(set(names.values())) != len(names):
        raise InvalidArgument(f"two tables share a name among {sorted(names.values())}: rename one first")
    return Rebuilt(write, names, len(best), skipped)


def _table_mutations(table_id: str, table: Status, tablets: list[Status], now_us: int) -> mpb.CatalogWritePB:
    try:
        schema = Schema.from_json(table.schema)
        partition_schema = PartitionSchema.from_dict(json.loads(table.partition_schema))
        partitions = {s.tablet_id: Partition.from_dict(json.loads(s.partition)) for s in tablets}
    except (InvalidArgument, ValueError, KeyError, TypeError) as e:
        raise Corruption(f"table {table.table_name!r} ({table_id}): its replicas' metadata does not decode: {e}") from e
    ranges = sorted({p.range for p in partitions.values()}, key=lambda r: r.lower)
    partitioner = Partitioner(schema, partition_schema, ranges)
    voters = max(sum(p.member_type == consensus_pb2.VOTER for p in s.committed_config.peers) for s in tablets)
    placed = [
        NewTablet(s.tablet_id, partitions[s.tablet_id], tuple(p.permanent_uuid for p in s.committed_config.peers))
        for s in tablets
    ]
    write = create_table_write(table_id, NewTable(table.table_name, schema, partitioner, voters), placed, now_us)
    configs = {s.tablet_id: s.committed_config for s in tablets}
    for m in write.mutations:
        if m.entry_type == mpb.TABLETS_ENTRY:
            tablet = mpb.SysTabletsEntryPB.FromString(m.value)
            tablet.state = mpb.SysTabletsEntryPB.RUNNING
            tablet.state_msg = "rebuilt from the tablet servers"
            tablet.committed_config.CopyFrom(configs[m.entry_id])
            m.value = tablet.SerializeToString(deterministic=True)
        else:
            entry = mpb.SysTablesEntryPB.FromString(m.value)
            entry.version = table.schema_version
            entry.state_msg = "rebuilt from the tablet servers"
            m.value = entry.SerializeToString(deterministic=True)
    return write


def save_rebuild(data_dir: Path, write: mpb.CatalogWritePB) -> Path:
    path = data_dir / REBUILD_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(path, write.SerializeToString(deterministic=True))
    return path


def load_rebuild(data_dir: Path) -> mpb.CatalogWritePB | None:
    """The saved rebuild, or None when there is none."""
    path = data_dir / REBUILD_FILE
    if not path.exists():
        return None
    write = mpb.CatalogWritePB()
    try:
        write.ParseFromString(path.read_bytes())
    except Exception as e:  # DecodeError, or an unreadable file
        raise Corruption(f"{path} is not a catalog write: {e}") from e
    return write
