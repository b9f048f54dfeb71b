"""The destination side of a tablet copy: fetch a source's session into a temporary directory.

The tablet manager (:meth:`TabletManager.start_copy`) runs a copy in the background when a
leader's StartTabletCopy arrives; this module does the talking and the checking:

1. :meth:`TabletCopyClient.begin` opens a session on the source and validates its answer in
   full (metadata, consensus state, applied index, file list: one store file named after the
   tablet, maybe its DuckDB WAL, WAL segments with consecutive sequence numbers) before
   anything is written locally: :class:`CopySource`.
2. :meth:`TabletCopyClient.download` fetches every file into ``tablets/<id>.copy-tmp/``
   (``store/`` and ``wal/``), ``tablet_copy_download_threads_nums_per_session`` chunks in
   flight at once, each written at its offset.  Every chunk's CRC32C is checked on arrival;
   a chunk that fails (network error, timeout, damaged bytes) is fetched again from its
   offset, at most ``tablet_copy_fetch_max_retries`` times with a growing pause.  A session
   the source no longer knows (it restarted, or the session expired) fails the copy at once.
   All fetches of the server share one :class:`Throttler`
   (``tablet_copy_throttler_bytes_per_sec``).  Every 64 MiB written to a file, an
   ``fdatasync`` of it starts on a worker thread while the download goes on, so the disk
   writes the data as it arrives rather than all of it at the end (on this machine a 1 GB
   fsync alone takes 2.5 s).  Every byte is read back from the file to check its whole
   CRC32C, most of them behind the writes (:class:`_ReadBack`); once a file is complete it
   is fsynced, the rest is read back and the whole CRC compared, and the directories are
   fsynced.
3. :meth:`TabletCopyClient.end` ends the session, successful or not (best effort: an
   abandoned session expires on the source by itself).

Installing what was downloaded, crash safety and bootstrap are the tablet manager's.  The
bytes each copy fetches count in :class:`CopyCounters` as within this server's location or
across locations (the source says where it is).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c

from nyala.common.hostport import HostPort
from nyala.consensus.core import RaftConfig, decode_config
from nyala.errors import (
    Corruption,
    InvalidArgument,
    IOFailure,
    NyalaError,
    RetriableError,
    StorageError,
)
from nyala.files import fsync_dir
from nyala.metrics.loop import HistogramChild
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc import Messenger
from nyala.schema import Partition, PartitionSchema, Schema
from nyala.services import BEGIN_TABLET_COPY_SESSION, END_TABLET_COPY_SESSION, FETCH_DATA
from nyala.tserver.metadata import TABLET_ID_PATTERN, DataState, TabletMetadata
from nyala.tserver.partition_filter import PartitionFilter
from nyala.wal.format import parse_segment_name

__all__ = [
    "CopyCounters",
    "CopyRequest",
    "CopySource",
    "Downloaded",
    "RemoteFile",
    "TabletCopyClient",
    "Throttler",
    "parse_begin_response",
    "parse_start_tablet_copy",
]

log = logging.getLogger("nyala.tserver")

STORE_DIR = "store"
WAL_DIR = "wal"
#: The suffix of a copy's temporary directory beside the tablet directories.
COPY_TMP_SUFFIX = ".copy-tmp"
# Begin snapshots the tablet: a local copy of its file and a CRC of every file, about a second
# per GB on a 2-core machine; generous, so that a large tablet's session is not given up.
BEGIN_TIMEOUT_S = 300.0
FETCH_TIMEOUT_S = 60.0
END_TIMEOUT_S = 5.0
_READ_PIECE = 8 << 20
#: Bytes written to a file between two background syncs of it during a download.
SYNC_EVERY_BYTES = 64 << 20
#: Bytes written in a row to a file before they are read back for its CRC32C during a download.
READ_BACK_EVERY = 64 << 20


@dataclass(frozen=True, slots=True)
class CopyRequest:
    """A validated StartTabletCopy."""

    tablet_id: str
    source_uuid: str
    source_address: HostPort
    caller_uuid: str
    caller_term: int
    replace_live: bool
    leader_first_index: int


def parse_start_tablet_copy(request: tcpb.StartTabletCopyRequestPB, self_uuid: str) -> CopyRequest:
    """Validate a StartTabletCopy in full; InvalidArgument names the first problem."""
    if request.dest_uuid != self_uuid:
        raise InvalidArgument(f"StartTabletCopy is for server {request.dest_uuid!r} but reached server {self_uuid!r}")
    if not TABLET_ID_PATTERN.match(request.tablet_id):
        raise InvalidArgument(f"tablet id {request.tablet_id!r} must be 1-128 letters, digits, '_' or '-'")
    if not request.copy_peer_uuid:
        raise InvalidArgument("StartTabletCopy needs the copy_peer_uuid of the source")
    if request.copy_peer_uuid == self_uuid:
        raise InvalidArgument(f"StartTabletCopy names this server ({self_uuid}) as its own copy source")
    address = request.copy_peer_addr
    if not address.host or not 0 < address.port < 65536:
        raise InvalidArgument(f"copy_peer_addr must be a host and a port in 1-65535, got {address.host}:{address.port}")
    if not request.caller_uuid:
        raise InvalidArgument("StartTabletCopy needs the caller_uuid of the leader that asks")
    if request.caller_term < 0:
        raise InvalidArgument(f"caller_term must be >= 0, got {request.caller_term}")
    if request.leader_first_index < 0:
        raise InvalidArgument(f"leader_first_index must be >= 0, got {request.leader_first_index}")
    return CopyRequest(
        request.tablet_id,
        request.copy_peer_uuid,
        HostPort(address.host, address.port),
        request.caller_uuid,
        request.caller_term,
        request.replace_live_replica,
        request.leader_first_index,
    )


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A file a source lists."""

    file_id: int
    kind: tcpb.DataFileKind
    name: str
    size: int
    crc32c: int

    @property
    def subdirectory(self) -> str:
        return WAL_DIR if self.kind == tcpb.WAL_SEGMENT else STORE_DIR


