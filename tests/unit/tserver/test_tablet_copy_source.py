"""A tablet copy source's sessions, driven directly (no RPC): snapshot and file list, chunks
in any order, bad input, expiry with an injected clock, and the WAL anchor a session holds."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import crc32c
import pytest

from nyala.common.hostport import HostPort
from nyala.consensus.core import RaftConfig, RaftOptions
from nyala.consensus.runtime import RaftTransport, ReplicaOptions
from nyala.errors import InvalidArgument, IOFailure, NotFound
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc import Messenger, RpcServer
from nyala.rpc.loop import run
from nyala.storage import DuckDBTabletStore, StorageOptions, TabletStoreManager
from nyala.testing.wait import wait_for_async
from nyala.tserver import tablet_copy_source
from nyala.tserver.manager import TabletManager
from nyala.tserver.tablet import TabletReplica
from nyala.tserver.tablet_copy_source import SESSIONS_DIR, TabletCopySourceManager
from nyala.wal import AnchorKind, WalOptions

from .conftest import metadata
from .test_manager import insert

ME = "a" * 32
CONFIG = RaftConfig.of_voters([ME])
# Small WAL segments so that a few writes fill several; no MemRowSet, so every apply is durable.
OPTIONS = ReplicaOptions(
    raft=RaftOptions(raft_tick_interval_ms=10, raft_heartbeat_interval_ms=20),
    wal=WalOptions(segment_size_bytes=4096, preallocate_segments=False),
    wal_gc_interval_s=0.0,  # the replica collects its WAL after every apply
)
STORAGE = StorageOptions(storage_threads=1, flush_threshold_rows=0)
STORAGE_WITH_MEMROWSET = StorageOptions(storage_threads=1, flush_threshold_rows=1000)
CHUNK = 4096
REQUESTOR = "b" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def with_source(
    root: Path,
    body: Callable[[TabletManager, TabletCopySourceManager, Clock], Awaitable[None]],
    storage: StorageOptions = STORAGE,
) -> None:
    messenger = Messenger()
    transport = RaftTransport(ME, HostPort("127.0.0.1", 1), messenger, RpcServer(), tick_interval_ms=10)
    transport.start()
    executor = ThreadPoolExecutor(2)
    manager = TabletManager(root, ME, transport, executor, OPTIONS, storage)
    clock = Clock()
    sources = TabletCopySourceManager(
        root, manager, chunk_size_bytes=CHUNK, idle_timeout_s=60, location=lambda: "/dc1", clock=clock
    )
    sources.clear_leftovers()
    try:
        await manager.open_all()
        await body(manager, sources, clock)
    finally:
        await sources.stop()
        await manager.close()
        await transport.close()
        await messenger.close()
        executor.shutdown()


async def tablet_with_rows(manager: TabletManager, batches: int = 10) -> TabletReplica:
    tablet = await manager.create(metadata("t1"), CONFIG)
    for b in range(batches):
        await insert(tablet, list(range(b * 50, b * 50 + 50)))
    return tablet


async def fetch_file(sources: TabletCopySourceManager, session_id: bytes, f: tcpb.DataFilePB) -> bytes:
    """Every chunk of a file, fetched last chunk first, reassembled."""
    offsets = list(range(0, f.size_bytes, CHUNK))
    pieces: dict[int, memoryview] = {}
    for offset in reversed(offsets):
        response, data = await sources.fetch(session_id, f.file_id, offset, 0)
        assert (response.offset, response.length, response.file_size_bytes) == (offset, len(data), f.size_bytes)
        assert response.chunk_crc32c == crc32c.crc32c(data)
        assert len(data) == min(CHUNK, f.size_bytes - offset)
        pieces[offset] = data
    return b"".join(pieces[o] for o in offsets)


def test_a_session_lists_a_consistent_snapshot_and_anchors_the_wal(tmp_path: Path) -> None:
    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        tablet = await tablet_with_rows(manager)
        assert tablet.store is not None
        assert tablet.raft is not None
        begun = await sources.begin("t1", REQUESTOR)
        applied = begun.applied_index
        assert applied == tablet.store.applied_index() > 0
        assert begun.committed_index == applied  # no MemRowSet: the store file holds every applied entry
        assert begun.current_term == tablet.raft.term
        assert [p.permanent_uuid for p in begun.committed_config.peers] == [ME]
        assert begun.metadata.table_id == "table-1"
        assert begun.source_location == "/dc1"
        kinds = [f.kind for f in begun.files]
        assert kinds[0] == tcpb.STORE_FILE
        assert begun.files[0].name == "t1.duckdb"
        segments = [f for f in begun.files if f.kind == tcpb.WAL_SEGMENT]
        assert len(segments) >= 1
        assert kinds == [tcpb.STORE_FILE] + [tcpb.WAL_SEGMENT] * len(segments)
        # The segments run from the one holding the applied entry to the active one.
        wal = tablet.raft.wal.segments()
        listed = [w for w in wal if w.path.endswith(tuple(f.name for f in segments))]
        assert listed[0].min_index <= applied
        assert listed[-1].seqno == wal[-1].seqno
        assert [f.file_id for f in begun.files] == list(range(len(begun.files)))
        anchors = [a for a in tablet.raft.log_anchors.snapshot() if a.owner.startswith("tablet copy session")]
        assert [(a.kind, a.index) for a in anchors] == [(AnchorKind.REQUIRED, applied)]
        (session,) = sources.sessions()
        assert session.directory.exists()
        for f in begun.files:
            data = await fetch_file(sources, begun.session_id, f)
            assert len(data) == f.size_bytes
            assert crc32c.crc32c(data) == f.crc32c
        response, end = await sources.fetch(begun.session_id, 0, begun.files[0].size_bytes, 0)
        assert (response.length, bytes(end)) == (0, b"")  # the end of a file is a valid, empty chunk
        await sources.end(begun.session_id, True)
        assert not session.directory.exists()
        assert not [a for a in tablet.raft.log_anchors.snapshot() if a.owner.startswith("tablet copy session")]
        with pytest.raises(NotFound, match="not active on this server"):
            await sources.end(begun.session_id, True)

    run(with_source(tmp_path, body))


def test_a_session_leaves_the_memrowset_to_the_wal(tmp_path: Path) -> None:
    """Begin pins the store's file without flushing the MemRowSet: the file holds the store's
    durable index, the listed WAL segments the entries after it, and the committed index
    says how far the source had applied."""

    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        tablet = await tablet_with_rows(manager, 4)
        store = tablet.store
        assert store is not None
        assert tablet.raft is not None
        durable, applied = store.durable_index(), store.applied_index()
        assert (durable < applied, store.memrowset_rows()) == (True, 200)
        begun = await sources.begin("t1", REQUESTOR)
        assert (begun.applied_index, begun.committed_index) == (durable, applied)
        assert store.memrowset_rows() == 200  # not flushed
        segments = {f.name for f in begun.files if f.kind == tcpb.WAL_SEGMENT}
        listed = [w for w in tablet.raft.wal.segments() if os.path.basename(w.path) in segments]
        assert listed[0].min_index <= durable + 1
        assert tablet.raft.wal.last_index >= applied
        data = await fetch_file(sources, begun.session_id, begun.files[0])
        copied = tmp_path / "elsewhere" / "t1.duckdb"
        copied.parent.mkdir()
        copied.write_bytes(data)
        with TabletStoreManager(str(tmp_path / "other"), STORAGE_WITH_MEMROWSET) as other:
            other.install_snapshot("t1", [str(copied)], move=True)
            copy = other.open_tablet("t1")
            assert (copy.applied_index(), copy.memrowset_rows()) == (durable, 0)
        await sources.end(begun.session_id, True)

    run(with_source(tmp_path, body, STORAGE_WITH_MEMROWSET))


def test_bad_fetches_are_refused_with_the_problem_named_and_change_nothing(tmp_path: Path) -> None:
    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        await tablet_with_rows(manager, 2)
        begun = await sources.begin("t1", REQUESTOR)
        sid, size = begun.session_id, begun.files[0].size_bytes
        with pytest.raises(InvalidArgument, match=rf"offset {size + 1} is outside file 0 \(t1.duckdb\)"):
            await sources.fetch(sid, 0, size + 1, 0)
        with pytest.raises(InvalidArgument, match="offset -1 is outside"):
            await sources.fetch(sid, 0, -1, 0)
        with pytest.raises(InvalidArgument, match=rf"offset {2**62} is outside"):
            await sources.fetch(sid, 0, 2**62, 0)
        with pytest.raises(InvalidArgument, match="file id 99 is not in tablet copy session"):
            await sources.fetch(sid, 99, 0, 0)
        with pytest.raises(InvalidArgument, match="max_length must be >= 0"):
            await sources.fetch(sid, 0, 0, -5)
        with pytest.raises(NotFound, match=r"session 'nope' is not active on this server"):
            await sources.fetch(b"nope", 0, 0, 0)
        with pytest.raises(NotFound, match="is not hosted"):
            await sources.begin("other", REQUESTOR)
        with pytest.raises(InvalidArgument, match="requestor_uuid"):
            await sources.begin("t1", "")
        response, data = await sources.fetch(sid, 0, 0, 100)  # the session still works
        assert response.length == len(data) == 100

    run(with_source(tmp_path, body))


def test_idle_sessions_expire_and_release_their_anchor(tmp_path: Path) -> None:
    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        tablet = await tablet_with_rows(manager, 2)
        assert tablet.raft is not None
        first = await sources.begin("t1", REQUESTOR)
        second = await sources.begin("t1", "c" * 32)
        clock.now += 50
        assert sources.check(first.session_id, keepalive=True)  # restarts first's idle timeout
        assert sources.check(second.session_id, keepalive=False)
        assert await sources.expire_idle() == []
        clock.now += 15  # second: 65 s idle; first: 15 s
        assert not sources.check(second.session_id, keepalive=True)
        assert await sources.expire_idle() == [second.session_id]
        assert [s.session_id for s in sources.sessions()] == [first.session_id]
        with pytest.raises(NotFound):
            await sources.fetch(second.session_id, 0, 0, 0)
        clock.now += 44  # first: 59 s idle
        await sources.fetch(first.session_id, 0, 0, 10)  # a fetch is activity too
        clock.now += 59
        assert sources.check(first.session_id, keepalive=False)
        clock.now += 1
        with pytest.raises(NotFound):  # found idle by the fetch itself, before the expiry task
            await sources.fetch(first.session_id, 0, 0, 10)
        assert sources.sessions() == []
        assert not [a for a in tablet.raft.log_anchors.snapshot() if a.owner.startswith("tablet copy session")]
        assert list((tmp_path / SESSIONS_DIR).iterdir()) == []
        assert not sources.check(b"never", keepalive=True)

    run(with_source(tmp_path, body))


def test_a_requestor_that_begins_again_replaces_its_session(tmp_path: Path) -> None:
    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        await tablet_with_rows(manager, 1)
        old = await sources.begin("t1", REQUESTOR)
        new = await sources.begin("t1", REQUESTOR)
        assert [s.session_id for s in sources.sessions()] == [new.session_id]
        assert not sources.check(old.session_id, keepalive=False)

    run(with_source(tmp_path, body))


def test_the_session_anchor_keeps_the_segments_the_copy_needs(tmp_path: Path) -> None:
    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        tablet = await tablet_with_rows(manager, 5)
        raft = tablet.raft
        assert raft is not None
        begun = await sources.begin("t1", REQUESTOR)
        applied = begun.applied_index
        for b in range(5, 40):  # many more segments; the store applies (and makes durable) them all
            await insert(tablet, list(range(b * 50, b * 50 + 50)))
        await asyncio.to_thread(raft.wal.gc)
        assert raft.wal.first_index <= applied  # held by the session
        for f in begun.files:  # and every listed file is still served whole
            data = await fetch_file(sources, begun.session_id, f)
            assert crc32c.crc32c(data) == f.crc32c
        await sources.end(begun.session_id, True)
        await insert(tablet, [10_000])
        await asyncio.to_thread(raft.wal.gc)
        assert raft.wal.first_index > applied  # released: GC went past it

    run(with_source(tmp_path, body))


def test_only_a_running_replica_is_a_source_and_staging_leftovers_are_removed(tmp_path: Path) -> None:
    leftover = tmp_path / SESSIONS_DIR / "deadbeef"
    leftover.mkdir(parents=True)
    (leftover / "t1.duckdb").write_bytes(b"x" * 100)

    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        assert not leftover.exists()
        await tablet_with_rows(manager, 1)
        await manager.delete("t1", tombstone=True, reason="test", cas_config_index=None)
        with pytest.raises(NotFound, match="tombstoned"):
            await sources.begin("t1", REQUESTOR)
        assert sources.sessions() == []
        assert list((tmp_path / SESSIONS_DIR).iterdir()) == []

    run(with_source(tmp_path, body))


def test_begin_answers_while_the_pinned_file_is_still_being_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Begin answers once the CRCs of the pinned file are known; the copy into the staging
    directory goes on, a fetch of a range it has not reached waits for it, and the pin holds
    until the copy is done.  A chunk at an unaligned offset is checksummed as it is served."""
    monkeypatch.setattr(tablet_copy_source, "_STAGE_PIECE", CHUNK)
    gate, parked = threading.Event(), threading.Event()
    copy_range = tablet_copy_source._copy_range

    def slow(fin: int, fout: int, offset: int, length: int) -> int:
        if offset >= CHUNK:  # the first piece goes at once, the rest when the test says
            parked.set()
            assert gate.wait(60)
        return copy_range(fin, fout, offset, length)

    monkeypatch.setattr(tablet_copy_source, "_copy_range", slow)

    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        tablet = await tablet_with_rows(manager, 4)
        store = tablet.store
        assert store is not None
        begun = await sources.begin("t1", REQUESTOR)
        store_file = begun.files[0]
        assert store_file.size_bytes > 2 * CHUNK
        response, first = await sources.fetch(begun.session_id, 0, 0, 0)  # copied already
        assert response.chunk_crc32c == crc32c.crc32c(first)
        last = asyncio.ensure_future(fetch_file(sources, begun.session_id, store_file))
        # The staging copy is held at the gate before the range the fetch asks for: the fetch
        # must park on it (a waiter of the staging copy) and stay unanswered.
        await wait_for_async(parked.is_set, what="the staging copy held at the gate", timeout_s=30)
        await wait_for_async(
            lambda: _fetches_waiting(sources, begun.session_id) == 1, what="the fetch parked", timeout_s=30
        )
        assert not last.done()  # waits for the copy
        assert store._pins == 1
        gate.set()
        data = await asyncio.wait_for(last, 30)
        assert crc32c.crc32c(data) == store_file.crc32c
        response, piece = await sources.fetch(begun.session_id, 0, 100, 5000)
        assert (response.length, response.chunk_crc32c) == (CHUNK, crc32c.crc32c(piece))
        assert bytes(piece) == data[100 : 100 + CHUNK]
        await wait_for_async(lambda: _unpinned(store), what="the pin to go", timeout_s=10)
        await sources.end(begun.session_id, True)

    run(with_source(tmp_path, body))


