"""Checksums of one replica's rows at checksum markers, kept by the marker's index.

ksck's checksum scan must compare replicas at the same point of the log while writes go on.
The tablet's leader replicates a checksum marker (:data:`~nyala.tserver.envelope.PayloadKind`
``CHECKSUM``); when a replica applies it, every earlier entry is applied and no later one, on
every replica alike.  On the apply thread, the state machine then only opens a scanner
(:meth:`ChecksumTracker.start`): that takes the store's consistent snapshot (DuckDB's MVCC
snapshot plus the MemRowSet's rows of the same moment) and nothing more, so applying the next
entries waits only for that.  A thread reads the snapshot and checksums it
(:func:`nyala.storage.checksum_batches`) while applies go on; the Checksum RPC waits for the
result.

The tracker keeps the last :data:`KEEP` results, so a replica answers for a marker it applied
a while ago but memory stays bounded.  A replica restarted after a marker became durable (or
filled by a tablet copy) never applied it and has no result for it: the caller gets NotFound
and runs the scan again.  A marker replayed from the log at bootstrap is checksummed again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future

from nyala.errors import NyalaError
from nyala.storage import RowsChecksum, Scanner, checksum_batches

__all__ = ["KEEP", "ChecksumTracker"]

#: Checksums a replica remembers (the most recent markers').
KEEP = 16


class ChecksumTracker:
    """The checksums of one replica, by marker index: done, being computed, or failed."""

    def __init__(self, keep: int = KEEP) -> None:
        if keep < 1:
            raise ValueError(f"a checksum tracker keeps at least one result, got {keep}")
        self._keep = keep
        self._results: OrderedDict[int, Future[RowsChecksum]] = OrderedDict()
        self._lock = threading.Lock()  # start runs on the apply thread, result on the event loop

    def start(self, index: int, open_snapshot: Callable[[], Scanner]) -> None:
        """Checksum the rows ``open_snapshot`` shows now, for the marker at ``index``.

        Called where the marker is applied: opening the scanner is the only work done here; a
        store that cannot open one records the error (applying goes on: a checksum never fails
        a tablet)."""
        future: Future[RowsChecksum] = Future()
        try:
            scanner = open_snapshot()
        except NyalaError as e:
            future.set_exception(e)
        else:
            thread = threading.Thread(target=_compute, args=(future, scanner), name=f"checksum-{index}", daemon=True)
            thread.start()
        with self._lock:
            self._results[index] = future
            self._results.move_to_end(index)
            while len(self._results) > self._keep:
                self._results.popitem(last=False)

    def result(self, index: int) -> Future[RowsChecksum] | None:
        """The checksum of the marker at ``index``, or None when this replica has none."""
        with self._lock:
            return self._results.get(index)


def _compute(future: Future[RowsChecksum], scanner: Scanner) -> None:
    try:
        with scanner:
            checksum = checksum_batches(scanner)
    except BaseException as e:  # no caller on this thread: the RPC waiting for it raises it
        future.set_exception(e)
        if not isinstance(e, Exception):
            raise
        return
    future.set_result(checksum)
