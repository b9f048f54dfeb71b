"""Tablet copy of the sys catalog: how a master joining the cluster gets the catalog.

The sys catalog is a tablet, so a new master fetches it the way a tablet server fetches a
replica (seed 003, Kudu's tablet copy), over the same ``TabletCopyService`` calls
(BeginTabletCopySession, FetchData, EndTabletCopySession) served by every master for the
tablet id ``"0" * 32``.  The catalog is small, so both sides are simpler than a tablet
server's:

- **Source** (:class:`CatalogCopySource`): Begin anchors the Raft WAL at the store's applied
  index, copies the store's DuckDB file into a staging directory under the store's lock
  (:meth:`SysCatalogStore.snapshot`: file and applied index ``A`` agree), moves the anchor to
  ``A``, reads the term and the committed config, waits until the local WAL holds the
  committed config's entry and the commit index, and hard-links every WAL segment from the
  one holding ``A`` into the staging directory, noting each one's current length (segments
  only grow, so that prefix never changes).  FetchData returns any chunk of a listed file
  with its CRC32C in a sidecar; EndTabletCopySession (or ``idle_timeout_s`` without a call)
  deletes the staging directory and releases the anchor.
- **Destination** (:func:`copy_catalog`): fetches every file, checking each chunk's CRC32C and
  each whole file's, into ``<catalog dir>/copy-tmp``, then installs it: the store file, the
  WAL segments, and last the consensus metadata (the source's term and committed config, its
  commit index as the hint), so a master that crashes midway finds no consensus metadata and
  copies again from scratch.  The bootstrap that follows replays the copied log after ``A``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from nyala.common.hostport import HostPort
from nyala.consensus.core import HardState, decode_config, encode_config
from nyala.consensus.runtime import ConsensusMetadata, RaftReplica
from nyala.errors import Corruption, IllegalState, InvalidArgument, NotFound, NyalaError, ServiceUnavailable
from nyala.files import fsync_dir
from nyala.master.sys_catalog import SYS_CATALOG_ID, SysCatalogStore
from nyala.proto import consensus_pb2
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc import CallContext, Messenger, RpcServer
from nyala.services import (
    BEGIN_TABLET_COPY_SESSION,
    CHECK_TABLET_COPY_SESSION_ACTIVE,
    END_TABLET_COPY_SESSION,
    FETCH_DATA,
)
from nyala.storage import StorageOptions, TabletStoreManager
from nyala.wal import LogAnchor, SegmentInfo, segments_from

__all__ = ["CatalogCopySource", "copy_catalog"]

log = logging.getLogger("nyala.master")

CHUNK_BYTES = 1 << 20
COPY_TMP = "copy-tmp"
_CALL_TIMEOUT_S = 30.0
_DURABLE_WAIT_S = 5.0


@dataclass(eq=False)
class _Session:
    session_id: bytes
    requestor: str
    directory: Path
    anchor: LogAnchor
    replica: RaftReplica
    paths: list[Path]
    sizes: list[int]
    response: tcpb.BeginTabletCopySessionResponsePB
    last_active: float = field(default_factory=time.monotonic)


class CatalogCopySource:
    """Serves copies of this master's sys catalog (see the module doc)."""

    def __init__(self, staging_root: Path, idle_timeout_s: float = 600.0) -> None:
        self._root = staging_root
        self._idle_timeout_s = idle_timeout_s
        self._sessions: dict[bytes, _Session] = {}
        self.replica: RaftReplica | None = None
        self.store: SysCatalogStore | None = None

    def register(self, rpc: RpcServer) -> None:
        rpc.add_method(BEGIN_TABLET_COPY_SESSION, self.begin_session)
        rpc.add_method(FETCH_DATA, self.fetch_data)
        rpc.add_method(CHECK_TABLET_COPY_SESSION_ACTIVE, self.check_session_active)
        rpc.add_method(END_TABLET_COPY_SESSION, self.end_session)

    def clear_leftovers(self) -> None:
        """Delete staging directories a crash left behind (before serving)."""
        shutil.rmtree(self._root, ignore_errors=True)

    async def close(self) -> None:
        for session in list(self._sessions.values()):
            await self._end(session)

    # -- the calls ----------------------------------------------------------------------------

    async def begin_session(
        self, request: tcpb.BeginTabletCopySessionRequestPB, ctx: CallContext
    ) -> tcpb.BeginTabletCopySessionResponsePB:
        if request.tablet_id != SYS_CATALOG_ID:
            raise NotFound(f"a master serves tablet copies of the sys catalog ({SYS_CATALOG_ID}) only")
        if not request.requestor_uuid:
            raise InvalidArgument("BeginTabletCopySession needs a requestor_uuid")
        replica, store = self.replica, self.store
        if replica is None or store is None:
            raise ServiceUnavailable("the sys catalog is not open yet: this master is still starting")
        await self._expire_idle()
        for old in [s for s in self._sessions.values() if s.requestor == request.requestor_uuid]:
            await self._end(old)  # a destination that starts again replaces its own session
        token = secrets.token_hex(8)
        directory = self._root / token
        anchor = replica.log_anchors.register(max(1, replica.applied_index), f"sys catalog copy {token}")
        try:
            session_id = f"{request.requestor_uuid}-{token}".encode()
            session = await self._build(session_id, directory, request, replica, store, anchor)
        except BaseException:
            replica.log_anchors.release(anchor)
            await asyncio.to_thread(shutil.rmtree, directory, True)
            raise
        self._sessions[session.session_id] = session
        log.info(
            "sys catalog copy session %s for %s: applied index %d, committed %d, %d files",
            token,
            request.requestor_uuid,
            session.response.applied_index,
            session.response.committed_index,
            len(session.paths),
        )
        return session.response

    async def _build(
        self,
        session_id: bytes,
        directory: Path,
        request: tcpb.BeginTabletCopySessionRequestPB,
        replica: RaftReplica,
        store: SysCatalogStore,
        anchor: LogAnchor,
    ) -> _Session:
        await asyncio.to_thread(directory.mkdir, parents=True)
        snapshot = await asyncio.to_thread(store.snapshot, directory / "store")
        applied = snapshot.applied_index
        replica.log_anchors.update(anchor, max(1, applied))
        term, config, committed = replica.term, replica.committed_config, max(replica.applied_index, applied)
        deadline = asyncio.get_running_loop().time() + _DURABLE_WAIT_S
        while replica.wal.last_index < max(config.opid_index, committed):
            if asyncio.get_running_loop().time() > deadline:
                raise ServiceUnavailable("the sys catalog's WAL lags its commit index; try again")
            await asyncio.sleep(0.01)
        segments = segments_from(replica.wal.segments(), applied)
        paths, sizes, kinds = await asyncio.to_thread(_stage, snapshot.files, segments, directory)
        files = []
        for i, (path, size, kind) in enumerate(zip(paths, sizes, kinds, strict=True)):
            crc = await asyncio.to_thread(_crc_of, path, size)
            files.append(tcpb.DataFilePB(file_id=i, kind=kind, name=path.name, size_bytes=size, crc32c=crc))
        response = tcpb.BeginTabletCopySessionResponsePB(
            session_id=session_id,
            session_idle_timeout_ms=int(self._idle_timeout_s * 1000),
            current_term=term,
            applied_index=applied,
            files=files,
            committed_index=committed,
        )
        response.metadata.table_name = "sys.catalog"
        response.committed_config.ParseFromString(encode_config(config))
        return _Session(session_id, request.requestor_uuid, directory, anchor, replica, paths, sizes, response)

    async def fetch_data(self, request: tcpb.FetchDataRequestPB, ctx: CallContext) -> tcpb.FetchDataResponsePB:
        session = self._session(request.session_id)
        if not 0 <= request.file_id < len(session.paths):
            raise InvalidArgument(f"file id {request.file_id} is not in this session (0 to {len(session.paths) - 1})")
        size = session.sizes[request.file_id]
        if not 0 <= request.offset <= size:
            raise InvalidArgument(f"offset {request.offset} is outside file {request.file_id} of {size} bytes")
        if request.max_length < 0:
            raise InvalidArgument(f"max_length must be >= 0, got {request.max_length}")
        length = min(request.max_length or CHUNK_BYTES, CHUNK_BYTES, size - request.offset)
        data = await asyncio.to_thread(_read, session.paths[request.file_id], request.offset, length)
        session.last_active = time.monotonic()
        ctx.add_sidecar(data)
        return tcpb.FetchDataResponsePB(
            file_id=request.file_id,
            offset=request.offset,
            length=len(data),
            chunk_crc32c=crc32c.crc32c(data),
            file_size_bytes=size,
        )

    def check_session_active(
        self, request: tcpb.CheckTabletCopySessionActiveRequestPB, ctx: CallContext
    ) -> tcpb.CheckTabletCopySessionActiveResponsePB:
        session = self._sessions.get(request.session_id)
        if session is not None and request.keepalive:
            session.last_active = time.monotonic()
        return tcpb.CheckTabletCopySessionActiveResponsePB(session_is_active=session is not None)

    async def end_session(
        self, request: tcpb.EndTabletCopySessionRequestPB, ctx: CallContext
    ) -> tcpb.EndTabletCopySessionResponsePB:
        session = self._sessions.get(request.session_id)
        if session is not None:
            await self._end(session)
        return tcpb.EndTabletCopySessionResponsePB()

    def _session(self, session_id: bytes) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFound("this sys catalog copy session is not active (it ended, expired or never existed)")
        return session

    async def _expire_idle(self) -> None:
        now = time.monotonic()
        for session in [s for s in self._sessions.values() if now - s.last_active >= self._idle_timeout_s]:
            await self._end(session)

    async def _end(self, session: _Session) -> None:
        self._sessions.pop(session.session_id, None)
        session.replica.log_anchors.release(session.anchor)
        await asyncio.to_thread(shutil.rmtree, session.directory, True)


