"""Scan sessions: byte-bounded chunks, exact has_more, last keys, call order, TTL."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nyala.errors import InvalidArgument, NotFound
from nyala.rpc.framing import SplitSidecar
from nyala.rpc.loop import run
from nyala.schema import decode_key
from nyala.testing.wait import wait_for_async
from nyala.tserver import scanners
from nyala.tserver.scanners import ScannerRegistry, ScanSession

from .conftest import SCHEMA, ListScanner, batches


def session(scanner: ListScanner, output: list[str], ordered: bool = False) -> ScanSession:
    return ScanSession(b"s1", "t1", scanner, output, SCHEMA if ordered else None, 0.0)


def joined(stream: SplitSidecar | None) -> pa.Buffer:
    """The bytes the client receives: the pieces back to back."""
    assert stream is not None
    return pa.py_buffer(b"".join(stream.pieces))


def read(stream: SplitSidecar | None) -> pa.Table:
    return pa.ipc.open_stream(joined(stream)).read_all()


def test_chunks_respect_the_byte_budget_and_cover_every_row_once() -> None:
    scanner = ListScanner(batches(100, 0, 50, 300))
    s = session(scanner, ["id"])
    seen: list[int] = []
    chunks = 0
    while True:
        chunk = s.next_chunk(1000)  # 16 bytes a row: 62 rows fit
        chunks += 1
        table = read(chunk.ipc_stream)
        assert table.nbytes <= 1000
        assert table.column_names == ["id"]
        seen += table.column("id").to_pylist()
        if not chunk.has_more:
            break
    assert seen == list(range(450))
    assert chunks == 8


def test_calls_end_at_the_store_batch_boundaries_so_readers_get_whole_batches() -> None:
    # 40-row batches of id+v are 640 bytes; 1,400 bytes hold two of them and a slice of a third,
    # which would reach the reader as a 7-row batch followed by a 33-row one.
    s = session(ListScanner(batches(40, 40, 40, 40, 40)), ["id", "v"])
    sizes = []
    while True:
        chunk = s.next_chunk(1400)
        sizes.append([b.num_rows for b in read(chunk.ipc_stream).to_batches()])
        if not chunk.has_more:
            break
    assert sizes == [[40, 40], [40, 40], [40]]
    # A batch larger than the whole budget is still sliced, and its remainder is taken whole.
    big = session(ListScanner(batches(100, 40)), ["id", "v"])
    assert [big.next_chunk(1000).num_rows for _ in range(3)] == [62, 38, 40]


def test_has_more_is_exact_at_a_batch_boundary_and_one_row_always_fits() -> None:
    s = session(ListScanner(batches(10, 10)), ["id", "v"])
    first = s.next_chunk(1 << 20)
    assert (first.num_rows, first.has_more) == (20, False)
    tiny = session(ListScanner(batches(3)), ["id", "v"])
    assert tiny.next_chunk(1).num_rows == 1


def test_empty_scan_sends_no_stream() -> None:
    chunk = session(ListScanner(batches(0)), ["id"]).next_chunk(100)
    assert (chunk.ipc_stream, chunk.num_rows, chunk.has_more) == (None, 0, False)


def test_ordered_chunks_carry_the_last_key_even_when_keys_are_not_projected() -> None:
    s = session(ListScanner(batches(100)), ["v"], ordered=True)
    chunk = s.next_chunk(400)  # 25 rows of id+v
    assert read(chunk.ipc_stream).column_names == ["v"]
    assert decode_key([SCHEMA.column("id").type], chunk.last_primary_key) == (chunk.num_rows - 1,)


def test_chunks_are_the_stream_arrow_would_write_without_copying_the_columns() -> None:
    strings = pa.record_batch({"s": pa.array(["a" * i for i in range(40)]), "d": pa.nulls(40, pa.decimal128(20, 2))})
    numbers = pa.record_batch({"s": pa.array(["x"] * 5000), "d": pa.array(range(5000), pa.decimal128(20, 2))})
    parts = [strings.slice(3, 20), strings.slice(30), numbers]
    expected = pa.BufferOutputStream()
    with pa.ipc.new_stream(expected, strings.schema) as writer:
        for part in parts:
            writer.write_batch(part)
    stream = scanners._ipc_stream(parts)
    assert joined(stream).equals(expected.getvalue())
    assert len(stream) == expected.getvalue().size
    decimals = numbers.column("d").buffers()[1]
    assert decimals is not None
    start = decimals.address
    assert any(  # the 80,000 bytes of decimals went out as a view of the batch, not a copy
        np.frombuffer(piece, np.uint8).ctypes.data == start and memoryview(piece).nbytes == decimals.size
        for piece in stream.pieces
    )


def test_registry_checks_call_order_and_ttl() -> None:
    now = [0.0]
    registry = ScannerRegistry(ttl_ms=1000, clock=lambda: now[0])
    scanner = ListScanner(batches(10))
    s = registry.register("t1", scanner, ["id"], None)
    assert registry.continue_scan(s.scanner_id, 1) is s
    with pytest.raises(InvalidArgument, match="repeats"):
        registry.continue_scan(s.scanner_id, 1)
    with pytest.raises(InvalidArgument, match="skips"):
        registry.continue_scan(s.scanner_id, 5)
    now[0] = 1.5
    with pytest.raises(NotFound, match="expired"):
        registry.continue_scan(s.scanner_id, 2)
    assert scanner.closed
    assert (len(registry), registry.expired) == (0, 1)


def test_reaper_closes_idle_scanners_and_close_tablet_closes_its_own() -> None:
    async def main() -> None:
        registry = ScannerRegistry(ttl_ms=100)
        registry.start()
        try:
            idle = ListScanner(batches(1))
            registry.register("t1", idle, ["id"], None)
            other = ListScanner(batches(1))
            registry.register("t2", other, ["id"], None)
            registry.close_tablet("t2")
            assert other.closed
            assert len(registry) == 1
            await wait_for_async(lambda: idle.closed, what="the reaper to close the idle scanner", timeout_s=5)
            assert len(registry) == 0
        finally:
            await registry.stop()

    run(main())
