"""Nyala's data model: types, schemas, partitioning, key encoding, row operations, predicates.

Pure code (layer 0): no files, clocks or threads, so the master, the tablet server, the
client and the tests share it.

How it fits together:

- :mod:`.types` names Kudu's column types, maps them to Arrow, and checks Python values.
- :class:`Schema` is an immutable list of :class:`ColumnSchema` with a primary key of
  leading non-null columns.  Each column keeps an id across renames, so two schemas can be
  diffed into add/drop/rename steps.  Schemas go to and from Arrow and a JSON form (the
  master stores that form in its catalog and sends it over RPC).
- :mod:`.keys` encodes keys so that byte order is value order (Kudu's encoding), and hashes
  encoded keys with MurmurHash2-64.
- :class:`Partitioner` combines a :class:`PartitionSchema` (hash dimensions and range
  columns) with the table's explicit ranges into :class:`Partition` objects, the unit the
  master assigns to tablets; it maps a row to its partition and prunes partitions with
  predicates.
- :mod:`.rowops` carries writes as an Arrow IPC stream with an ``__op`` column; the same
  bytes are the Write RPC body and the Raft entry payload.
- :class:`Predicate` and :class:`KeyRange` describe scan filters, evaluate them in Python and
  serialise them; the storage layer turns them into SQL.
"""

from __future__ import annotations

from .keys import decode_key, encode_key, murmur2_64
from .partition import HashDimension, Partition, Partitioner, PartitionSchema, RangeBounds
from .predicate import KeyRange, Op, Predicate
from .rowops import (
    IPC_WRITE_OPTIONS,
    ISSET_COLUMN,
    OP_COLUMN,
    OpType,
    RowFailure,
    RowOperationOptions,
    RowOperations,
    decode_row_operations,
    encode_row_operations,
    make_row_operations,
)
from .schema import ColumnSchema, Schema
from .types import ColumnType, DataType

__all__ = [
    "IPC_WRITE_OPTIONS",
    "ISSET_COLUMN",
    "OP_COLUMN",
    "ColumnSchema",
    "ColumnType",
    "DataType",
    "HashDimension",
    "KeyRange",
    "Op",
    "OpType",
    "Partition",
    "PartitionSchema",
    "Partitioner",
    "Predicate",
    "RangeBounds",
    "RowFailure",
    "RowOperationOptions",
    "RowOperations",
    "Schema",
    "decode_key",
    "decode_row_operations",
    "encode_key",
    "encode_row_operations",
    "make_row_operations",
    "murmur2_64",
]
