"""TabletService's Scan calls: where a call's batches are read."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import pytest

from nyala.proto import common_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext
from nyala.rpc.loop import run
from nyala.tserver import TabletServerOptions
from nyala.tserver.manager import TabletManager
from nyala.tserver.scanners import ScannerRegistry, ScanSession
from nyala.tserver.service import TabletService

from .conftest import ListScanner, batches


def test_a_scan_call_reads_its_batches_on_the_servers_scan_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[str] = []
    next_chunk = ScanSession.next_chunk

    def recorded(self: ScanSession, max_bytes: int) -> object:
        readers.append(threading.current_thread().name)
        return next_chunk(self, max_bytes)

    monkeypatch.setattr(ScanSession, "next_chunk", recorded)
    registry = ScannerRegistry(60_000, clock=lambda: 0.0)
    with ThreadPoolExecutor(1, thread_name_prefix="test-scan") as pool:
        status = (common_pb2.NodeInstancePB(), common_pb2.ServerRegistrationPB())
        service = TabletService(cast(TabletManager, None), registry, pool, TabletServerOptions(), lambda: status)

        async def scan_twice() -> list[tpb.ScanResponsePB]:
            session = registry.register("t1", ListScanner(batches(100, 100)), ["id", "v"], None)
            answers = []
            for seq in (1, 2):
                request = tpb.ScanRequestPB(scanner_id=session.scanner_id, call_seq_id=seq, batch_size_bytes=1)
                answers.append(await service.scan(request, CallContext("Scan", "test", None, [])))
            return answers

        first, second = run(scan_twice())
    assert (first.num_rows, first.has_more_results) == (1, True)
    assert second.num_rows == 1
    assert readers == ["test-scan_0", "test-scan_0"]
