"""A tablet's answer to a Write (``WriteResponsePB``): every way one is built, in one place.

Two parts of the tablet server build it:

- the leader, when it answers the Write (:meth:`nyala.tserver.tablet.TabletReplica.write`):
  an empty batch, a batch whose every row lies outside the tablet's partition (nothing is
  replicated), or an applied entry;
- every replica, when it applies a tracked write and records its answer for retries
  (:class:`nyala.tserver.state_machine.TabletStateMachine`), so that whichever replica leads
  next answers a retry with the same rows, codes and index as the first answer.

The answer names failed rows by their position in the client's batch.  The leader may have
dropped rows outside the tablet's partition before replicating the rest (``dropped_rows``,
which travel in a tracked entry), so the store's positions are renumbered back
(:func:`client_row`).  The leader knows the keys of the dropped rows and names them in the
message; a replica recording the answer knows only their positions.  Each failure goes to
the wire through :func:`nyala.services.row_failure_to_pb`, and the client reads it back with
:func:`nyala.services.row_failure_from_pb`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nyala.errors import InvalidArgument
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import RowFailure
from nyala.services import row_failure_to_pb
from nyala.storage import EntryResult

__all__ = ["client_row", "outside_partition", "response_from_result", "write_response"]


def write_response(failures: Iterable[RowFailure], op_index: int = 0) -> tpb.WriteResponsePB:
    """The answer with these failed rows (by position in the client's batch), sorted by row."""
    ordered = sorted(failures, key=lambda f: f.row)
    return tpb.WriteResponsePB(per_row_errors=[row_failure_to_pb(f) for f in ordered], op_index=op_index)


def outside_partition(tablet_id: str, row: int, key: Mapping[str, Any] | None = None) -> RowFailure:
    """The failure of a row that belongs to another tablet's partition (named by ``key`` when known)."""
    what = "row" if key is None else f"row with key {dict(key)}"
    return RowFailure(row, InvalidArgument(f"{what} does not belong to the partition of tablet {tablet_id}"))


def client_row(row: int, dropped_rows: tuple[int, ...]) -> int:
    """The position in the client's batch of the ``row``-th replicated row (``dropped_rows`` sorted)."""
    for dropped in dropped_rows:
        if dropped > row:
            break
        row += 1
    return row


def response_from_result(
    tablet_id: str, result: EntryResult, dropped_rows: tuple[int, ...], outside: list[RowFailure] | None = None
) -> tpb.WriteResponsePB:
    """The Write answer for an applied entry: its row failures in the client's numbering, plus
    those of the rows dropped as outside the partition (``outside``, or ones without keys)."""
    if outside is None:
        outside = [outside_partition(tablet_id, row) for row in dropped_rows]
    failures = [RowFailure(client_row(f.row, dropped_rows), f.error) for f in result.row_failures]
    return write_response(outside + failures, result.index)