@dataclass(frozen=True, slots=True)
class CopySource:
    """A source's session, validated: what the copy will install."""

    session_id: bytes
    metadata: TabletMetadata  # data_state COPYING
    term: int
    config: RaftConfig
    applied_index: int
    files: tuple[RemoteFile, ...]
    location: str
    idle_timeout_s: float
    #: Entries up to here are committed and in the copied WAL (at least ``applied_index``):
    #: the destination applies them at once, as a restart does.
    committed_index: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def parse_begin_response(tablet_id: str, response: tcpb.BeginTabletCopySessionResponsePB) -> CopySource:
    """Check a source's session in full; Corruption names what a source should never send."""
    try:
        return _parse_begin(tablet_id, response)
    except (InvalidArgument, ValueError, KeyError, TypeError) as e:
        raise Corruption(f"the tablet copy source sent an unusable session for tablet {tablet_id}: {e}") from e


def _parse_begin(tablet_id: str, response: tcpb.BeginTabletCopySessionResponsePB) -> CopySource:
    if not response.session_id:
        raise InvalidArgument("no session id")
    if response.applied_index < 0 or response.current_term < 0:
        raise InvalidArgument(f"applied index {response.applied_index} and term {response.current_term} must be >= 0")
    if response.committed_index and response.committed_index < response.applied_index:
        raise InvalidArgument(
            f"committed index {response.committed_index} is below the applied index {response.applied_index}"
        )
    m = response.metadata
    if not m.table_id:
        raise InvalidArgument("no table id")
    schema = Schema.from_json(m.schema)
    partition_schema = PartitionSchema.from_dict(_json_object(m.partition_schema, "partition_schema"))
    partition = Partition.from_dict(_json_object(m.partition, "partition"))
    PartitionFilter(schema, partition_schema, partition)  # the three agree
    if m.schema_version < 0:
        raise InvalidArgument(f"schema version {m.schema_version} must be >= 0")
    config = decode_config(response.committed_config.SerializeToString())
    if not config.voters:
        raise InvalidArgument("the committed config has no voters")
    files = tuple(RemoteFile(f.file_id, f.kind, f.name, f.size_bytes, f.crc32c) for f in response.files)
    _check_files(tablet_id, files)
    metadata = TabletMetadata(
        tablet_id=tablet_id,
        table_id=m.table_id,
        table_name=m.table_name,
        partition=partition,
        partition_schema=partition_schema,
        schema=schema,
        schema_version=m.schema_version,
        data_state=DataState.COPYING,
    )
    return CopySource(
        response.session_id,
        metadata,
        response.current_term,
        config,
        response.applied_index,
        files,
        response.source_location,
        response.session_idle_timeout_ms / 1000,
        max(response.applied_index, response.committed_index),
    )


