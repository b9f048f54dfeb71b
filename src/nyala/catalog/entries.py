"""Catalog entries as decoded, immutable values, and the mutations that write them.

A catalog entry is keyed by (entry type, entry id) and its value is a serialised protobuf:
``SysTablesEntryPB`` for a table, ``SysTabletsEntryPB`` for a tablet, ``SysClusterIdEntryPB``
for the cluster id.  :class:`TableInfo` and :class:`TabletInfo` pair such a protobuf with the
objects decoded from it (schema, partitioner, partition), so nobody parses JSON twice.  They
are treated as immutable: a change is a new protobuf (:func:`copy_table_entry`,
:func:`copy_tablet_entry`), written with a mutation, and a new info object once committed.
"""

from __future__ import annotations

import dataclasses
import json

from nyala.catalog.placement_policy import NO_PLACEMENT, TablePlacement
from nyala.errors import Corruption, InvalidArgument
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import master_pb2 as mpb
from nyala.schema import Partition, Partitioner, Schema

__all__ = [
    "TableInfo",
    "TabletInfo",
    "cluster_id_mutation",
    "copy_table_entry",
    "copy_tablet_entry",
    "encode_partition",
    "table_mutation",
    "tablet_mutation",
    "voters_config",
]

TableState = mpb.SysTablesEntryPB.State
TabletState = mpb.SysTabletsEntryPB.State

# Tablet states whose replicas should no longer exist anywhere.
DEAD_TABLET_STATES = frozenset({mpb.SysTabletsEntryPB.DELETED, mpb.SysTabletsEntryPB.REPLACED})


@dataclasses.dataclass(frozen=True, slots=True)
class TableInfo:
    """One table as the catalog holds it."""

    table_id: str
    entry: mpb.SysTablesEntryPB
    schema: Schema
    partitioner: Partitioner
    #: The table's own placement policy and its ranges' (docs/placement.md).
    placement: TablePlacement = NO_PLACEMENT

    @classmethod
    def of(cls, table_id: str, entry: mpb.SysTablesEntryPB) -> TableInfo:
        """Decode a stored table entry; a stored entry that does not decode is Corruption."""
        try:
            schema = Schema.from_json(entry.schema)
            partitioner = Partitioner.from_json(entry.partitioner)
            placement = TablePlacement.of(entry)
        except InvalidArgument as e:
            raise Corruption(f"catalog entry of table {table_id} does not decode: {e}") from e
        return cls(table_id, entry, schema, partitioner, placement)

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def version(self) -> int:
        return self.entry.version

    @property
    def num_replicas(self) -> int:
        return self.entry.num_replicas

    @property
    def removed(self) -> bool:
        return self.entry.state == mpb.SysTablesEntryPB.REMOVED


@dataclasses.dataclass(frozen=True, slots=True)
class TabletInfo:
    """One tablet as the catalog holds it: its table, partition, state and committed config."""

    tablet_id: str
    entry: mpb.SysTabletsEntryPB
    partition: Partition

    @classmethod
    def of(cls, tablet_id: str, entry: mpb.SysTabletsEntryPB) -> TabletInfo:
        try:
            partition = Partition.from_dict(json.loads(entry.partition))
        except (InvalidArgument, ValueError, TypeError, AttributeError) as e:
            raise Corruption(f"catalog entry of tablet {tablet_id} has a bad partition: {e}") from e
        return cls(tablet_id, entry, partition)

    @property
    def table_id(self) -> str:
        return self.entry.table_id

    @property
    def state(self) -> int:
        return self.entry.state

    @property
    def creating(self) -> bool:
        return self.entry.state == mpb.SysTabletsEntryPB.CREATING

    @property
    def running(self) -> bool:
        return self.entry.state == mpb.SysTabletsEntryPB.RUNNING

    @property
    def dead(self) -> bool:
        """DELETED or REPLACED: a tombstone; its replicas are deleted wherever they show up."""
        return self.entry.state in DEAD_TABLET_STATES

    @property
    def replicas(self) -> tuple[str, ...]:
        """The uuids of the tablet servers in the committed config, in config order."""
        return tuple(p.permanent_uuid for p in self.entry.committed_config.peers)

    @property
    def leader_uuid(self) -> str:
        return self.entry.leader_uuid

    @property
    def range_key(self) -> bytes:
        """The start of the tablet's range: what placement counts replicas of one range by."""
        return self.partition.range.lower


def copy_table_entry(entry: mpb.SysTablesEntryPB) -> mpb.SysTablesEntryPB:
    """A mutable copy to change; the original (shared with readers) is never touched."""
    out = mpb.SysTablesEntryPB()
    out.CopyFrom(entry)
    return out


def copy_tablet_entry(entry: mpb.SysTabletsEntryPB) -> mpb.SysTabletsEntryPB:
    out = mpb.SysTabletsEntryPB()
    out.CopyFrom(entry)
    return out


def encode_partition(partition: Partition) -> bytes:
    return json.dumps(partition.to_dict(), sort_keys=True).encode()


def voters_config(uuids: tuple[str, ...] | list[str]) -> consensus_pb2.RaftConfigPB:
    """The initial Raft config of a new tablet: every chosen server a VOTER, never in a log yet."""
    config = consensus_pb2.RaftConfigPB(opid_index=0)
    for uuid in uuids:
        config.peers.add(permanent_uuid=uuid, member_type=consensus_pb2.VOTER)
    return config


def table_mutation(table_id: str, entry: mpb.SysTablesEntryPB) -> mpb.CatalogMutationPB:
    return mpb.CatalogMutationPB(
        entry_type=mpb.TABLES_ENTRY, entry_id=table_id, value=entry.SerializeToString(deterministic=True)
    )


def tablet_mutation(tablet_id: str, entry: mpb.SysTabletsEntryPB) -> mpb.CatalogMutationPB:
    return mpb.CatalogMutationPB(
        entry_type=mpb.TABLETS_ENTRY, entry_id=tablet_id, value=entry.SerializeToString(deterministic=True)
    )


def cluster_id_mutation(cluster_id: str, create_time_us: int) -> mpb.CatalogMutationPB:
    entry = mpb.SysClusterIdEntryPB(cluster_id=cluster_id, create_time_us=create_time_us)
    return mpb.CatalogMutationPB(
        entry_type=mpb.CLUSTER_ID, entry_id="", value=entry.SerializeToString(deterministic=True)
    )


def master_mutation(uuid: str, host: str, port: int, *, removed: bool = False) -> mpb.CatalogMutationPB:
    """A master's address book entry (``removed`` once it left the sys catalog's config)."""
    entry = mpb.SysMasterEntryPB(address=common_pb2.HostPortPB(host=host, port=port), removed=removed)
    return mpb.CatalogMutationPB(
        entry_type=mpb.MASTER_ENTRY, entry_id=uuid, value=entry.SerializeToString(deterministic=True)
    )