def _stage(
    store_files: tuple[str, ...], segments: list[SegmentInfo], directory: Path
) -> tuple[list[Path], list[int], list[tcpb.DataFileKind]]:
    paths: list[Path] = []
    sizes: list[int] = []
    kinds: list[tcpb.DataFileKind] = []
    for name in store_files:
        path = Path(name)
        paths.append(path)
        sizes.append(path.stat().st_size)
        kinds.append(tcpb.STORE_WAL_FILE if name.endswith(".wal") else tcpb.STORE_FILE)
    wal_dir = directory / "wal"
    wal_dir.mkdir()
    for segment in segments:
        staged = wal_dir / os.path.basename(segment.path)
        os.link(segment.path, staged)
        paths.append(staged)
        sizes.append(segment.size_bytes)  # the active segment grows after this: only this much is listed
        kinds.append(tcpb.WAL_SEGMENT)
    return paths, sizes, kinds


def _read(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise IllegalState(f"{path.name} is shorter than listed ({offset + len(data)} bytes)")
    return data


def _crc_of(path: Path, size: int) -> int:
    crc = 0
    with open(path, "rb") as f:
        left = size
        while left:
            piece = f.read(min(left, 8 << 20))
            if not piece:
                raise IllegalState(f"{path.name} is shorter than listed")
            crc = crc32c.crc32c(piece, crc)
            left -= len(piece)
    return crc


# -- the destination ----------------------------------------------------------------------------


async def copy_catalog(
    messenger: Messenger, source: HostPort, own_uuid: str, catalog_dir: Path, store_dir: Path, raft_dir: Path
) -> consensus_pb2.RaftConfigPB:
    """Copy the sys catalog from the master at ``source`` and install it; return its config.

    Anything in ``catalog_dir`` is replaced.  The consensus metadata is written last: until it
    exists, a restart copies again.
    """
    begin = await messenger.call(
        source,
        BEGIN_TABLET_COPY_SESSION,
        tcpb.BeginTabletCopySessionRequestPB(requestor_uuid=own_uuid, tablet_id=SYS_CATALOG_ID),
        timeout=_CALL_TIMEOUT_S,
    )
    success = False
    try:
        config = decode_config(begin.committed_config.SerializeToString())
        if not config.contains(own_uuid):
            raise IllegalState(
                f"the sys catalog's committed config at {source} does not name this master ({own_uuid}) yet"
            )
        tmp = catalog_dir / COPY_TMP
        await asyncio.to_thread(_reset, catalog_dir)
        written = []
        for f in begin.files:
            sub = "wal" if f.kind == tcpb.WAL_SEGMENT else "store"
            if f.kind == tcpb.UNKNOWN_FILE or not f.name or "/" in f.name or f.name.startswith("."):
                raise Corruption(f"the sys catalog copy lists a bad file {f.name!r} of kind {f.kind}")
            path = tmp / sub / f.name
            await _fetch_file(messenger, source, begin.session_id, f, path)
            written.append((f.kind, path))
        store_files = [str(p) for kind, p in written if kind != tcpb.WAL_SEGMENT]
        wal_dir = tmp / "wal"
        hint = max(begin.applied_index, begin.committed_index)
        await asyncio.to_thread(
            _install, store_dir, raft_dir, store_files, wal_dir, begin.current_term, hint, begin.committed_config
        )
        await asyncio.to_thread(shutil.rmtree, tmp, True)
        success = True
        log.info(
            "sys catalog copied from %s: applied index %d, term %d, config index %d",
            source,
            begin.applied_index,
            begin.current_term,
            config.opid_index,
        )
        return begin.committed_config
    finally:
        try:
            await messenger.call(
                source,
                END_TABLET_COPY_SESSION,
                tcpb.EndTabletCopySessionRequestPB(session_id=begin.session_id, is_success=success),
                timeout=_CALL_TIMEOUT_S,
            )
        except NyalaError as e:  # the source expires it anyway
            log.info("could not end the sys catalog copy session on %s: %s", source, e)


async def _fetch_file(
    messenger: Messenger, source: HostPort, session_id: bytes, f: tcpb.DataFilePB, path: Path
) -> None:
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    crc, offset = 0, 0
    with open(path, "wb") as out:  # noqa: ASYNC230 (a small file; writes and fsync run on threads)
        while offset < f.size_bytes:
            response, sidecars = await messenger.call_with_sidecars(
                source,
                FETCH_DATA,
                tcpb.FetchDataRequestPB(session_id=session_id, file_id=f.file_id, offset=offset),
                timeout=_CALL_TIMEOUT_S,
            )
            if len(sidecars) != 1 or response.offset != offset or len(sidecars[0]) != response.length:
                raise Corruption(f"sys catalog copy: a bad chunk of {f.name} at offset {offset}")
            data = bytes(sidecars[0])
            if not data or crc32c.crc32c(data) != response.chunk_crc32c:
                raise Corruption(f"sys catalog copy: the chunk of {f.name} at offset {offset} fails its CRC32C")
            await asyncio.to_thread(out.write, data)
            crc = crc32c.crc32c(data, crc)
            offset += len(data)
        await asyncio.to_thread(os.fsync, out.fileno())
    if crc != f.crc32c:
        raise Corruption(f"sys catalog copy: {f.name} fails its whole-file CRC32C")


def _reset(catalog_dir: Path) -> None:
    shutil.rmtree(catalog_dir, ignore_errors=True)
    catalog_dir.mkdir(parents=True)


def _install(
    store_dir: Path,
    raft_dir: Path,
    store_files: list[str],
    wal_dir: Path,
    term: int,
    commit_hint: int,
    config_pb: consensus_pb2.RaftConfigPB,
) -> None:
    manager = TabletStoreManager(str(store_dir), StorageOptions(storage_threads=1, storage_memory_limit_bytes=64 << 20))
    try:
        manager.install_snapshot(SYS_CATALOG_ID, store_files, move=True)
    finally:
        manager.close()
    raft_dir.mkdir(parents=True, exist_ok=True)
    fsync_dir(wal_dir)
    os.replace(wal_dir, raft_dir / "wal")
    fsync_dir(raft_dir)
    config = decode_config(config_pb.SerializeToString())
    ConsensusMetadata(HardState(term, "", commit_hint), config).save(raft_dir)
