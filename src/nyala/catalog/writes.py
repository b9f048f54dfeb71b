"""Building the one ``CatalogWritePB`` of each logical operation (seed 002: one batch per operation).

Every builder takes the committed entries it changes and returns a write holding copies with
the change; nothing shared is mutated.  Ids, replica choices and the clock come from the
caller (the master), so these stay pure and deterministic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nyala.catalog.alter import AlterPlan
from nyala.catalog.entries import (
    TableInfo,
    TabletInfo,
    copy_table_entry,
    copy_tablet_entry,
    encode_partition,
    table_mutation,
    tablet_mutation,
    voters_config,
)
from nyala.catalog.validate import NewTable, check_entry_sizes
from nyala.proto import master_pb2 as mpb
from nyala.schema import Partition

__all__ = ["NewTablet", "alter_table_write", "create_table_write", "delete_table_write", "new_tablet_entry"]

TABLET = mpb.SysTabletsEntryPB


@dataclasses.dataclass(frozen=True)
class NewTablet:
    """A tablet about to be created: its id, partition and the servers chosen for its replicas."""

    tablet_id: str
    partition: Partition
    replicas: tuple[str, ...]


def new_tablet_entry(table_id: str, tablet: NewTablet) -> mpb.SysTabletsEntryPB:
    return TABLET(
        table_id=table_id,
        partition=encode_partition(tablet.partition),
        state=TABLET.CREATING,
        state_msg="waiting for a replica to report a leader",
        committed_config=voters_config(tablet.replicas),
    )


def create_table_write(table_id: str, new: NewTable, tablets: Sequence[NewTablet], now_us: int) -> mpb.CatalogWritePB:
    """The table (RUNNING) and all its tablets (CREATING) in one write."""
    table = mpb.SysTablesEntryPB(
        name=new.name,
        version=0,
        schema=new.schema.to_json(),
        partitioner=new.partitioner.to_json(),
        num_replicas=new.num_replicas,
        state=mpb.SysTablesEntryPB.RUNNING,
        state_msg="created",
        create_time_us=now_us,
    )
    new.placement.write_to(table)
    write = mpb.CatalogWritePB()
    write.mutations.extend(tablet_mutation(t.tablet_id, new_tablet_entry(table_id, t)) for t in tablets)
    write.mutations.append(table_mutation(table_id, table))
    check_entry_sizes(write)
    return write


def _tombstone(tablet: TabletInfo, reason: str) -> mpb.CatalogMutationPB:
    entry = copy_tablet_entry(tablet.entry)
    entry.state = TABLET.DELETED
    entry.state_msg = reason
    return tablet_mutation(tablet.tablet_id, entry)


def delete_table_write(table: TableInfo, tablets: Sequence[TabletInfo], reason: str) -> mpb.CatalogWritePB:
    """Table REMOVED and every live tablet DELETED, in one write; both stay as tombstones."""
    entry = copy_table_entry(table.entry)
    entry.state = mpb.SysTablesEntryPB.REMOVED
    entry.state_msg = reason
    write = mpb.CatalogWritePB()
    write.mutations.extend(_tombstone(t, reason) for t in tablets if not t.dead)
    write.mutations.append(table_mutation(table.table_id, entry))
    return write


def alter_table_write(
    table: TableInfo,
    plan: AlterPlan,
    new_tablets: Sequence[NewTablet],
    dropped_tablets: Sequence[TabletInfo],
) -> mpb.CatalogWritePB:
    """The altered table (version bumped) with its added and dropped tablets, in one write."""
    entry = copy_table_entry(table.entry)
    if plan.new_name is not None:
        entry.name = plan.new_name
    entry.version = table.version + 1
    entry.schema = plan.schema.to_json()
    entry.partitioner = plan.partitioner.to_json()
    plan.placement.write_to(entry)
    entry.state_msg = f"altered to version {entry.version}"
    write = mpb.CatalogWritePB()
    write.mutations.extend(tablet_mutation(t.tablet_id, new_tablet_entry(table.table_id, t)) for t in new_tablets)
    write.mutations.extend(_tombstone(t, f"range dropped at version {entry.version}") for t in dropped_tablets)
    write.mutations.append(table_mutation(table.table_id, entry))
    check_entry_sizes(write)
    return write
