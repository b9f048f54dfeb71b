"""The DuckDB tablet store: types, schema changes, snapshots, damaged files, concurrent scans."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nyala.errors import AlreadyPresent, Corruption, IllegalState, InvalidArgument, NotFound
from nyala.files import copy_file
from nyala.schema import ColumnSchema, KeyRange, OpType, Predicate, Schema, make_row_operations
from nyala.storage import ApplyEntry, PinnedFiles, ScanSpec, StorageOptions, TabletStore, TabletStoreManager

UTC = datetime.UTC
OPTIONS = StorageOptions(storage_threads=2, storage_memory_limit_bytes=512 << 20)
SCHEMA = Schema.of(
    [
        ColumnSchema.of("id", "int64", nullable=False),
        ColumnSchema.of("v", "double"),
        ColumnSchema.of("s", "string"),
    ],
    ["id"],
)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[TabletStoreManager]:
    with TabletStoreManager(str(tmp_path / "data"), OPTIONS) as m:
        yield m


def insert(store: TabletStore, index: int, ids: range, schema: Schema = SCHEMA) -> None:
    rows = [{"id": i, "v": float(i), "s": f"s{i}"} for i in ids]
    results = store.apply([ApplyEntry(index, make_row_operations(schema, OpType.INSERT, rows))])
    assert results[0].row_failures == []
    assert results[0].error is None


def scan_rows(store: TabletStore, **kw: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = store.scan(ScanSpec(ordered=True, **kw)).read_all().to_pylist()
    return rows


def test_every_type_round_trips_and_filters(manager: TabletStoreManager) -> None:
    schema = Schema.of(
        [
            ColumnSchema.of("ts", "timestamp", nullable=False),
            ColumnSchema.of("d", "decimal(12, 3)", nullable=False),
            ColumnSchema.of("b", "binary", nullable=False),
            ColumnSchema.of("day", "date"),
            ColumnSchema.of("ok", "bool"),
            ColumnSchema.of("f", "float"),
            ColumnSchema.of("i8", "int8"),
            ColumnSchema.of("txt", "string"),
        ],
        ["ts", "d", "b"],
    )
    store = manager.create_tablet("types", schema)
    base = datetime.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    rows = [
        {
            "ts": base + datetime.timedelta(microseconds=i),
            "d": decimal.Decimal(i).scaleb(-3),
            "b": bytes([i, 0, 255]),
            "day": datetime.date(1969, 12, 31) + datetime.timedelta(days=i),
            "ok": i % 2 == 0,
            "f": i / 4,
            "i8": -i,
            "txt": "é\x00" * i,
        }
        for i in range(5)
    ]
    store.apply([ApplyEntry(1, make_row_operations(schema, OpType.INSERT, rows))])
    assert scan_rows(store) == rows
    for column in ("ts", "d", "b", "day"):
        wanted = [rows[1][column], rows[3][column]]
        got = scan_rows(store, predicates=[Predicate.in_list(column, wanted)], projection=[column])
        assert [r[column] for r in got] == wanted
    bounded = scan_rows(store, key_range=KeyRange(tuple(rows[1][k] for k in ("ts", "d", "b")), None, False))
    assert bounded == rows[2:]
    again = store.apply([ApplyEntry(2, make_row_operations(schema, OpType.INSERT, rows[:1]))])
    assert isinstance(again[0].row_failures[0].error, AlreadyPresent)
    # Reopened, the in-memory index of DuckDB's keys is rebuilt from the file: it must know
    # every key type in the form incoming rows take, or duplicates would slip into memory.
    assert store.flush()
    store.close()
    store = manager.open_tablet("types")
    again = store.apply([ApplyEntry(3, make_row_operations(schema, OpType.INSERT, rows))])
    assert [e.row for e in again[0].row_failures] == list(range(len(rows)))
    assert all(isinstance(e.error, AlreadyPresent) for e in again[0].row_failures)
    changed = {**rows[2], "txt": "upserted"}
    store.apply([ApplyEntry(4, make_row_operations(schema, OpType.UPSERT, [changed]))])
    assert store.memrowset_rows() == 1
    assert scan_rows(store) == [*rows[:2], changed, *rows[3:]]


def test_schema_changes_add_drop_rename(manager: TabletStoreManager) -> None:
    store = manager.create_tablet("alter", SCHEMA)
    insert(store, 1, range(3))
    added = SCHEMA.add_column(ColumnSchema.of("n", "int32", nullable=False, default=7))
    store.alter_schema(added, 2)
    assert [r["n"] for r in scan_rows(store)] == [7, 7, 7]
    swapped = added.rename_column("v", "tmp").rename_column("s", "v").rename_column("tmp", "s")
    store.alter_schema(swapped.drop_column("n"), 3)
    assert scan_rows(store)[1] == {"id": 1, "v": "s1", "s": 1.0}
    assert store.applied_index() == 3
    row = {"id": 9, "v": "new", "s": 2.5}
    store.apply([ApplyEntry(4, make_row_operations(store.schema, OpType.UPSERT, [row]))])
    assert scan_rows(store)[-1] == row
    stale = make_row_operations(added, OpType.INSERT, [{"id": 10, "v": 1.0, "s": "x", "n": 1}])
    result = store.apply([ApplyEntry(5, stale)])[0]
    assert isinstance(result.error, InvalidArgument)
    assert "has type double, expected string" in str(result.error)
    assert store.applied_index() == 5
    with pytest.raises(InvalidArgument, match="primary key"):
        store.alter_schema(Schema.of([ColumnSchema.of("other", "int64", nullable=False)], ["other"]), 6)


def test_a_scan_started_across_a_schema_change_binds_again(
    manager: TabletStoreManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema change and new rows in memory land between a scan binding its columns and
    reading: the scan starts again with the new schema rather than fail or mix them."""
    store = manager.create_tablet("racing", SCHEMA)
    insert(store, 1, range(3))
    renamed = SCHEMA.rename_column("s", "text")
    open_cursor = manager.cursor
    changed: list[bool] = []

    def cursor_after_a_schema_change() -> Any:
        if not changed:
            changed.append(True)
            store.alter_schema(renamed, 2)
            store.apply([ApplyEntry(3, make_row_operations(renamed, OpType.INSERT, [{"id": 9, "text": "new"}]))])
        return open_cursor()

    monkeypatch.setattr(manager, "cursor", cursor_after_a_schema_change)
    assert store.memrowset_rows() == 3
    rows = scan_rows(store)
    assert changed
    assert store.memrowset_rows() == 1
    assert rows == [*({"id": i, "v": float(i), "text": f"s{i}"} for i in range(3)), {"id": 9, "v": None, "text": "new"}]


