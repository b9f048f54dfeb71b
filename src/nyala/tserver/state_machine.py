"""What a tablet replica applies committed Raft entries to: its store and its schema.

``apply`` receives the committed WRITE entries of one Ready.  Consecutive row-operation
entries go to the store in ONE call (one DuckDB transaction that also records the last
index); a schema change ends such a run and is applied on its own, in log order.  Results,
one per entry, are :class:`~nyala.storage.EntryResult`: per-row errors, or ``error`` when the
whole entry was refused (a batch that no longer decodes against a schema changed before it
in the log, or a schema change the current schema cannot take).  These outcomes depend only
on the log, so every replica reaches the same ones.

A joined entry (several client writes in one, see :mod:`nyala.tserver.envelope`) is applied
as one batch; its result is a :class:`JoinedResult`, the batch's row errors split by write.

A checksum marker changes no row: the run of writes before it is applied first, then the
replica's :class:`~nyala.tserver.checksum.ChecksumTracker` takes a snapshot of the rows there
(every earlier entry applied, no later one) and checksums it in the background.

A tracked write (one with a request id) also leaves its answer in the tablet's
:class:`~nyala.tserver.result_tracker.ResultTracker`, on every replica, once its transaction
has committed; what the tracker remembers never changes what is applied.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from nyala.consensus.core import LogEntry
from nyala.errors import InvalidArgument
from nyala.schema import RowFailure, Schema
from nyala.storage import ApplyEntry, EntryResult, ScanSpec, TabletStore
from nyala.tserver.checksum import ChecksumTracker
from nyala.tserver.envelope import (
    AlterPayload,
    ChecksumPayload,
    JoinedPayload,
    JoinedWrite,
    RequestId,
    WritePayload,
    decode_payload,
)
from nyala.tserver.metadata import MetadataFile, PendingAlter
from nyala.tserver.result_tracker import ResultTracker
from nyala.tserver.write_response import response_from_result

__all__ = ["JoinedResult", "TabletStateMachine", "check_schema_change", "split_joined"]


@dataclass(frozen=True, slots=True)
class JoinedResult:
    """What applying a joined entry did: one result per write, its rows numbered from 0."""

    results: tuple[EntryResult, ...]


def split_joined(result: EntryResult, writes: Sequence[JoinedWrite]) -> JoinedResult:
    """A joined entry's result, split by write (a refused entry refused every write)."""
    starts = list(itertools.accumulate((w.rows for w in writes), initial=0))[:-1]
    parts = tuple(EntryResult(result.index, [], result.error) for _ in writes)
    for failure in result.row_failures:
        i = bisect.bisect_right(starts, failure.row) - 1
        parts[i].row_failures.append(RowFailure(failure.row - starts[i], failure.error))
    return JoinedResult(parts)


def check_schema_change(old: Schema, new: Schema) -> None:
    """Refuse changes the store cannot make: key changes, type or nullability changes,
    and new non-null columns without a default.  Columns are matched by id."""
    if [(c.id, c.name, c.type) for c in old.key_columns] != [(c.id, c.name, c.type) for c in new.key_columns]:
        raise InvalidArgument(f"primary key columns cannot change: {old.key_names} -> {new.key_names}")
    old_by_id = {c.id: c for c in old.columns}
    for col in new.columns:
        before = old_by_id.get(col.id)
        if before is None:
            if not col.nullable and col.default is None:
                raise InvalidArgument(f"new non-null column {col.name!r} needs a default")
        elif (before.type, before.nullable) != (col.type, col.nullable):
            raise InvalidArgument(f"column {before.name!r}: changing the type or nullability is not supported")


class TabletStateMachine:
    """Applies row operations and schema changes of one tablet, durably and in order."""

    def __init__(
        self,
        store: TabletStore,
        metadata: MetadataFile,
        on_schema_change: Callable[[], None],
        tracker: ResultTracker | None = None,
        checksums: ChecksumTracker | None = None,
    ) -> None:
        self._store = store
        self._metadata = metadata
        self._on_schema_change = on_schema_change
        self.tracker = tracker if tracker is not None else ResultTracker()
        self.checksums = checksums if checksums is not None else ChecksumTracker()

    def applied_index(self) -> int:
        # The runtime's "applied" is what survives a restart; the MemRowSet's rows do not.
        return self._store.durable_index()

    def apply(self, entries: Sequence[LogEntry]) -> list[EntryResult | JoinedResult]:
        results: list[EntryResult | JoinedResult] = []
        run: list[ApplyEntry] = []
        tracked: list[tuple[int, WritePayload]] = []
        joined: list[tuple[int, JoinedPayload]] = []
        for entry in entries:
            payload = decode_payload(entry.payload)
            if isinstance(payload, AlterPayload):
                results.extend(self._apply_writes(run))
                run = []
                results.append(self._apply_alter(payload, entry.index))
                continue
            if isinstance(payload, ChecksumPayload):
                results.extend(self._apply_writes(run))
                run = []
                self.checksums.start(entry.index, lambda: self._store.scan(ScanSpec()))
                results.append(EntryResult(entry.index))
                continue
            if isinstance(payload, JoinedPayload):
                joined.append((len(results) + len(run), payload))
            elif payload.request_id is not None:
                tracked.append((len(results) + len(run), payload))
            run.append(ApplyEntry(entry.index, payload.row_operations))
        results.extend(self._apply_writes(run))
        for position, payload in tracked:
            result = results[position]
            assert isinstance(result, EntryResult)
            self._record(result, payload.request_id, payload.dropped_rows)
        for position, joined_payload in joined:
            whole = results[position]
            assert isinstance(whole, EntryResult)
            split = split_joined(whole, joined_payload.writes)
            results[position] = split
            for part, write in zip(split.results, joined_payload.writes, strict=True):
                self._record(part, write.request_id, write.dropped_rows)
        return results

    def _record(self, result: EntryResult, request_id: RequestId | None, dropped: tuple[int, ...]) -> None:
        # A refused entry changed nothing: a retry may apply it, so there is nothing to remember.
        if result.error is None and request_id is not None:
            tablet_id = self._metadata.current.tablet_id
            self.tracker.record(request_id, response_from_result(tablet_id, result, dropped))

    def _apply_writes(self, run: list[ApplyEntry]) -> list[EntryResult | JoinedResult]:
        return list(self._store.apply(run)) if run else []

    def _apply_alter(self, alter: AlterPayload, index: int) -> EntryResult:
        current = self._metadata.current
        if alter.version <= current.schema_version:
            return EntryResult(index)  # a repeated request for a version already in place
        try:
            check_schema_change(current.schema, alter.schema)
        except InvalidArgument as e:
            return EntryResult(index, error=e)
        self._metadata.update(lambda m: replace(m, pending_alter=PendingAlter(index, alter.version, alter.schema)))
        try:
            self._store.alter_schema(alter.schema, index)
        except InvalidArgument as e:
            self._metadata.update(lambda m: m.settle_alter(self._store.applied_index()))
            return EntryResult(index, error=e)
        self._metadata.update(lambda m: m.settle_alter(index))
        self._on_schema_change()
        return EntryResult(index)
