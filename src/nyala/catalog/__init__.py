"""The master's catalog as data: entries, the state they fold into, and the checks on requests.

Pure (layer 0): no I/O, no clock, no randomness; the master passes ids, replica choices and
times in.  How it works:

- The catalog is a set of entries keyed by (entry type, entry id) whose values are protobufs:
  ``SysTablesEntryPB`` (name, schema and partitioner JSON, replication factor, version,
  state), ``SysTabletsEntryPB`` (table id, partition, state, committed Raft config, last
  reported leader), ``SysClusterIdEntryPB`` and ``SysTServerStateEntryPB`` (a tablet server
  in maintenance mode, keyed by its uuid; :mod:`.tserver_state`).  :mod:`.entries` decodes
  them into :class:`TableInfo` and :class:`TabletInfo`.
- Every logical operation is ONE ``CatalogWritePB`` (seed 002): :mod:`.writes` builds the
  write of a create (table RUNNING + tablets CREATING), a delete (table REMOVED + tablets
  DELETED, kept as tombstones) and an alter (version bumped, tablets of added ranges
  CREATING, of dropped ranges DELETED).  A table's placement policies (its own and its
  ranges') live in its entry (:mod:`.placement_policy`).  A mutation with an empty value removes an entry.
- :class:`CatalogState` is the fold of committed writes: tables by id and by name (removed
  tables keep their id entry but free the name), tablets by id, and per table its tablets in
  partition-key order for location lookups.  The master's in-memory view is one of these,
  rebuilt from the sys catalog whenever a master becomes leader.
- Tablet lifecycle: CREATING (replicas being created; the master sends CreateTablet until a
  report shows a leader) -> RUNNING -> DELETED.  Table lifecycle: RUNNING -> REMOVED.
- :mod:`.validate` and :mod:`.alter` check CreateTable and AlterTable requests (names,
  schema and partitioner JSON, replication factor, tablet limits, alter steps) and raise
  InvalidArgument naming the problem before anything changes.
"""

from __future__ import annotations

from nyala.catalog.alter import AlterPlan, plan_alter
from nyala.catalog.entries import (
    TableInfo,
    TabletInfo,
    cluster_id_mutation,
    copy_table_entry,
    copy_tablet_entry,
    encode_partition,
    master_mutation,
    table_mutation,
    tablet_mutation,
    voters_config,
)
from nyala.catalog.placement_policy import TablePlacement, constraint_of, placement_pb, range_placement_pbs
from nyala.catalog.state import CatalogState, state_from_entries
from nyala.catalog.tserver_state import check_tserver_uuid, maintenance_write, tserver_state_mutation, unregister_write
from nyala.catalog.validate import (
    MAX_ENTRY_VALUE_BYTES,
    MAX_TABLE_NAME_LENGTH,
    CatalogOptions,
    NewTable,
    check_entry_sizes,
    check_num_replicas,
    check_table_name,
    check_tablet_count,
    validate_create_table,
)
from nyala.catalog.writes import NewTablet, alter_table_write, create_table_write, delete_table_write, new_tablet_entry

__all__ = [
    "MAX_ENTRY_VALUE_BYTES",
    "MAX_TABLE_NAME_LENGTH",
    "AlterPlan",
    "CatalogOptions",
    "CatalogState",
    "NewTable",
    "NewTablet",
    "TableInfo",
    "TablePlacement",
    "TabletInfo",
    "alter_table_write",
    "check_entry_sizes",
    "check_num_replicas",
    "check_table_name",
    "check_tablet_count",
    "check_tserver_uuid",
    "cluster_id_mutation",
    "constraint_of",
    "copy_table_entry",
    "copy_tablet_entry",
    "create_table_write",
    "delete_table_write",
    "encode_partition",
    "maintenance_write",
    "master_mutation",
    "new_tablet_entry",
    "placement_pb",
    "plan_alter",
    "range_placement_pbs",
    "state_from_entries",
    "table_mutation",
    "tablet_mutation",
    "tserver_state_mutation",
    "unregister_write",
    "validate_create_table",
    "voters_config",
]