def test_indices_must_increase(manager: TabletStoreManager) -> None:
    store: TabletStore = manager.create_tablet("idx", SCHEMA)  # mypy checks the interface is met
    insert(store, 5, range(2))
    with pytest.raises(IllegalState, match="not after the applied index 5"):
        insert(store, 5, range(10, 12))
    assert len(scan_rows(store)) == 2


def test_snapshot_opens_elsewhere_with_rows_and_index(manager: TabletStoreManager, tmp_path: Path) -> None:
    store = manager.create_tablet("snap", SCHEMA)
    insert(store, 1, range(100))
    insert(store, 2, range(100, 150))
    snapshot = store.snapshot(str(tmp_path / "copy"))
    assert snapshot.applied_index == 2
    insert(store, 3, range(150, 160))  # after the snapshot: not in the copy
    with TabletStoreManager(str(tmp_path / "other"), OPTIONS) as other:
        Path(other.path_of("snap") + ".wal").write_bytes(b"stale WAL of an earlier replica")
        copy = other.open_from_snapshot("snap", snapshot.files)
        assert copy.applied_index() == 2
        assert copy.schema == SCHEMA
        assert [r["id"] for r in scan_rows(copy)] == list(range(150))
        with pytest.raises(AlreadyPresent):
            other.open_from_snapshot("snap", snapshot.files)


def test_a_damaged_or_missing_file_fails_only_that_tablet(manager: TabletStoreManager) -> None:
    good = manager.create_tablet("good", SCHEMA)
    insert(good, 1, range(10))
    bad = manager.create_tablet("bad", SCHEMA)
    insert(bad, 1, range(50_000))
    bad.checkpoint()
    manager.close_tablet("bad")
    path = manager.path_of("bad")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\xde\xad\xbe\xef" * 4096)

    def open_and_read() -> None:
        manager.open_tablet("bad").scan(ScanSpec()).read_all()

    with pytest.raises(Corruption, match="tablet bad"):
        open_and_read()
    Path(manager.path_of("junk")).write_bytes(b"this is not a database" * 1000)
    with pytest.raises(Corruption, match="tablet junk"):
        manager.open_tablet("junk")
    with pytest.raises(NotFound, match="tablet gone"):
        manager.open_tablet("gone")
    insert(good, 2, range(10, 20))
    assert len(scan_rows(good)) == 20