def _check_files(tablet_id: str, files: Sequence[RemoteFile]) -> None:
    if len({f.file_id for f in files}) != len(files):
        raise InvalidArgument("file ids repeat")
    store_names = {f"{tablet_id}.duckdb": tcpb.STORE_FILE, f"{tablet_id}.duckdb.wal": tcpb.STORE_WAL_FILE}
    seqnos = []
    for f in files:
        if f.size < 0:
            raise InvalidArgument(f"file {f.name!r} has a negative size")
        if f.kind == tcpb.WAL_SEGMENT:
            seqno = parse_segment_name(f.name)
            if seqno is None:
                raise InvalidArgument(f"{f.name!r} is not a WAL segment name")
            seqnos.append(seqno)
        elif store_names.get(f.name) != f.kind or f.kind not in (tcpb.STORE_FILE, tcpb.STORE_WAL_FILE):
            raise InvalidArgument(f"unexpected store file {f.name!r} (kind {f.kind})")
    if sum(1 for f in files if f.kind == tcpb.STORE_FILE) != 1:
        raise InvalidArgument("not exactly one store file")
    if len(set(f.name for f in files)) != len(files):
        raise InvalidArgument("file names repeat")
    if not seqnos:
        raise InvalidArgument("no WAL segment")
    if sorted(seqnos) != list(range(min(seqnos), min(seqnos) + len(seqnos))):
        raise InvalidArgument(f"WAL segments {sorted(seqnos)} are not consecutive")


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} is not a JSON object")
    return value


