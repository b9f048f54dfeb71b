"""The source side of a tablet copy: sessions that hand out a consistent snapshot of a tablet.

A destination opens a session with BeginTabletCopySession.  The session is built in four
steps; the tablet's writes wait for none of them but a checkpoint of DuckDB's WAL (when it
holds anything) under the tablet's lock:

1. Anchor the WAL at the store's durable index (a ``REQUIRED`` anchor in the replica's
   :class:`~nyala.wal.LogAnchorRegistry`), so no segment the copy may need is deleted.
2. Pin the store's files (:meth:`DuckDBTabletStore.pin`): once a MemRowSet flush in progress
   has committed, and DuckDB's WAL is checkpointed, nothing writes the file until the pin
   goes, while inserts and upserts go on into the MemRowSet.  The pinned file is copied
   inside the kernel (``copy_file_range``) into the session's staging directory, with no
   fsync (the copy is thrown away when the session ends), and the pin released: the transfer
   streams from the staging copy.  The MemRowSet is not flushed (Kudu copies a tablet without
   its MemRowSet too): the file holds the store's durable index ``A``, and the entries after
   it, up to the store's applied index ``C`` at the pin, travel in the WAL.
3. Move the anchor to ``A``, wait until the local WAL holds ``C`` and the committed config's
   entry, and link (``os.link``) into the staging directory every WAL segment from the one
   holding entry ``A`` to the active one, noting the active segment's current length: the
   destination reads only up to it and ignores a torn last batch, as recovery does.  A link
   keeps the bytes even if the segment is later garbage collected, and segments are
   append-only, so the listed prefix never changes.
4. Compute each file's CRC32C, then answer with the tablet's metadata at ``A`` (schema and
   version as of ``A``), the replica's term and committed config, ``A``, ``C`` (the
   destination applies the copied log up to it before it serves) and the file list.

FetchData reads any chunk of a listed file by offset (at most
``tablet_copy_transfer_chunk_size_bytes``) and returns it as a sidecar with its CRC32C; it is
stateless, so a destination may fetch in any order, several chunks at once, and resume from
any offset.  The staged files are memory-mapped for the session and a chunk is a slice of the
mapping: the socket takes its bytes straight from the page cache, with no copy in between
(the CRC is computed on a worker thread, which also faults the pages in).  A session ends
with EndTabletCopySession, or after ``tablet_copy_idle_timeout_sec`` without a call: its
staging directory is deleted and its anchor released.  Sessions live in memory; the staging
directories of a crashed server are deleted at its next start.

Why the committed config is read before the WAL's length: the destination restarts from the
copied log and that config, and a config is only ever committed by an entry of the log.  The
source waits (briefly) until its durable log holds that entry, so the copied log always does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import errno
import json
import logging
import mmap
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from nyala.consensus.runtime import RaftReplica
from nyala.errors import IllegalState, InvalidArgument, IOFailure, NotFound, NyalaError
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.storage import DuckDBTabletStore, PinnedFiles
from nyala.tserver.manager import TabletManager
from nyala.tserver.metadata import TabletMetadata
from nyala.tserver.tablet import TabletReplica, config_to_pb
from nyala.wal import LogAnchor, LogAnchorRegistry, SegmentInfo, segments_from

__all__ = ["SESSIONS_DIR", "CopySession", "SourceFile", "TabletCopySourceManager", "file_crc32c"]

log = logging.getLogger("nyala.tserver")

#: Under the server's data directory: one staging directory per session.
SESSIONS_DIR = "tablet-copy-sessions"
_READ_PIECE = 8 << 20
# The staging copy publishes its progress after each piece: a fetch waits for at most one.
_STAGE_PIECE = 16 << 20
# How long Begin waits for the committed config's entry to be durable in the local WAL (it
# normally is; a leader's own copy of an entry a majority of followers committed may lag by an
# fsync).
_CONFIG_WAIT_S = 5.0
_SNAPSHOT_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file of a session, as listed to the destination."""

    file_id: int
    kind: tcpb.DataFileKind
    name: str
    path: Path
    size: int
    crc32c: int
    #: The first ``size`` bytes, mapped (None for an empty file).
    mapping: mmap.mmap | None = None
    #: The CRC32C of each chunk of the session's chunk size from offset 0, when computed ahead.
    chunk_crcs: tuple[int, ...] = ()
    #: The background copy that fills the staged file (None once a file is complete).
    staging: _Staging | None = None
    #: This file's place in ``staging``.
    staging_index: int = 0

    def to_pb(self) -> tcpb.DataFilePB:
        return tcpb.DataFilePB(
            file_id=self.file_id, kind=self.kind, name=self.name, size_bytes=self.size, crc32c=self.crc32c
        )