def test_a_scan_sees_one_state_while_writes_continue(manager: TabletStoreManager) -> None:
    store = manager.create_tablet("mvcc", SCHEMA)
    insert(store, 1, range(10_000))
    scanner = store.scan(ScanSpec(projection=["id"], batch_size_rows=1000))
    batches = iter(scanner)
    first = next(batches)
    deletes = make_row_operations(SCHEMA, OpType.DELETE, [{"id": i} for i in range(5000, 10_000)])
    store.apply([ApplyEntry(2, deletes)])
    insert(store, 3, range(20_000, 21_000))
    seen = first.num_rows + sum(b.num_rows for b in batches)
    assert seen == 10_000
    assert len(scan_rows(store, projection=["id"])) == 6000


@contextlib.contextmanager
def scanning_ids(store: TabletStore, threads: int = 2) -> Iterator[list[list[int]]]:
    """Threads that scan every id of ``store`` over and over until the block ends; yields
    each scan's ids and fails if a scan failed."""
    scans: list[list[int]] = []
    failures: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                scans.append(store.scan(ScanSpec(projection=["id"])).read_all()["id"].to_pylist())
        except BaseException as e:
            failures.append(e)

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for t in workers:
        t.start()
    try:
        yield scans
    finally:
        done.set()
        for t in workers:
            t.join(30)
    assert not failures
    assert scans


def test_scans_from_threads_during_applies_see_whole_entries(manager: TabletStoreManager) -> None:
    store = manager.create_tablet("threads", SCHEMA)
    with scanning_ids(store) as scans:
        for i in range(20):
            insert(store, i + 1, range(i * 100, (i + 1) * 100))
    assert all(len(ids) % 100 == 0 for ids in scans)
    assert len(scan_rows(store, projection=["id"])) == 2000


def test_scans_during_memrowset_flushes_see_each_row_once(tmp_path: Path) -> None:
    """Scans racing applies that flush every few entries, with upserts shadowing DuckDB rows:
    each scan sees whole entries and every key once (DuckDB's snapshot and the MemRowSet's
    rows are taken at the same moment)."""
    options = StorageOptions(storage_threads=2, flush_threshold_rows=250)
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        store = manager.create_tablet("flushes", SCHEMA)
        with scanning_ids(store) as scans:
            index = 0
            for i in range(20):
                index += 1
                insert(store, index, range(i * 100, (i + 1) * 100))
                index += 1
                rows = [{"id": k, "v": -1.0, "s": "again"} for k in range(0, (i + 1) * 100, 7)]
                (result,) = store.apply([ApplyEntry(index, make_row_operations(SCHEMA, OpType.UPSERT, rows))])
                assert result.row_failures == []
        for ids in scans:
            assert len(ids) % 100 == 0
            assert len(set(ids)) == len(ids)
        assert store.durable_index() > 0
        final = scan_rows(store)
        assert [r["id"] for r in final] == list(range(2000))
        assert all(r["v"] == -1.0 for r in final if r["id"] % 7 == 0)


def test_applies_and_scans_go_on_while_a_frozen_memrowset_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full MemRowSet is frozen and flushed by a thread, here held mid-write: a new one takes
    upserts and inserts meanwhile, duplicates of frozen keys are found, and scans see each key
    once, with the newest row."""
    options = StorageOptions(storage_threads=1, flush_threshold_rows=10)
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        store = manager.create_tablet("frozen", SCHEMA)
        writing, release = threading.Event(), threading.Event()
        write_rows = store._write_rows

        def held(cursor: Any, mrs: Any) -> None:
            if threading.current_thread().name.startswith("flush-"):
                writing.set()
                assert release.wait(60)
            write_rows(cursor, mrs)

        monkeypatch.setattr(store, "_write_rows", held)
        try:
            insert(store, 1, range(10))  # reaches the threshold: frozen, its flush held
            assert writing.wait(60)
            assert (store.memrowset_rows(), store.durable_index()) == (10, 0)
            newer: list[dict[str, Any]] = [{"id": 3, "v": -3.0, "s": "newer"}, {"id": 20, "v": 20.0, "s": "s20"}]
            (upserted,) = store.apply([ApplyEntry(2, make_row_operations(SCHEMA, OpType.UPSERT, newer))])
            (again,) = store.apply([ApplyEntry(3, make_row_operations(SCHEMA, OpType.INSERT, [newer[0]]))])
            assert upserted.row_failures == []
            assert [type(e.error) for e in again.row_failures] == [AlreadyPresent]
            expected = sorted(
                [{"id": i, "v": float(i), "s": f"s{i}"} for i in range(10) if i != 3] + newer, key=lambda r: r["id"]
            )
            assert scan_rows(store) == expected
        finally:
            release.set()
        assert store.flush()  # waits for the frozen rows, then writes the new MemRowSet
        assert (store.memrowset_rows(), store.durable_index()) == (0, 3)
        assert scan_rows(store) == expected


def fingerprint(paths: Sequence[str]) -> list[tuple[str, int, int, str]]:
    """Each file's size, modification time and SHA-256: any write to it changes one."""
    out = []
    for path in paths:
        st = os.stat(path)
        out.append((path, st.st_size, st.st_mtime_ns, hashlib.sha256(Path(path).read_bytes()).hexdigest()))
    return out


