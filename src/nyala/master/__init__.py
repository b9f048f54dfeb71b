"""The master: the sys catalog among 1, 3 or 5 masters, tablet-server registry, and the catalog RPCs.

Theory of operation:

- **Sys catalog.** The catalog (tables, tablets with their committed Raft configs, cluster id;
  see :mod:`nyala.catalog`) is a Raft group of all masters (group id ``"0" * 32``, Kudu's).
  Its state machine (:mod:`.sys_catalog`) stores entries as rows of a DuckDB tablet of
  ``nyala.storage`` with the fixed schema ``(entry_type int8, entry_id string, value binary)``;
  every logical operation is one ``CatalogWritePB`` = one Raft entry, and the rows and the
  applied index are written in one DuckDB transaction.
- **Startup** (:mod:`.server`, :mod:`.peers`): the master listens at once; in the background it
  learns every master's uuid (``GetMasterRegistration``, remembered in ``masters.json``),
  opens or creates the catalog store and replica with all masters as VOTERs, and joins the
  election.
- **Leader readiness** (:mod:`.catalog_manager`): a master elected leader passes a read-index
  barrier (everything committed is applied), loads the whole catalog into a fresh
  :class:`~nyala.master.leader.LeaderView`, writes a cluster id if none exists, and only then
  serves catalog RPCs.  Before that they get ServiceUnavailable; on followers NotTheLeader
  with the leader's RPC address as hint.
- **Ordering** (seed 002): a catalog operation takes the write lock, validates against the
  committed view, replicates ONE write, commits it to memory, and only then are RPCs sent to
  tablet servers by :mod:`.tablet_tasks` (CreateTablet / DeleteTablet / AlterSchema, retried
  every heartbeat interval until they take effect).
- **Tablet servers** (:mod:`.ts_manager`, :mod:`.heartbeats`): they heartbeat to every master;
  every master tracks registrations and liveness; only the ready leader processes tablet
  reports (full on the first heartbeat of each server in its term, incremental after), moves
  tablets CREATING -> RUNNING when a leader is reported, persists committed-config changes,
  queues deletion of replicas of deleted tablets, and rolls schema versions forward.
- **Placement**: new replicas are placed by ``nyala.placement.ClusterState`` (least-loaded,
  range-aware), fed with live servers and reported replicas.
- **Client RPCs** (:mod:`.service`, :mod:`.ddl`, :mod:`.locations`): CreateTable, DeleteTable,
  AlterTable, ListTables, GetTableSchema, GetTableLocations, GetTabletLocations,
  IsCreateTableDone on the leader; ConnectToMaster, GetMasterRegistration, ListMasters,
  ListTabletServers and TSHeartbeat on every master.
- **Follower reads** (:mod:`.follower_reads`, KUDU-500): every master folds each applied catalog
  write into its own catalog view; a read carrying ``max_staleness_ms`` is answered by a
  follower that can prove (from the leader's last message and its commit index) that its view
  is that fresh, else refused with NotTheLeader naming the leader.
"""

from __future__ import annotations

from nyala.master.options import MasterOptions
from nyala.master.server import Master
from nyala.master.sys_catalog import SYS_CATALOG_ID, SysCatalogStore

__all__ = ["SYS_CATALOG_ID", "Master", "MasterOptions", "SysCatalogStore"]