@dataclass(eq=False)
class CopySession:
    """What one destination is copying: the staged files and the anchor that protects the WAL."""

    session_id: bytes
    tablet_id: str
    requestor: str
    directory: Path
    anchors: LogAnchorRegistry
    anchor: LogAnchor
    files: list[SourceFile]
    response: tcpb.BeginTabletCopySessionResponsePB
    last_active: float
    #: Seconds the store snapshot held the tablet's lock: the tablet's writes waited for it.
    snapshot_s: float = 0.0
    #: Seconds of each step of BeginTabletCopySession, in order (logged; the benchmark reads them).
    phases: dict[str, float] = field(default_factory=dict)
    #: The background copy of the store's pinned files.
    staging: _Staging | None = None
    bytes_served: int = 0
    ended: bool = field(default=False)


def file_crc32c(path: Path | str, size: int) -> int:
    """CRC32C of the first ``size`` bytes of a file (the crc32c package releases the GIL)."""
    return _file_crcs(path, size, 0)[0]


def _file_crcs(
    path: Path | str, size: int, chunk: int, stopping: Callable[[], bool] = lambda: False
) -> tuple[int, tuple[int, ...]]:
    """CRC32C of the first ``size`` bytes of a file and, with ``chunk``, of each ``chunk``
    bytes from offset 0.  The file is read into one reused buffer (no copy per piece); a
    chunk's CRC is computed while its bytes are still in the processor's cache.  IOFailure
    when ``stopping()`` turns true meanwhile."""
    piece = chunk or _READ_PIECE
    buffer = bytearray(min(piece, size))
    view = memoryview(buffer)
    crc, chunks = 0, []
    with open(path, "rb", buffering=0) as f:
        left = size
        while left:
            if stopping():
                raise IOFailure(f"{path}: no longer needed")
            got = f.readinto(view[: min(piece, left)])
            if not got:
                raise IOFailure(f"{path} is shorter than the {size} bytes listed for it")
            crc = crc32c.crc32c(view[:got], crc)
            if chunk:
                if got != min(piece, left):
                    raise IOFailure(f"{path}: a short read of {got} bytes at offset {size - left}")
                chunks.append(crc32c.crc32c(view[:got]))
            left -= got
    return crc, tuple(chunks)