def blocked(target: Callable[[], object]) -> threading.Thread:
    """Start ``target`` on a thread and check that it is still waiting a moment later."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(0.3)
    assert thread.is_alive(), f"{target} did not wait for the pin"
    return thread


def test_pinned_files_stay_byte_for_byte_while_writes_go_on(tmp_path: Path) -> None:
    """What a tablet copy source relies on: while the files are pinned, inserts and upserts go
    on into the MemRowSet (past its threshold, without a flush, up to twice it), scans and
    another tablet's commits and checkpoints go on, and whatever would write the file waits:
    an update, a MemRowSet at twice its threshold, a flush, a checkpoint, closing.  The files
    keep every byte and their modification time; a copy made meanwhile opens elsewhere at the
    store's durable index."""
    options = StorageOptions(storage_threads=2, flush_threshold_rows=100)
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        store = manager.create_tablet("pin", SCHEMA)
        other = manager.create_tablet("other", SCHEMA)
        insert(store, 1, range(150))  # a full MemRowSet: frozen and flushed in the background
        updated = make_row_operations(SCHEMA, OpType.UPDATE, [{"id": 0, "v": -1.0}])
        store.apply([ApplyEntry(2, updated)])  # waits for that flush; commits to DuckDB's WAL
        insert(store, 3, range(150, 200))  # only in the MemRowSet
        assert (store.durable_index(), store.memrowset_rows(), store.wal_size_bytes() > 0) == (2, 50, True)

        pinned = store.pin()
        try:
            assert (pinned.snapshot.applied_index, pinned.applied_index) == (2, 3)
            assert pinned.snapshot.files == (store.path,)  # DuckDB's WAL was checkpointed into the file
            before = fingerprint(pinned.snapshot.files)
            insert(store, 4, range(200, 300))  # 150 rows held: past the threshold, not flushed
            assert store.memrowset_rows() == 150
            upserts = make_row_operations(SCHEMA, OpType.UPSERT, [{"id": 1, "v": 1.5, "s": "up"}])
            store.apply([ApplyEntry(5, upserts)])
            assert len(scan_rows(store)) == 300
            insert(other, 1, range(500))
            other.apply([ApplyEntry(2, make_row_operations(SCHEMA, OpType.DELETE, [{"id": 7}]))])
            other.flush()
            assert other.checkpoint()
            waiting = [blocked(lambda: insert(store, 6, range(300, 360)))]  # 211 rows held: twice the threshold
            assert store.applied_index() == 6  # applied: only the call waits
            assert len(scan_rows(store)) == 360
            deleted = make_row_operations(SCHEMA, OpType.DELETE, [{"id": 2}])
            waiting.append(blocked(lambda: store.apply([ApplyEntry(7, deleted)])))
            waiting += [blocked(store.flush), blocked(store.checkpoint)]
            staged = tmp_path / "staged"
            staged.mkdir()
            copy_file(store.path, staged / os.path.basename(store.path))
            assert fingerprint(pinned.snapshot.files) == before
        finally:
            pinned.release()
        pinned.release()  # a second release does nothing
        for thread in waiting:
            thread.join(60)
            assert not thread.is_alive()
        assert store.durable_index() == 7  # the delete wrote every held row to the file
    with TabletStoreManager(str(tmp_path / "data"), options) as reopened:
        rows = scan_rows(reopened.open_tablet("pin"))
        assert [r["id"] for r in rows] == [i for i in range(360) if i != 2]
        assert (rows[0]["v"], rows[1]["s"]) == (-1.0, "up")
    with TabletStoreManager(str(tmp_path / "other"), options) as elsewhere:
        elsewhere.install_snapshot("pin", [str(staged / os.path.basename(store.path))], move=True)
        copy = elsewhere.open_tablet("pin")
        assert copy.applied_index() == 2
        rows = scan_rows(copy)
        assert [r["id"] for r in rows] == list(range(150))
        assert rows[0]["v"] == -1.0


