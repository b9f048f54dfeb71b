"""The tablet server: hosts tablet replicas and serves writes, scans and tablet admin calls.

Theory of operation
-------------------
A :class:`TabletServer` is a :class:`~nyala.server.ServerBase` (data directory, uuid, RPC,
Raft transport, apply pool) plus:

- a :class:`~.manager.TabletManager` owning one DuckDB instance (``TabletStoreManager``) for
  every tablet of the process and one :class:`~.tablet.TabletReplica` per tablet: its
  metadata file, its store and its :class:`~nyala.consensus.runtime.RaftReplica`.  Tablets
  are created by the master's CreateTablet, deleted to a tombstone by DeleteTablet, and
  bootstrapped at startup (open the store at its applied index, replay the WAL after it);
- the tablet state machine (:mod:`.state_machine`): committed Raft entries carry a one-byte
  kind (:mod:`.envelope`): row operations, applied in runs as one store transaction each,
  or a schema change, applied between the writes around it, in log order;
- the write path: the leader validates a batch once (schema version, size, types, nulls,
  columns, partition), replicates those bytes, or joins them with the other writes of the
  tablet that arrived with them into one entry (:mod:`.entry_joiner`), waits until the
  entry is applied and answers with its own per-row errors and the entry's index;
- the scan path (:mod:`.service`, :mod:`.scan_spec`, :mod:`.scanners`): any RUNNING replica
  opens a store query with projection, predicates, key range, order and limit pushed down,
  and streams it back in byte-bounded Arrow IPC sidecars through a scanner with a TTL;
- the heartbeater (:mod:`.heartbeat`): a loop per master with full and incremental tablet
  reports, early heartbeats when a tablet's leader or config changes, and the peers'
  addresses learned from the answers;
- the admin and consensus calls (:mod:`.admin`);
- tablet copy: a leader asks a peer it can no longer catch up, or a server in the config that
  lacks the tablet, to copy it (:mod:`.tablet_copy_leader`, choosing a source in the
  destination's location when one is up to date); a source serves a consistent snapshot
  in sessions (:mod:`.tablet_copy_source`: the store file copied locally under the tablet's
  lock, the WAL segments linked and anchored, CRC32C-checked chunks in sidecars); the
  destination downloads, checks and installs it crash-safely and bootstraps it
  (:mod:`.tablet_copy_client`, :meth:`.manager.TabletManager.start_copy`); the RPCs are in
  :mod:`.tablet_copy_service`.

Where a write and a scan go, step by step, from the client's call to its answer (which event
loop, task, queue, thread or thread pool does each part, and why), is told in
docs/tserver.md, "The life of a write" and "The life of a scan".  In short, for a write: the
service's task (:mod:`.service`) validates it in :class:`~.tablet.TabletReplica`, the entry
joiner makes the Raft entry, the replica's drive task hands it to the transport and to the
WAL's appender thread (one sync per group), the complete task sees it commit, an apply pool
thread applies it to the store (:mod:`.state_machine`), and the answer is built in
:mod:`.write_response`.  For a scan: a worker thread opens the store query, and a scan pool
thread reads each call's rows into an Arrow IPC sidecar (:mod:`.scanners`).

See docs/tserver.md for the lifecycle, the settings and the command line.
"""

from nyala.tserver.options import TabletServerOptions
from nyala.tserver.server import TabletServer

__all__ = ["TabletServer", "TabletServerOptions"]