class TabletCopySourceManager:
    """The tablet copy sessions this server serves as a source."""

    def __init__(
        self,
        root: Path,
        tablets: TabletManager,
        *,
        chunk_size_bytes: int,
        idle_timeout_s: float,
        location: Callable[[], str] = lambda: "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._dir = root / SESSIONS_DIR
        self._tablets = tablets
        self.chunk_size_bytes = chunk_size_bytes
        self.idle_timeout_s = idle_timeout_s
        self._location = location
        self._clock = clock
        self._sessions: dict[bytes, CopySession] = {}
        self._expiry: asyncio.Task[None] | None = None
        #: Bytes returned by FetchData since start.
        self.bytes_served = 0
        self.sessions_started = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def clear_leftovers(self) -> None:
        """Delete the staging directories a crash left behind (call before serving)."""
        if self._dir.exists():
            log.info("removing tablet copy staging files left by an earlier run in %s", self._dir)
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        """Start ending idle sessions in the background."""
        if self._expiry is None:
            self._expiry = asyncio.get_running_loop().create_task(self._expire_loop(), name="tablet-copy-expiry")

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
            self._expiry = None
        for session in list(self._sessions.values()):
            await self._end(session, "the server is stopping")

    async def _expire_loop(self) -> None:
        interval = max(0.05, min(10.0, self.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(interval)
            await self.expire_idle()

    async def expire_idle(self) -> list[bytes]:
        """End every session idle for the timeout or longer; return their ids."""
        now = self._clock()
        expired = [s for s in self._sessions.values() if now - s.last_active >= self.idle_timeout_s]
        for session in expired:
            await self._end(session, f"idle for {self.idle_timeout_s:g} s")
        return [s.session_id for s in expired]

    def sessions(self) -> list[CopySession]:
        return list(self._sessions.values())

    # -- the calls ------------------------------------------------------------------------------

    async def begin(self, tablet_id: str, requestor: str) -> tcpb.BeginTabletCopySessionResponsePB:
        """Open a session on a RUNNING replica of ``tablet_id`` (see the module doc)."""
        if not requestor:
            raise InvalidArgument("BeginTabletCopySession needs a requestor_uuid")
        tablet = self._tablets.get(tablet_id)
        store, raft = tablet.require_running()
        # A destination that starts again (it restarted, or retries) replaces its own session.
        for old in [s for s in self._sessions.values() if (s.tablet_id, s.requestor) == (tablet_id, requestor)]:
            await self._end(old, "replaced by a new session of the same requestor")
        token = secrets.token_hex(8)
        session_id = f"{requestor}-{tablet_id}-{token}".encode()
        directory = self._dir / token
        anchors = raft.log_anchors
        anchor = anchors.register(max(1, store.durable_index()), f"tablet copy session {token}")
        try:
            session = await self._build(session_id, tablet, store, raft, requestor, directory, anchors, anchor)
        except BaseException:
            anchors.release(anchor)
            await asyncio.to_thread(shutil.rmtree, directory, True)
            raise
        self._sessions[session_id] = session
        self.sessions_started += 1
        log.info(
            "tablet copy session %s: tablet %s for %s at applied index %d (committed %d), %d files, %d bytes; "
            "the store snapshot held the tablet's lock %.3f s; begin phases: %s",
            token,
            tablet_id,
            requestor,
            session.response.applied_index,
            session.response.committed_index,
            len(session.files),
            sum(f.size for f in session.files),
            session.snapshot_s,
            ", ".join(f"{name} {seconds:.3f} s" for name, seconds in session.phases.items()),
        )
        return session.response

    async def _build(
        self,
        session_id: bytes,
        tablet: TabletReplica,
        store: DuckDBTabletStore,
        raft: RaftReplica,
        requestor: str,
        directory: Path,
        anchors: LogAnchorRegistry,
        anchor: LogAnchor,
    ) -> CopySession:
        phases: dict[str, float] = {}
        await asyncio.to_thread(directory.mkdir, parents=True)
        staging, meta = await self._pin(tablet, store, directory / "store", phases)
        try:
            started = time.perf_counter()
            checksums = await staging.checksums()
            phases["store CRC32C while copying"] = time.perf_counter() - started
            snapshot = staging.snapshot
            applied, committed = snapshot.applied_index, max(snapshot.applied_index, staging.applied_index)
            anchors.update(anchor, max(1, applied))
            term, config = raft.term, raft.committed_config
            started = time.perf_counter()
            await self._wait_durable(raft, max(config.opid_index, committed))
            segments = segments_from(raft.wal.segments(), applied)
            phases["WAL wait"] = time.perf_counter() - started
            files = await asyncio.to_thread(_stage, staging, checksums, segments, directory, phases)
        except BaseException:
            staging.stop()
            raise
        response = tcpb.BeginTabletCopySessionResponsePB(
            session_id=session_id,
            session_idle_timeout_ms=int(self.idle_timeout_s * 1000),
            current_term=term,
            applied_index=applied,
            files=[f.to_pb() for f in files],
            source_location=self._location(),
            committed_index=committed,
        )
        response.metadata.CopyFrom(_metadata_pb(meta))
        response.committed_config.CopyFrom(config_to_pb(config))
        return CopySession(
            session_id,
            tablet.tablet_id,
            requestor,
            directory,
            anchors,
            anchor,
            files,
            response,
            self._clock(),
            staging.locked_s,
            phases=phases,
            staging=staging,
        )

    async def _pin(
        self, tablet: TabletReplica, store: DuckDBTabletStore, directory: Path, phases: dict[str, float]
    ) -> tuple[_Staging, TabletMetadata]:
        """The store's files pinned and being copied into ``directory`` (see :class:`_Staging`),
        and the tablet metadata as of the files' index.

        The store's files are pinned (:meth:`DuckDBTabletStore.pin`: nothing writes them while
        inserts and upserts go on into the MemRowSet).  The MemRowSet is not flushed: its rows
        travel in the WAL segments and the destination applies them from there, as a restart
        does.

        A schema change is applied to the store and then settled in the metadata by the apply
        thread; one that lands between the pin and reading the metadata shows as a schema that
        differs from the files', and the files are pinned again.
        """
        loop = asyncio.get_running_loop()
        for _ in range(_SNAPSHOT_ATTEMPTS):
            started = time.perf_counter()
            staging = await _start_staging(store, directory, self.chunk_size_bytes, loop)
            phases["pin"] = phases.get("pin", 0.0) + time.perf_counter() - started
            meta = tablet.meta.settle_alter(staging.snapshot.applied_index)
            if meta.schema == staging.snapshot.schema:
                return staging, meta
            staging.stop()
            await staging.stopped()
            await asyncio.to_thread(shutil.rmtree, directory, True)
        raise IllegalState(
            f"tablet {tablet.tablet_id}: its schema kept changing while a tablet copy snapshot was taken"
        )

    async def _wait_durable(self, raft: RaftReplica, index: int) -> None:
        """Until the local WAL holds entry ``index`` (the committed config's, or the last one the
        store had applied: a leader's own copy of an entry may lag the commit by an fsync)."""
        deadline = asyncio.get_running_loop().time() + _CONFIG_WAIT_S
        while raft.wal.last_index < index:
            if asyncio.get_running_loop().time() > deadline:
                raise IllegalState(
                    f"tablet {raft.group_id}: committed entry {index} is not in the local WAL "
                    f"(it ends at {raft.wal.last_index}); try again"
                )
            await asyncio.sleep(0.01)

    def _session(self, session_id: bytes) -> CopySession:
        session = self._sessions.get(session_id)
        if session is None or session.ended:
            raise NotFound(
                f"tablet copy session {session_id.decode(errors='replace')!r} is not active on this server "
                f"(it ended, expired or never existed); begin a new one"
            )
        return session

    async def fetch(
        self, session_id: bytes, file_id: int, offset: int, max_length: int
    ) -> tuple[tcpb.FetchDataResponsePB, memoryview]:
        """One chunk of a listed file: at most the chunk size from ``offset``, with its CRC32C."""
        session = self._session(session_id)
        now = self._clock()
        if now - session.last_active >= self.idle_timeout_s:  # the expiry task has not run yet
            await self._end(session, f"idle for {self.idle_timeout_s:g} s")
            self._session(session_id)  # raises NotFound
        session.last_active = now
        if not 0 <= file_id < len(session.files):
            raise InvalidArgument(
                f"file id {file_id} is not in tablet copy session {session_id.decode(errors='replace')!r}, "
                f"which lists files 0 to {len(session.files) - 1}"
            )
        source = session.files[file_id]
        if offset < 0 or offset > source.size:
            raise InvalidArgument(f"offset {offset} is outside file {file_id} ({source.name}) of {source.size} bytes")
        if max_length < 0:
            raise InvalidArgument(f"max_length must be >= 0 (0 means the server's chunk size), got {max_length}")
        length = min(max_length or self.chunk_size_bytes, self.chunk_size_bytes, source.size - offset)
        if source.staging is not None:
            await source.staging.wait_copied(source.staging_index, offset + length)
        data = memoryview(source.mapping)[offset : offset + length] if source.mapping is not None else memoryview(b"")
        chunk, at = divmod(offset, self.chunk_size_bytes)
        if not length:
            crc = 0
        elif at == 0 and chunk < len(source.chunk_crcs) and length == min(self.chunk_size_bytes, source.size - offset):
            # Computed in Begin from the pinned file; the served bytes are the staged copy's,
            # so a copy that differed from the file would fail the destination's check.
            crc = source.chunk_crcs[chunk]
        else:
            crc = await asyncio.to_thread(crc32c.crc32c, data)
        session.bytes_served += length
        self.bytes_served += length
        session.last_active = self._clock()
        response = tcpb.FetchDataResponsePB(
            file_id=file_id, offset=offset, length=length, chunk_crc32c=crc, file_size_bytes=source.size
        )
        return response, data

    def check(self, session_id: bytes, keepalive: bool) -> bool:
        """Whether the session is active; ``keepalive`` restarts its idle timeout."""
        session = self._sessions.get(session_id)
        if session is None or session.ended:
            return False
        now = self._clock()
        if now - session.last_active >= self.idle_timeout_s:
            return False  # the expiry task ends it
        if keepalive:
            session.last_active = now
        return True

    async def end(self, session_id: bytes, success: bool) -> None:
        session = self._session(session_id)
        await self._end(session, "completed" if success else "ended by the destination after a failure")

    async def _end(self, session: CopySession, why: str) -> None:
        if session.ended:
            return
        session.ended = True
        self._sessions.pop(session.session_id, None)
        try:
            session.anchors.release(session.anchor)
        except NyalaError:
            pass  # released already
        if session.staging is not None:
            session.staging.stop()
        for f in session.files:
            _unmap(f)
        await asyncio.to_thread(shutil.rmtree, session.directory, True)
        log.info(
            "tablet copy session %s of tablet %s ended (%s) after serving %d bytes",
            session.session_id.decode(errors="replace"),
            session.tablet_id,
            why,
            session.bytes_served,
        )


class _Staging:
    """A store's pinned files, copied into a session's staging directory in the background.

    Two worker threads read the pinned files: one copies them, in pieces, inside the kernel
    (``copy_file_range``, page cache to page cache, no fsync: the staging files go with the
    session, and a source that crashes takes its sessions with it) into staging files created
    at their full size, and publishes how far it has come; the other computes each file's
    CRC32C and each chunk's, which Begin answers with.  The pin is released when both have
    ended (or were stopped), never before, so neither ever reads a file DuckDB may be
    changing.  Begin answers once the CRCs are known, the copy going on: a FetchData of a
    range the copy has not reached yet waits for it (the local copy runs several times faster
    than any transfer, so a fetch seldom waits).
    """

    def __init__(self, pinned: PinnedFiles, staged: list[Path], chunk: int, loop: asyncio.AbstractEventLoop) -> None:
        self._pinned = pinned
        self.snapshot = dataclasses.replace(pinned.snapshot, files=tuple(str(p) for p in staged))
        #: The store's applied index at the pin: the WAL carries the entries after the files'.
        self.applied_index = pinned.applied_index
        self.locked_s = pinned.locked_s
        self.sizes = [os.path.getsize(p) for p in pinned.snapshot.files]
        self._sources = list(pinned.snapshot.files)
        self._staged = staged
        self._chunk = chunk
        self._loop = loop
        self.copied = [0] * len(staged)
        self._error: NyalaError | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._stopping = False
        self._holders = 2
        self._holders_lock = threading.Lock()
        self._crcs: concurrent.futures.Future[list[tuple[int, tuple[int, ...]]]] = concurrent.futures.Future()
        self._ended: concurrent.futures.Future[float] = concurrent.futures.Future()
        for path, size in zip(staged, self.sizes, strict=True):
            with open(path, "wb") as f:
                f.truncate(size)  # mapped at its full size at once; a range is served once copied

    def start(self) -> None:
        threading.Thread(target=self._copy, name="tablet-copy-staging", daemon=True).start()
        threading.Thread(target=self._checksum, name="tablet-copy-crc", daemon=True).start()

    def stop(self) -> None:
        """Stop both workers at their next piece (they then release the pin)."""
        self._stopping = True

    async def stopped(self) -> float:
        """Once the copy has ended: the seconds the files stayed pinned for it."""
        return await asyncio.wrap_future(self._ended)

    async def checksums(self) -> list[tuple[int, tuple[int, ...]]]:
        """Each file's CRC32C and its chunks', in order (IOFailure when they could not be read)."""
        return await asyncio.wrap_future(self._crcs)

    async def wait_copied(self, index: int, end: int) -> None:
        """Until file ``index`` is copied up to ``end`` (IOFailure when the copy failed)."""
        if self.copied[index] >= end:
            return
        if self._error is not None:
            raise self._error
        future = self._loop.create_future()
        self._waiters.append((index, end, future))
        await future

    # -- the workers ------------------------------------------------------------------------

    def _copy(self) -> None:
        started = time.perf_counter()
        try:
            for index, (source, staged, size) in enumerate(zip(self._sources, self._staged, self.sizes, strict=True)):
                with open(source, "rb") as fin, open(staged, "r+b") as fout:
                    done = 0
                    while done < size:
                        if self._stopping:
                            raise IOFailure("the tablet copy session ended")
                        done += _copy_range(fin.fileno(), fout.fileno(), done, min(_STAGE_PIECE, size - done))
                        self._publish(self._advance, index, done)
        except Exception as e:
            error = e if isinstance(e, IOFailure) else IOFailure(f"cannot stage {self._sources}: {e}")
            self._publish(self._fail, error)
        finally:
            self._let_go()
            self._ended.set_result(time.perf_counter() - started)

    def _checksum(self) -> None:
        try:
            crcs = []
            for source, size in zip(self._sources, self.sizes, strict=True):
                crcs.append(_file_crcs(source, size, self._chunk, lambda: self._stopping))
            self._crcs.set_result(crcs)
        except Exception as e:
            self._crcs.set_exception(e if isinstance(e, IOFailure) else IOFailure(f"cannot read {self._sources}: {e}"))
        finally:
            self._let_go()

    def _let_go(self) -> None:
        with self._holders_lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            self._pinned.release()

    def _publish(self, callback: Callable[..., None], *args: object) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass  # the loop is closed: the server is gone, and nobody waits

    # -- on the event loop ------------------------------------------------------------------

    def _advance(self, index: int, copied: int) -> None:
        self.copied[index] = copied
        still = []
        for waiter in self._waiters:
            i, end, future = waiter
            if i == index and end <= copied:
                if not future.done():
                    future.set_result(None)
            else:
                still.append(waiter)
        self._waiters = still

    def _fail(self, error: NyalaError) -> None:
        self._error = error
        for _, _, future in self._waiters:
            if not future.done():
                future.set_exception(error)
        self._waiters = []


async def _start_staging(
    store: DuckDBTabletStore, directory: Path, chunk: int, loop: asyncio.AbstractEventLoop
) -> _Staging:
    """Pin the store's files and start copying them into ``directory``.

    The pin is taken on a worker thread; if Begin is given up while that thread runs, the pin
    it takes is released as soon as it has one, so a pin never outlives its session.
    """

    def pin_and_start() -> _Staging:
        pinned = store.pin()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            staged = [directory / os.path.basename(p) for p in pinned.snapshot.files]
            staging = _Staging(pinned, staged, chunk, loop)
        except BaseException as e:
            pinned.release()
            if isinstance(e, OSError):
                raise IOFailure(f"tablet {store.tablet_id}: cannot stage its store files in {directory}: {e}") from e
            raise
        staging.start()
        return staging

    future = loop.run_in_executor(None, pin_and_start)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(lambda f: f.result().stop() if not f.cancelled() and f.exception() is None else None)
        raise


def _copy_range(fin: int, fout: int, offset: int, length: int) -> int:
    """Copy ``length`` bytes at ``offset`` between two files, inside the kernel where it can."""
    try:
        copied = os.copy_file_range(fin, fout, length, offset, offset)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise
        data = os.pread(fin, length, offset)  # another filesystem, an old kernel: through memory
        copied = os.pwrite(fout, data, offset) if data else 0
    if not copied:
        raise IOFailure(f"a pinned file ended at offset {offset}, before its listed size")
    return copied


def _stage(
    staging: _Staging,
    checksums: list[tuple[int, tuple[int, ...]]],
    segments: list[SegmentInfo],
    directory: Path,
    phases: dict[str, float],
) -> list[SourceFile]:
    """Describe the store's staged files, link the WAL segments into ``directory`` and
    describe them: every file of the session."""
    started = time.perf_counter()
    files: list[SourceFile] = []
    for index, (path, size, (crc, chunks)) in enumerate(
        zip(staging.snapshot.files, staging.sizes, checksums, strict=True)
    ):
        kind = tcpb.STORE_WAL_FILE if path.endswith(".wal") else tcpb.STORE_FILE
        mapping = _map(Path(path), size)
        files.append(
            SourceFile(len(files), kind, Path(path).name, Path(path), size, crc, mapping, chunks, staging, index)
        )
    wal_dir = directory / "wal"
    wal_dir.mkdir()
    for segment in segments:
        staged = wal_dir / os.path.basename(segment.path)
        try:
            os.link(segment.path, staged)
        except OSError as e:
            raise IOFailure(f"tablet {staging.snapshot.tablet_id}: cannot stage WAL segment {segment.path}: {e}") from e
        # The active segment grows after this; only what is written now is listed.
        size = segment.size_bytes
        files.append(
            SourceFile(
                len(files), tcpb.WAL_SEGMENT, staged.name, staged, size, file_crc32c(staged, size), _map(staged, size)
            )
        )
    phases["WAL links and CRC32C"] = time.perf_counter() - started
    return files


def _map(path: Path, size: int) -> mmap.mmap | None:
    """The first ``size`` bytes of a staged file, mapped.  Staged files never shrink below
    their listed size (a store file is created at its size; a WAL segment only grows, and
    closing it cuts only its preallocated tail), so no page of the mapping can vanish."""
    if not size:
        return None
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    mapping.madvise(mmap.MADV_SEQUENTIAL)
    return mapping


def _unmap(f: SourceFile) -> None:
    if f.mapping is not None:
        try:
            f.mapping.close()
        except BufferError:
            pass  # a chunk is still on its way to a socket: the mapping closes when it is sent


def _metadata_pb(meta: TabletMetadata) -> tcpb.TabletCopyMetadataPB:
    return tcpb.TabletCopyMetadataPB(
        table_id=meta.table_id,
        table_name=meta.table_name,
        schema=meta.schema.to_json(),
        schema_version=meta.schema_version,
        partition=json.dumps(meta.partition.to_dict()).encode(),
        partition_schema=json.dumps(meta.partition_schema.to_dict()).encode(),
    )
