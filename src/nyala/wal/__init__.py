"""The per-tablet write-ahead log: segments, group commit, recovery, reading and GC.

Theory of operation
-------------------
A :class:`Log` owns one directory.  Entries (:class:`LogEntry`: term, index, an opaque type
owned by the consensus layer, payload bytes) go into segment files ``wal-000000001``,
``wal-000000002``, ...; only the last segment is written, the others are closed and carry a
footer.  The byte layouts are in :mod:`nyala.wal.format` and ``docs/wal.md``.

Appending.  ``append(entries)`` checks the entries and packs their record headers in the
caller's thread (payloads are referenced, not copied), then, under a short lock, checks that
they continue the log (first index == next_index) and queues them.  One appender thread per log
(:mod:`nyala.wal.appender`) drains the whole queue, joins it into ONE batch (16-byte header with
two CRC32Cs, then the records; the only copy of the payloads), writes it with one ``pwritev``,
calls ``fdatasync`` once, updates the index, then completes every queued future in queue order.
A completed future therefore means durable, and completion order is reservation order.

Asyncio.  ``append_async`` / ``truncate_after_async`` reserve the same way but return an
``asyncio.Future``.  The appender does not wake the event loop per append (as
``asyncio.wrap_future`` would): per group it makes ONE ``call_soon_threadsafe`` per event loop
(:mod:`nyala.wal.loop_bridge`), and that callback resolves the loop's futures of the group in
reservation order.  Cancelling such a future does not withdraw the append.  ``wait_for_room``
lets producers that do not await each append wait while ``append_queue_max_bytes`` are queued.

Segments.  The next segment is prepared on a background thread: header written, file
preallocated with ``posix_fallocate`` and fsynced under a temporary name.  When the active
segment is full the appender closes it (footer, truncate to the written size, fsync), renames
the prepared file into place and fsyncs the directory before writing anything into it.  Inside
the preallocated size ``fdatasync`` suffices; beyond it (a huge batch) ``fsync`` is used.

Truncation.  ``truncate_after(n)`` travels the same queue and writes a marker record; the index,
readers and recovery drop entries above n written before the marker.  The next append starts
at n + 1.

Recovery.  Opening scans every segment and checks every CRC (:mod:`nyala.wal.recovery`).  A
torn batch at the very end of the last segment is a crash during a group commit: it is cut off
with a warning.  Damage followed by a valid batch, or inside a closed segment, is Corruption
naming the file and byte offset: acknowledged data is never dropped silently.

Reading.  :class:`~nyala.wal.index.LogIndex` keeps one compact row per batch (first index,
segment, offset) plus term runs, so ``term_at`` is a bisect and ``entries(from_index)`` /
``read(from_index, max_bytes)`` go straight to the right batch.  Only durable batches are in
the index, so readers and the appender do not interfere.

GC.  Holders register anchors in a :class:`LogAnchorRegistry` (``REQUIRED``: unapplied
entries, tablet copies; ``RETENTION``: lagging peers, honoured up to
``max_segments_to_retain``).  ``gc()`` deletes the oldest closed segments whose highest index
is below the anchors, keeping ``min_segments_to_retain``.

This package is layer 1: it knows nothing of Raft roles, masters or tablet servers.
"""

from nyala.wal.anchors import AnchorKind, LogAnchor, LogAnchorRegistry
from nyala.wal.entry import LogEntry
from nyala.wal.log import Log
from nyala.wal.options import WalOptions
from nyala.wal.segment import SegmentInfo, segments_from

__all__ = [
    "AnchorKind",
    "Log",
    "LogAnchor",
    "LogAnchorRegistry",
    "LogEntry",
    "SegmentInfo",
    "WalOptions",
    "segments_from",
]