def test_a_pin_waits_for_a_frozen_memrowset_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flush thread writes row groups into the file before it commits: a pin waits for it
    (applies go on meanwhile), then holds what it committed.  Pins nest; closing the tablet
    waits for them."""
    options = StorageOptions(storage_threads=1, flush_threshold_rows=100)
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        store = manager.create_tablet("bg", SCHEMA)
        writing, release = threading.Event(), threading.Event()
        write_rows = store._write_rows

        def held(cursor: Any, mrs: Any) -> None:
            if threading.current_thread().name.startswith("flush-"):
                writing.set()
                assert release.wait(60)
            write_rows(cursor, mrs)

        monkeypatch.setattr(store, "_write_rows", held)
        insert(store, 1, range(100))  # full: frozen, and the flush thread holds
        assert writing.wait(60)
        pins: list[PinnedFiles] = []
        pinning = blocked(lambda: pins.append(store.pin()))
        insert(store, 2, range(100, 110))  # not blocked by the flush being written, nor by the pin waiting
        release.set()
        pinning.join(60)
        (pinned,) = pins
        assert (pinned.snapshot.applied_index, pinned.applied_index) == (1, 2)
        with store.pin() as inner:  # a second pin: no checkpoint, the same files
            assert inner.snapshot == pinned.snapshot
        try:
            flushing = blocked(store.flush)  # the first pin holds on
        finally:
            pinned.release()
        flushing.join(60)
        assert (store.durable_index(), store.memrowset_rows()) == (2, 0)
        with store.pin():
            closing = blocked(lambda: manager.close_tablet("bg"))
        closing.join(60)
        assert not closing.is_alive()


def test_a_staging_snapshot_needs_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = StorageOptions(storage_threads=1, flush_threshold_rows=1000)
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        store = manager.create_tablet("bg", SCHEMA)
        insert(store, 1, range(100))
        insert(store, 2, range(100, 110))
        synced: list[object] = []
        monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
        snapshot = store.snapshot(str(tmp_path / "staging"), durable=False)
        assert synced == []
        monkeypatch.undo()
        assert snapshot.applied_index == 2
    with TabletStoreManager(str(tmp_path / "other"), OPTIONS) as other:
        other.install_snapshot("bg", snapshot.files, move=True)
        assert not any(os.path.exists(f) for f in snapshot.files)  # moved, not copied
        assert [r["id"] for r in scan_rows(other.open_tablet("bg"))] == list(range(110))


def test_bad_scan_requests_are_refused(manager: TabletStoreManager) -> None:
    store = manager.create_tablet("badscan", SCHEMA)
    with pytest.raises(InvalidArgument, match="unknown column 'nope'"):
        store.scan(ScanSpec(projection=["nope"]))
    with pytest.raises(InvalidArgument, match="predicate on column 'v'"):
        store.scan(ScanSpec(predicates=[Predicate.compare("v", "<", "x")]))
    with pytest.raises(InvalidArgument, match="tablet id"):
        manager.create_tablet("../evil", SCHEMA)
    with pytest.raises(AlreadyPresent):
        manager.create_tablet("badscan", SCHEMA)


def test_schema_change_and_snapshot_while_a_scan_is_open(manager: TabletStoreManager, tmp_path: Path) -> None:
    store = manager.create_tablet("ddl", SCHEMA)
    insert(store, 1, range(5000))
    scanner = store.scan(ScanSpec(batch_size_rows=500))
    batches = iter(scanner)
    first = next(batches)
    store.alter_schema(SCHEMA.add_column(ColumnSchema.of("n", "int32", default=1)), 2)
    snapshot = store.snapshot(str(tmp_path / "snap"))
    rest = list(batches)
    assert first.num_rows + sum(b.num_rows for b in rest) == 5000
    assert all(b.schema.names == SCHEMA.names for b in rest)  # the scan keeps its own schema
    assert snapshot.schema.names == [*SCHEMA.names, "n"]
    assert any(f.endswith(".wal") for f in snapshot.files)  # DuckDB deferred the checkpoint
    scanner.close()
    assert store.checkpoint()  # once the old scan is gone, DuckDB checkpoints again
    with TabletStoreManager(str(tmp_path / "other"), OPTIONS) as other:
        copy = other.open_from_snapshot("ddl", snapshot.files)
        assert copy.applied_index() == 2
        rows = scan_rows(copy)
        assert len(rows) == 5000
        assert rows[0] == {"id": 0, "v": 0.0, "s": "s0", "n": 1}


def test_duplicate_keys_within_one_insert_batch(manager: TabletStoreManager) -> None:
    """The optimistic INSERT trips the primary key; the careful retry names the second row."""
    store = manager.create_tablet("dups", SCHEMA)
    rows = [{"id": 1, "v": 1.0, "s": "a"}, {"id": 2, "v": 2.0, "s": "b"}, {"id": 1, "v": 3.0, "s": "c"}]
    strict, lenient = (make_row_operations(SCHEMA, op, rows) for op in (OpType.INSERT, OpType.INSERT_IGNORE))
    first, second = store.apply([ApplyEntry(1, strict), ApplyEntry(2, lenient)])
    assert [(e.row, type(e.error)) for e in first.row_failures] == [(2, AlreadyPresent)]
    assert second.row_failures == []
    assert scan_rows(store) == rows[:2]
    assert store.applied_index() == 2


def test_small_tablets_use_small_blocks(manager: TabletStoreManager) -> None:
    sizes = []
    for name, small in (("big", False), ("small", True)):
        store = manager.create_tablet(name, SCHEMA, small=small)
        insert(store, 1, range(1000))
        assert store.checkpoint()
        sizes.append(os.path.getsize(manager.path_of(name)))
    assert sizes[1] * 2 < sizes[0]


def test_tablets_apply_in_parallel_threads(manager: TabletStoreManager) -> None:
    stores = [manager.create_tablet(f"par{i}", SCHEMA) for i in range(3)]
    failures: list[BaseException] = []

    def writer(store: TabletStore) -> None:
        try:
            for i in range(15):
                insert(store, i + 1, range(i * 200, (i + 1) * 200))
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    for store in stores:
        assert store.applied_index() == 15
        assert len(scan_rows(store, projection=["id"])) == 3000


def threshold(manager: TabletStoreManager) -> str:
    cursor = manager.cursor()
    try:
        (row,) = cursor.sql("SELECT current_setting('checkpoint_threshold')").fetchall()
        return str(row[0])
    finally:
        cursor.close()


def test_memrowset_flushes_checkpoint_instead_of_writing_duckdbs_wal(tmp_path: Path) -> None:
    """A flush commits megabytes: DuckDB checkpoints the tablet at that commit and writes none
    of the rows to its WAL, and the instance's high threshold is back afterwards, so a direct
    commit (an update) still goes to the WAL."""
    options = StorageOptions(storage_threads=1, flush_threshold_rows=20_000)
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        high = threshold(manager)
        store = manager.create_tablet("flush", SCHEMA)
        rows = [{"id": i, "v": float(i), "s": "x" * 100} for i in range(20_000)]  # about 2 MiB
        store.apply([ApplyEntry(1, make_row_operations(SCHEMA, OpType.INSERT, rows))])  # frozen: full
        assert store.flush() is False  # waited for the frozen rows; nothing newer to write
        assert store.durable_index() == 1
        assert store.wal_size_bytes() == 0
        assert threshold(manager) == high
        store.apply([ApplyEntry(2, make_row_operations(SCHEMA, OpType.UPDATE, [{"id": 5, "v": -5.0}]))])
        assert store.wal_size_bytes() > 0
    with TabletStoreManager(str(tmp_path / "data"), options) as manager:
        store = manager.open_tablet("flush")
        assert store.applied_index() == 2
        assert len(scan_rows(store)) == 20_000
        assert scan_rows(store, predicates=[Predicate.compare("id", "=", 5)])[0]["v"] == -5.0


def test_checkpointing_commits_restores_the_threshold_when_the_last_one_leaves(manager: TabletStoreManager) -> None:
    high = threshold(manager)
    with manager.checkpointing_commits():
        low = threshold(manager)
        with manager.checkpointing_commits():  # a second flush thread
            assert threshold(manager) == low
        assert threshold(manager) == low  # the first is still committing
    assert low != high
    assert threshold(manager) == high