class Throttler:
    """Paces the bytes of every tablet copy of the server to ``bytes_per_sec`` (0: no limit).

    Each fetch takes its bytes before it is sent; a fetch waits until the bytes taken before it
    have had their time, so the long-run rate is the limit and no burst builds up while idle.
    """

    def __init__(self, bytes_per_sec: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.bytes_per_sec = bytes_per_sec
        self._clock = clock
        self._next = 0.0

    def delay(self, nbytes: int) -> float:
        """Reserve ``nbytes``; the seconds to wait before using them."""
        if self.bytes_per_sec <= 0 or nbytes <= 0:
            return 0.0
        now = self._clock()
        start = max(now, self._next)
        self._next = start + nbytes / self.bytes_per_sec
        return start - now

    async def take(self, nbytes: int) -> None:
        wait = self.delay(nbytes)
        if wait > 0:
            await asyncio.sleep(wait)


#: A small tablet copies in a fraction of a second, a large one in minutes.
COPY_DURATION_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass
class CopyCounters:
    """This server's tablet copies as a destination (reported by GetStatus)."""

    started: int = 0
    completed: int = 0
    failed: int = 0
    bytes_within_location: int = 0
    bytes_across_locations: int = 0
    #: Seconds from a copy's start to its end, by outcome (exported as a histogram).
    installed_s: HistogramChild = field(default_factory=lambda: HistogramChild(COPY_DURATION_BUCKETS_S))
    failed_s: HistogramChild = field(default_factory=lambda: HistogramChild(COPY_DURATION_BUCKETS_S))


@dataclass(frozen=True, slots=True)
class Downloaded:
    """A complete, checked download, ready to install."""

    directory: Path
    store_files: tuple[Path, ...]
    wal_dir: Path
    fetch_s: float  # fetching every chunk and writing it
    verify_s: float  # the fsyncs and the whole-file checks after
    #: ``verify_s`` by step: waiting for the background syncs, the final fsyncs, reading every
    #: file back for its CRC32C, the directories' fsyncs.
    phases: dict[str, float] = field(default_factory=dict)


class TabletCopyClient:
    """Fetches tablet copies for this server (one instance per server, shared by all copies)."""

    def __init__(
        self,
        messenger: Messenger,
        uuid: str,
        *,
        chunk_size_bytes: int,
        fetches_in_flight: int,
        max_retries: int,
        throttler: Throttler,
        counters: CopyCounters,
        location: Callable[[], str] = lambda: "",
    ) -> None:
        self._messenger = messenger
        self._uuid = uuid
        self._chunk = chunk_size_bytes
        self._window = fetches_in_flight
        self._max_retries = max_retries
        self._throttler = throttler
        self.counters = counters
        self._location = location

    async def begin(self, request: CopyRequest) -> CopySource:
        """Open a session on the source and check its answer."""
        response = await self._messenger.call(
            request.source_address,
            BEGIN_TABLET_COPY_SESSION,
            tcpb.BeginTabletCopySessionRequestPB(requestor_uuid=self._uuid, tablet_id=request.tablet_id),
            timeout=BEGIN_TIMEOUT_S,
        )
        return parse_begin_response(request.tablet_id, response)

    async def end(self, request: CopyRequest, source: CopySource, success: bool) -> None:
        """End the session; failures are only logged (the source expires it anyway)."""
        try:
            await self._messenger.call(
                request.source_address,
                END_TABLET_COPY_SESSION,
                tcpb.EndTabletCopySessionRequestPB(session_id=source.session_id, is_success=success),
                timeout=END_TIMEOUT_S,
            )
        except NyalaError as e:
            log.info(
                "tablet copy of %s: could not end the session on %s: %s", request.tablet_id, request.source_uuid, e
            )

    async def download(self, request: CopyRequest, source: CopySource, directory: Path) -> Downloaded:
        """Fetch every file of ``source`` into ``directory`` (emptied first), checked and durable."""
        files = source.files
        paths = {f.file_id: directory / f.subdirectory / f.name for f in files}
        fds = await asyncio.to_thread(_create_files, directory, [paths[f.file_id] for f in files])
        fd_of = {f.file_id: fd for f, fd in zip(files, fds, strict=True)}
        within = source.location == self._location()
        chunks = deque((f, offset) for f in files for offset in range(0, f.size, self._chunk))
        unsynced = dict.fromkeys(fd_of, 0)
        syncing: dict[int, asyncio.Future[None]] = {}
        syncs: list[asyncio.Future[None]] = []

        def sync_behind(file_id: int, nbytes: int) -> None:
            """Start an fdatasync of a file every SYNC_EVERY_BYTES, one at a time per file."""
            unsynced[file_id] += nbytes
            if unsynced[file_id] < SYNC_EVERY_BYTES or file_id in syncing:
                return
            unsynced[file_id] = 0
            future = syncing[file_id] = asyncio.ensure_future(asyncio.to_thread(os.fdatasync, fd_of[file_id]))
            future.add_done_callback(lambda _f: syncing.pop(file_id, None))
            syncs.append(future)

        checks = {f.file_id: _ReadBack(paths[f.file_id], f, self._chunk) for f in files}

        async def worker() -> None:
            while chunks:
                f, offset = chunks.popleft()
                data = await self._fetch(request, source, f, offset, min(self._chunk, f.size - offset))
                await asyncio.to_thread(_pwrite_all, fd_of[f.file_id], data, offset)
                sync_behind(f.file_id, len(data))
                checks[f.file_id].written(offset)
                if within:
                    self.counters.bytes_within_location += len(data)
                else:
                    self.counters.bytes_across_locations += len(data)

        started = time.perf_counter()
        fetched = started
        phases: dict[str, float] = {}
        try:
            tasks = [asyncio.ensure_future(worker()) for _ in range(min(self._window, max(1, len(chunks))))]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            fetched = time.perf_counter()
            for future in syncs:
                try:
                    await future
                except OSError as e:
                    raise IOFailure(f"cannot sync the download in {directory}: {e}") from e
            phases["background syncs"] = time.perf_counter() - fetched
            for f in files:
                started_file = time.perf_counter()
                await asyncio.to_thread(_sync_file, fd_of.pop(f.file_id))
                synced = time.perf_counter()
                await checks[f.file_id].finish()
                phases["fsync"] = phases.get("fsync", 0.0) + synced - started_file
                phases["read back and CRC32C"] = phases.get("read back and CRC32C", 0.0) + time.perf_counter() - synced
            started_dirs = time.perf_counter()
            await asyncio.to_thread(_sync_dirs, directory)
            phases["directory fsyncs"] = time.perf_counter() - started_dirs
        finally:
            # A background sync still running holds its descriptor: let it end first.
            await asyncio.gather(*syncs, return_exceptions=True)
            await asyncio.gather(*(c.idle() for c in checks.values()), return_exceptions=True)
            await asyncio.to_thread(_close_all, list(fd_of.values()))
        store_files = tuple(paths[f.file_id] for f in files if f.kind != tcpb.WAL_SEGMENT)
        done = time.perf_counter()
        return Downloaded(directory, store_files, directory / WAL_DIR, fetched - started, done - fetched, phases)

    async def _fetch(self, request: CopyRequest, source: CopySource, f: RemoteFile, offset: int, length: int) -> Any:
        """Bytes ``offset .. offset+length`` of ``f``, retrying failed or damaged chunks."""
        parts: list[memoryview] = []
        got = 0
        failures = 0
        while got < length:
            want = length - got
            await self._throttler.take(want)
            try:
                response, sidecars = await self._messenger.call_with_sidecars(
                    request.source_address,
                    FETCH_DATA,
                    tcpb.FetchDataRequestPB(
                        session_id=source.session_id, file_id=f.file_id, offset=offset + got, max_length=want
                    ),
                    timeout=FETCH_TIMEOUT_S,
                )
                data = _check_chunk(f, offset + got, want, response, sidecars, check_crc=False)
                # On a worker thread (the crc32c package releases the GIL): the event loop goes
                # on receiving the other chunks in flight meanwhile.
                await asyncio.to_thread(_check_crc, f, offset + got, data, response.chunk_crc32c)
            except (RetriableError, StorageError) as e:
                # The network, a busy or restarting source, or damaged bytes: try again from the
                # same offset.  NotFound (the session is gone) and the rest fail the copy at once.
                failures += 1
                if failures > self._max_retries:
                    raise IOFailure(
                        f"tablet copy of {request.tablet_id}: fetching {f.name} at offset {offset + got} from "
                        f"{request.source_uuid} failed {failures} times; the last error: {type(e).__name__}: {e}"
                    ) from e
                log.info(
                    "tablet copy of %s: fetch of %s at offset %d failed (%s: %s); attempt %d of %d",
                    request.tablet_id,
                    f.name,
                    offset + got,
                    type(e).__name__,
                    e,
                    failures + 1,
                    self._max_retries + 1,
                )
                await asyncio.sleep(min(2.0, 0.1 * 2 ** (failures - 1)))
                continue
            parts.append(data)
            got += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _check_chunk(
    f: RemoteFile,
    offset: int,
    want: int,
    response: tcpb.FetchDataResponsePB,
    sidecars: Sequence[memoryview],
    check_crc: bool = True,
) -> memoryview:
    where = f"chunk of {f.name} at offset {offset}"
    if len(sidecars) != 1:
        raise Corruption(f"{where}: the answer carries {len(sidecars)} sidecars, not 1")
    data = sidecars[0]
    if (response.file_id, response.offset, response.file_size_bytes) != (f.file_id, offset, f.size):
        raise Corruption(
            f"{where}: the answer is for file {response.file_id} at offset {response.offset} of "
            f"{response.file_size_bytes} bytes"
        )
    if len(data) != response.length or not 0 < len(data) <= want:
        raise Corruption(f"{where}: {len(data)} bytes arrived for a length of {response.length}, {want} asked")
    if check_crc:
        _check_crc(f, offset, data, response.chunk_crc32c)
    return data


def _check_crc(f: RemoteFile, offset: int, data: memoryview, expected: int) -> None:
    if crc32c.crc32c(data) != expected:
        where = f"chunk of {f.name} at offset {offset}"
        raise Corruption(f"{where}: CRC32C mismatch ({len(data)} bytes damaged in transit)")


def _create_files(directory: Path, paths: list[Path]) -> list[int]:
    shutil.rmtree(directory, ignore_errors=True)
    for sub in (STORE_DIR, WAL_DIR):
        (directory / sub).mkdir(parents=True)
    fds: list[int] = []
    try:
        for path in paths:
            fds.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
    except OSError as e:
        _close_all(fds)
        raise IOFailure(f"cannot create {directory}: {e}") from e
    return fds


def _pwrite_all(fd: int, data: Any, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _finish_file(fd: int, path: Path, f: RemoteFile) -> None:
    """Make the file durable and check its whole CRC32C, as read back."""
    _sync_file(fd)
    _check_file(path, f)


def _sync_file(fd: int) -> None:
    """fsync and close a downloaded file."""
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_file(path: Path, f: RemoteFile, crc: int = 0, start: int = 0) -> None:
    """Check a downloaded file's size and whole CRC32C, as read back (from ``start``, with
    ``crc`` that of the bytes before it)."""
    size = path.stat().st_size
    crc = _crc_range(path, start, max(start, size), crc)
    if size != f.size or crc != f.crc32c:
        raise Corruption(
            f"{f.name}: the copy holds {size} bytes with CRC32C {crc:#010x}; the source listed {f.size} bytes "
            f"with {f.crc32c:#010x}"
        )


def _crc_range(path: Path, start: int, end: int, crc: int) -> int:
    """``crc`` continued over bytes ``start .. end`` of a file, read into one reused buffer."""
    buffer = bytearray(min(_READ_PIECE, max(1, end - start)))
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fin:
        fin.seek(start)
        left = end - start
        while left:
            got = fin.readinto(view[: min(len(buffer), left)])
            if not got:
                break  # shorter than it should be: the size check says so
            crc = crc32c.crc32c(view[:got], crc)
            left -= got
    return crc


class _ReadBack:
    """Reads a file being downloaded back behind the writes, in order, for its whole CRC32C.

    Chunks land out of order (several fetches are in flight); once the chunks written from
    where the check has reached make up ``READ_BACK_EVERY`` bytes in a row, a worker thread
    reads them back and continues the CRC, while the download goes on.  :meth:`finish` reads
    the rest once the file is written and synced, and compares size and CRC with the source's
    list: every byte is still read back from the file after it was written, but most of them
    while the network and the disk are busy with later chunks rather than after the last.
    """

    def __init__(self, path: Path, f: RemoteFile, chunk: int) -> None:
        self._path = path
        self._file = f
        self._chunk = chunk
        self._landed: set[int] = set()
        self._written = 0  # every byte before it is written
        self._checked = 0  # every byte before it is read back into ``_crc``
        self._crc = 0
        self._task: asyncio.Future[int] | None = None

    def written(self, offset: int) -> None:
        """Chunk ``offset`` is written (pwrite returned)."""
        self._landed.add(offset)
        while self._written in self._landed:
            self._landed.discard(self._written)
            self._written = min(self._file.size, self._written + self._chunk)
        if self._task is None and self._written - self._checked >= READ_BACK_EVERY:
            start, end = self._checked, self._written
            self._task = asyncio.ensure_future(asyncio.to_thread(_crc_range, self._path, start, end, self._crc))
            self._task.add_done_callback(lambda task: self._checked_to(task, end))

    def _checked_to(self, task: asyncio.Future[int], end: int) -> None:
        self._task = None
        if not task.cancelled() and task.exception() is None:
            self._crc, self._checked = task.result(), end
        elif not task.cancelled():
            task.exception()  # read again by finish() from where the check stopped

    async def idle(self) -> None:
        """Until no read-back runs (its errors are left to :meth:`finish`)."""
        while self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            await asyncio.sleep(0)  # let the done callback run

    async def finish(self) -> None:
        """Read the rest back and check the whole file (Corruption when it differs)."""
        await self.idle()
        await asyncio.to_thread(_check_file, self._path, self._file, self._crc, self._checked)


def _sync_dirs(directory: Path) -> None:
    for sub in (STORE_DIR, WAL_DIR):
        fsync_dir(directory / sub)
    fsync_dir(directory)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
