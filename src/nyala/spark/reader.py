"""The batch reader: scan tokens become Spark partitions, tablets stream Arrow batches.

Planning (one Python worker on the driver): :class:`NyalaReader` is built for the schema
Spark asks for (the table's, or a narrower one the user gave, which then is the projection);
``pushFilters`` keeps the filters Nyala can evaluate as predicates; ``partitions`` asks the
table for scan tokens with those predicates, so the client's partition pruning drops every
tablet that cannot match, and makes one :class:`InputPartition` per token (or several per
tablet with ``nyala.splitSizeBytes``, see :mod:`.splits`; or one for several small tablets with
``nyala.combineSizeBytes``, see :mod:`.combine`).  A partition's value is the tuple of its
serialized tokens.

Reading (executor Python workers): each partition's tokens are deserialized and scanned one
after another by the worker's shared client, which Spark's reused workers keep across tasks.
A token carries the table's schema and the replicas' addresses, and the client is made lazily,
so a task asks the master nothing, even in a new worker.  Every Arrow batch is conformed to
exactly the Arrow schema Spark expects and handed over as is (no per-row Python).

``spark.sql.python.filterPushdown.enabled`` is false by default, and PySpark 4.3 then fails
every read of a reader whose class overrides ``pushFilters`` (DATA_SOURCE_PUSHDOWN_DISABLED),
to protect sources that rely on it.  Nyala's pushdown is only an optimisation, so the
reader's ``pushFilters`` is a descriptor that presents itself as the inherited method to that
check (see :class:`_PushFilters`): with the setting off Spark never calls it and filters
every row itself; with it on, Spark calls it and filters only what it hands back.

PySpark 4.3 caches the planned read (reader and partitions) on the relation, replaces it
whenever a query hands ``pushFilters`` filters, and reuses the last one for a query that has
none (``PythonDataSourceV2.getOrCreateReadInfo``): after a query that pushed ``host = 'h3'``,
an unfiltered query of the same DataFrame or temporary view reads only host h3.  Nothing of
the later query reaches Python, so the reader cannot tell.  Pushing is therefore opt-in
(``nyala.pushdown``, false by default): by default ``pushFilters`` keeps no predicate and
hands every filter back, so every planned read is a full read and reusing it is right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from nyala.client import ReplicaSelection, ScanToken, Table
from nyala.errors import InvalidArgument
from nyala.schema import Predicate, Schema

from ._clients import client_for
from .combine import group_tokens
from .filters import push
from .options import NyalaOptions
from .splits import split_tokens
from .typemap import conform_batch, spark_arrow_schema, spark_schema

__all__ = ["NyalaReader", "check_read_schema"]


class _PushFilters:
    """``NyalaReader.pushFilters``: looks inherited to PySpark's pushdown-disabled check.

    The check is ``reader.pushFilters.__func__ is not DataSourceReader.pushFilters``; the bound
    callable returned here carries that very function as ``__func__`` and calls the reader's
    real implementation.
    """

    def __get__(self, reader: NyalaReader | None, owner: type) -> Any:
        if reader is None:
            return self
        return _BoundPushFilters(reader._push_filters)


class _BoundPushFilters:
    def __init__(self, implementation: Callable[[list[Filter]], list[Filter]]) -> None:
        self._implementation = implementation
        # An instance attribute: a function stored on the class would come back bound.
        self.__func__ = DataSourceReader.pushFilters

    def __call__(self, filters: list[Filter]) -> list[Filter]:
        return self._implementation(filters)


class NyalaReader(DataSourceReader):
    """Reads one Nyala table; pickled from the planner into every task."""

    pushFilters = _PushFilters()

    def __init__(self, options: NyalaOptions, schema: StructType, table_schema: Schema) -> None:
        self.options = options
        self.columns = [f.name for f in schema.fields]
        self.table_schema = table_schema
        self.predicates: list[Predicate] = []
        self.arrow_schema = spark_arrow_schema(schema)

    def _push_filters(self, filters: list[Filter]) -> list[Filter]:
        if not self.options.pushdown:
            return filters
        self.predicates, rejected = push(filters, self.table_schema)
        return rejected

    def partitions(self) -> Sequence[InputPartition]:
        client = client_for(self.options.master, self.options.operation_timeout_ms, self.options.tls)
        table = client.open_table(self.options.table)
        tokens = self.scan_tokens(table)
        if self.options.split_size_bytes is not None:
            tokens = split_tokens(client, table.schema, tokens, self.options.split_size_bytes)
        groups = group_tokens(client, tokens, self.options.combine_size_bytes)
        return [InputPartition(tuple(token.serialize() for token in group)) for group in groups]

    def scan_tokens(self, table: Table) -> list[ScanToken]:
        timeout = self.options.scan_request_timeout_ms
        return table.scan_tokens(
            self.columns,
            self.predicates,
            replica_selection=_selection(self.options),
            ordered=self.options.fault_tolerant_scan,
            batch_size_bytes=self.options.batch_size_bytes,
            timeout_s=None if timeout is None else timeout / 1000,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition.value, tuple):
            return  # Spark's stand-in when there are no partitions at all
        for serialized in partition.value:
            token = ScanToken.deserialize(serialized)
            # Lazy: the token carries all a scan needs, so the masters are not even looked for.
            client = client_for(token.master_addresses, self.options.operation_timeout_ms, self.options.tls, lazy=True)
            scanner = client.scanner_from_token(token)
            with scanner:
                for batch in scanner:
                    if batch.num_rows:
                        yield conform_batch(batch, self.arrow_schema)


def _selection(options: NyalaOptions) -> ReplicaSelection:
    return ReplicaSelection.LEADER_ONLY if options.leader_only else ReplicaSelection.CLOSEST_REPLICA


def check_read_schema(schema: StructType, table_schema: Schema, table: str) -> None:
    """A schema given with ``.schema(...)`` must name table columns with their Spark types."""
    names = set(table_schema.names)
    for field in schema.fields:
        if field.name not in names:
            raise InvalidArgument(f"column {field.name!r} of the given schema is not in Nyala table {table!r}")
        expected = spark_schema(table_schema, [field.name]).fields[0].dataType
        if field.dataType != expected:
            raise InvalidArgument(
                f"column {field.name!r} is {expected.simpleString()} in Nyala table {table!r}, "
                f"not {field.dataType.simpleString()} as the given schema says"
            )
