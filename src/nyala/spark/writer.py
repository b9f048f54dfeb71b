"""The batch writer: every Spark task writes its Arrow batches through one client session.

Planning (driver): :class:`NyalaWriter` checks the DataFrame's schema against the table —
every column must exist with the same type, the key must be complete — and refuses
``mode("overwrite")``.  Spark does not check a data source's write schema itself.

Each task (executor Python worker) opens an AUTO_FLUSH_BACKGROUND session on the worker's
shared client, applies ``nyala.operation`` to each Arrow batch as it arrives (the client
splits it by tablet and pipelines the flushes), closes the session and collects the row
errors, as kudu-spark does: any row error fails the task with the count, the keys of up to
five refused rows (never their other columns: a failed load must not print its data) and what
to do about it (an ``_ignore`` operation or upsert).  The ``_ignore`` operations make
duplicate keys (insert) and missing keys (update, delete) no error on the server, so replays
of a retried task are harmless; plain ``insert`` then reports AlreadyPresent for rows the
failed attempt had written.

Commit and abort: rows are durable (on a majority of replicas) as each flush is
acknowledged, so there is nothing to publish at commit; ``commit`` receives the tasks' row
counts.  Nothing can be taken back either: after ``abort`` the rows of tasks that had
succeeded, and the flushed rows of the failed ones, stay in the table (kudu-spark's
semantics; use upsert or an ``_ignore`` operation so that rerunning the job converges).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from nyala.errors import IllegalState, InvalidArgument
from nyala.schema import ColumnSchema, OpType, Schema

from .options import NyalaOptions

if TYPE_CHECKING:
    from nyala.client import RowError

# The client and the type mapping are imported where they are used: the commit, a Python
# process of its own in a first write, unpickles this module's writer and only adds counts.

__all__ = ["NyalaCommitMessage", "NyalaWriter", "RowErrorsInTask", "describe_row_errors"]

SAMPLE_ERRORS = 5
#: What to do when a whole kind of row error is expected, by (operation, error type).
_REMEDIES: dict[tuple[OpType, str], str] = {
    (OpType.INSERT, "AlreadyPresent"): (
        "rows with these keys exist already; to load rows that may be there, write with nyala.operation "
        "insert_ignore (insert_rows(..., ignore_duplicates=True)) to keep the present rows, or upsert to "
        "replace them"
    ),
    (OpType.UPDATE, "NotFound"): (
        "no rows have these keys; update_ignore (update_rows(..., ignore_missing=True)) skips missing keys, "
        "upsert inserts them"
    ),
    (OpType.DELETE, "NotFound"): (
        "no rows have these keys; delete_ignore (delete_rows(..., ignore_missing=True)) skips missing keys"
    ),
}
_DELETES = (OpType.DELETE, OpType.DELETE_IGNORE)
_INSERTS = (OpType.INSERT, OpType.INSERT_IGNORE)


class RowErrorsInTask(IllegalState):
    """Rows of a Spark task were refused; the message carries a sample."""


@dataclasses.dataclass(frozen=True)
class NyalaCommitMessage(WriterCommitMessage):
    """What one successful task wrote."""

    partition_id: int
    attempt: int
    rows: int


class NyalaWriter(DataSourceArrowWriter):
    """Writes a DataFrame into one Nyala table with one operation."""

    def __init__(self, options: NyalaOptions, schema: StructType, table_schema: Schema) -> None:
        self.options = options
        self.columns = check_write_schema(schema, table_schema, options)
        self.keys = [c.name for c in table_schema.key_columns]
        self.committed_rows = 0

    def write(self, iterator: Iterator[pa.RecordBatch]) -> NyalaCommitMessage:
        from nyala.client import FlushMode

        from ._clients import client_for

        context = TaskContext.get()
        client = client_for(self.options.master, self.options.operation_timeout_ms, self.options.tls)
        table = client.open_table(self.options.table)
        session = table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND, buffer_bytes=self.options.write_buffer_bytes)
        rows = 0
        errors: list[RowError] = []
        try:
            for batch in iterator:
                if batch.num_rows:
                    errors += session.write(self.options.operation, batch.select(self.columns))
                    rows += batch.num_rows
        finally:
            errors += session.close()
        if errors or session.dropped_errors:
            raise RowErrorsInTask(describe_row_errors(errors, session.dropped_errors, self.options, self.keys))
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        return NyalaCommitMessage(partition, attempt, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        # Every row is durable already; commit only learns how many there were.
        self.committed_rows = sum(m.rows for m in messages if isinstance(m, NyalaCommitMessage))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Acknowledged rows cannot be taken back (see the module docstring): nothing to undo.
        return None


def describe_row_errors(errors: list[RowError], dropped: int, options: NyalaOptions, keys: list[str]) -> str:
    """The task's failure: counts by error type, up to five keys, and the remedy if there is one."""
    failed = len(errors) + dropped
    by_type: dict[str, list[RowError]] = {}
    for error in errors:
        by_type.setdefault(type(error.error).__name__, []).append(error)
    parts = []
    for name, group in by_type.items():
        sample = ", ".join(_key(e.row, keys) for e in group[:SAMPLE_ERRORS])
        more = f" and {len(group) - SAMPLE_ERRORS} more" if len(group) > SAMPLE_ERRORS else ""
        remedy = _REMEDIES.get((options.operation, name))
        # Without a known remedy, the first server message says what went wrong.
        detail = remedy if remedy is not None else f"first: {_short(str(group[0].error))}"
        parts.append(f"{len(group)} {name} (keys {sample}{more}): {detail}")
    if dropped:
        parts.append(f"{dropped} more not kept")
    return (
        f"failed to write {failed} rows to Nyala table {options.table!r} with operation "
        f"{options.operation_name}: " + "; ".join(parts)
    )


def _key(row: dict[str, object], keys: list[str]) -> str:
    return "(" + ", ".join(f"{k}={_short(repr(row.get(k)), 40)}" for k in keys) + ")"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _required(column: ColumnSchema) -> bool:
    return not column.nullable and column.default is None


def check_write_schema(schema: StructType, table_schema: Schema, options: NyalaOptions) -> list[str]:
    """The DataFrame columns to send; InvalidArgument names the first mismatch."""
    from .typemap import nyala_type

    table = options.table
    for field in schema.fields:
        if field.name not in table_schema.names:
            raise InvalidArgument(
                f"DataFrame column {field.name!r} is not in Nyala table {table!r} (columns: {table_schema.names})"
            )
        expected = table_schema.column(field.name).type
        given = nyala_type(field.dataType, field.name)
        if given != expected:
            raise InvalidArgument(
                f"DataFrame column {field.name!r} is {field.dataType.simpleString()} ({given}) but column "
                f"{field.name!r} of Nyala table {table!r} is {expected}; cast it first"
            )
    names = set(schema.fieldNames())
    keys = [c.name for c in table_schema.key_columns]
    missing_keys = [k for k in keys if k not in names]
    if missing_keys:
        raise InvalidArgument(f"the DataFrame lacks key columns {missing_keys} of Nyala table {table!r}")
    if options.operation in _INSERTS:
        required = [c.name for c in table_schema.columns if _required(c) and c.name not in names]
        if required:
            raise InvalidArgument(f"{options.operation_name} needs the non-null columns {required} of {table!r}")
    if options.operation in _DELETES:
        return keys  # a delete names rows by key only
    return [f.name for f in schema.fields]
