"""Nyala's client library: connect, define tables, write with sessions, scan to Arrow.

How it works:

- :func:`connect` returns a synchronous, thread-safe :class:`Client`: an
  :class:`AsyncClient` running on an event loop in a background thread (:mod:`.sync`).  Async
  code uses ``await connect_async(...)`` (or ``Client.aio``) directly.
- The client talks to servers only through RPC (:mod:`nyala.services`).  It finds the leader
  master by asking every master at once and follows leader hints (:mod:`.masters`); it
  caches table schemas and tablet locations (:mod:`.meta_cache`), refreshing them when an
  error shows they are stale; every operation has one deadline within which retriable errors
  are retried with backoff (:mod:`._retry`).
- Writes go through sessions (:mod:`.session`): rows are checked and converted to Arrow when
  applied, split by tablet with the table's Partitioner, and sent as one Write RPC per
  tablet batch with the row operations in sidecar 0 (:mod:`.writer`).  Every row the cluster
  refuses comes back as a :class:`RowError`; none is dropped silently.
- Scans prune partitions with the predicates, read each remaining tablet with its own Scan
  stream from the replica the selection picks (:mod:`.replicas`, :mod:`.tablet_scan`), and
  return pyarrow RecordBatches; ordered scans resume on another replica after a failure.
  :class:`ScanToken` describes the scan of one tablet for execution elsewhere (Spark).

See docs/client.md for a guide with examples and the retry and consistency semantics.
"""

from __future__ import annotations

from nyala.schema import ColumnSchema, OpType, Predicate, Schema

from .async_client import AsyncClient, connect_async
from .info import MasterInfo, ReplicaInfo, TableSummary, TabletInfo, TabletServerInfo
from .operations import Operation, RowError, UnhandledRowErrors
from .options import ClientOptions
from .placement import PlacementPolicy, RangePlacement
from .predicates import predicate
from .replicas import ReadMode, ReplicaSelection
from .scan_spec import ScanArgs
from .scanner import AsyncScanner, ScanToken
from .schemas import Partitioning, RangePartition, RangePartitionBound, schema, schema_from_arrow
from .session import AsyncSession, FlushMode
from .sync import Client, Scanner, Session, Table, connect
from .table import AsyncTable

__all__ = [
    "AsyncClient",
    "AsyncScanner",
    "AsyncSession",
    "AsyncTable",
    "Client",
    "ClientOptions",
    "ColumnSchema",
    "FlushMode",
    "MasterInfo",
    "OpType",
    "Operation",
    "Partitioning",
    "PlacementPolicy",
    "Predicate",
    "RangePartition",
    "RangePartitionBound",
    "RangePlacement",
    "ReadMode",
    "ReplicaInfo",
    "ReplicaSelection",
    "RowError",
    "ScanArgs",
    "ScanToken",
    "Scanner",
    "Schema",
    "Session",
    "Table",
    "TableSummary",
    "TabletInfo",
    "TabletServerInfo",
    "UnhandledRowErrors",
    "connect",
    "connect_async",
    "predicate",
    "schema",
    "schema_from_arrow",
]
