"""Tablet storage: each tablet's rows in DuckDB, behind the small :class:`TabletStore` interface.

Theory of operation:

- One DuckDB instance per process (:class:`TabletStoreManager`) holds every tablet, so all
  tablets share one thread pool and one memory limit.  Each tablet is its own file, ATTACHed
  under an alias; a damaged or missing file fails that tablet (Corruption, IOFailure,
  NotFound), never the others.
- A tablet file has two tables: ``rows`` (the schema's columns, primary key enforced by
  DuckDB) and ``nyala_meta`` (format version, tablet id, applied Raft index, schema JSON).
- :meth:`DuckDBTabletStore.apply` takes committed Raft entries and decodes and validates their
  row operations.  What DuckDB must do is planned as a few set-based statements (:mod:`.plan`)
  and run with ``UPDATE nyala_meta SET applied_index`` in ONE transaction.  After a crash the
  file holds exactly the entries up to that (durable) index, so bootstrap replays the Raft
  log after it.
- Inserts and whole-row upserts go first to an in-memory MemRowSet (:mod:`.memrowset`), as in
  Kudu, because each DuckDB transaction costs milliseconds of CPU however few rows it holds.
  It is flushed to DuckDB in one transaction by size, by age and before anything else
  touches DuckDB; scans union it with DuckDB.  ``applied_index`` counts it,
  ``durable_index`` (the one stored in ``nyala_meta``) does not, and the Raft log after the
  durable index is replayed on restart.  A tablet keyed by one integer column keeps its
  MemRowSet's keys in numpy arrays (:mod:`.sortedints`), other keys in a dict; the keys in
  the file are indexed in memory (:mod:`.diskkeys`), so a fresh key costs no DuckDB query.
- DuckDB's own WAL makes each commit durable (fsync); ``checkpoint_threshold`` is set high
  and the tablet server checkpoints each tablet explicitly (:meth:`checkpoint`), which bounds
  restart time and avoids DuckDB's checkpoint-per-commit trap.
- Scans run on their own DuckDB connection; DuckDB's MVCC gives each scan the state of the
  moment it started, while writes go on.  Predicates, key ranges, projection, order and limit
  are pushed into parameterised SQL (:mod:`.sql`).

- Checksums (:mod:`.checksum`): the sum of a hash of every row a scanner returns, the same
  for the same rows whatever the MemRowSet, flush and checkpoint history (ksck's checksum
  scan compares replicas with it).

- Tablet copy: :meth:`snapshot` checkpoints and copies the file under the tablet's write
  lock; :meth:`TabletStoreManager.open_from_snapshot` installs such files elsewhere.

Modules, top down: :mod:`.manager` (the instance and tablet files) creates and opens
:mod:`.store` (one tablet), which applies through :mod:`.memrowset`, :mod:`.sortedints`,
:mod:`.diskkeys`, :mod:`.plan` and :mod:`.execute`, changes schemas with :mod:`.alter` and
streams scans with :mod:`.scanner`; :mod:`.api` (the interface), :mod:`.options` (settings)
and :mod:`.sql` (helpers) sit below them.  Imports point one way: a tablet reaches its
instance only through the ``TabletHost`` interface it declares, and a scanner its tablet only
through the guard it is given.  Durable copies and directory syncs come from
:mod:`nyala.files`.
"""

from __future__ import annotations

from .api import ApplyEntry, EntryResult, Scanner, ScanSpec, TabletSnapshot, TabletStore
from .checksum import RowsChecksum, checksum_batches
from .manager import TabletStoreManager
from .options import StorageOptions
from .scanner import DuckDBScanner
from .store import DuckDBTabletStore, PinnedFiles

__all__ = [
    "ApplyEntry",
    "DuckDBScanner",
    "DuckDBTabletStore",
    "EntryResult",
    "PinnedFiles",
    "RowsChecksum",
    "ScanSpec",
    "Scanner",
    "StorageOptions",
    "TabletSnapshot",
    "TabletStore",
    "TabletStoreManager",
    "checksum_batches",
]