def test_a_session_ended_or_failed_midway_releases_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ending a session stops its staging copy and lets the pin go; a copy that fails answers
    the fetches waiting for it with IOFailure (the destination retries, then gives up) and
    lets the pin go too."""
    monkeypatch.setattr(tablet_copy_source, "_STAGE_PIECE", CHUNK)
    gate, broken, parked = threading.Event(), threading.Event(), threading.Event()
    copy_range = tablet_copy_source._copy_range

    def held(fin: int, fout: int, offset: int, length: int) -> int:
        if offset >= CHUNK:
            parked.set()
            assert gate.wait(60)
            if broken.is_set():
                raise OSError(errno.EIO, "a disk error")
        return copy_range(fin, fout, offset, length)

    monkeypatch.setattr(tablet_copy_source, "_copy_range", held)

    async def body(manager: TabletManager, sources: TabletCopySourceManager, clock: Clock) -> None:
        tablet = await tablet_with_rows(manager, 4)
        store = tablet.store
        assert store is not None
        begun = await sources.begin("t1", REQUESTOR)
        assert store._pins == 1
        await sources.end(begun.session_id, False)
        gate.set()  # the copy sees it was stopped at its next piece
        await wait_for_async(lambda: _unpinned(store), what="the pin to go", timeout_s=10)
        gate.clear()
        parked.clear()
        broken.set()
        again = await sources.begin("t1", REQUESTOR)
        waiting = asyncio.ensure_future(fetch_file(sources, again.session_id, again.files[0]))
        # The new copy is held at the gate and the fetch parks on it: it waits for the copy.
        await wait_for_async(parked.is_set, what="the second staging copy held at the gate", timeout_s=30)
        await wait_for_async(
            lambda: _fetches_waiting(sources, again.session_id) == 1, what="the fetch parked", timeout_s=30
        )
        assert not waiting.done()
        gate.set()
        with pytest.raises(IOFailure, match="a disk error"):
            await asyncio.wait_for(waiting, 30)
        await wait_for_async(lambda: _unpinned(store), what="the pin to go", timeout_s=10)
        await insert(tablet, [10_000])  # the tablet goes on

    run(with_source(tmp_path, body))


def _fetches_waiting(sources: tablet_copy_source.TabletCopySourceManager, session_id: bytes) -> int:
    """How many fetches of the session wait for its staging copy to reach their range."""
    staging = sources._sessions[session_id].staging
    return 0 if staging is None else len(staging._waiters)


def _unpinned(store: DuckDBTabletStore) -> bool | None:
    return True if store._pins == 0 else None
