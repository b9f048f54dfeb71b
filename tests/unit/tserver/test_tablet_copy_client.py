"""A tablet copy's destination side without a network: checking the source's session, chunks
damaged in transit, retries from the offset, whole-file checks, the throttler, the leader's
choice of source and the validation of StartTabletCopy."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import crc32c
import pytest

from nyala.common.hostport import HostPort
from nyala.consensus.core import PeerProgress, RaftConfig
from nyala.consensus.core.progress import Progress, ProgressState
from nyala.errors import Corruption, InvalidArgument, IOFailure, NetworkError, NotFound
from nyala.proto import common_pb2
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc import Messenger, RpcMethod
from nyala.rpc.loop import run
from nyala.schema import Partitioner, PartitionSchema
from nyala.services import FETCH_DATA
from nyala.tserver import tablet_copy_client
from nyala.tserver.metadata import DataState
from nyala.tserver.tablet import config_to_pb
from nyala.tserver.tablet_copy_client import (
    CopyCounters,
    CopyRequest,
    TabletCopyClient,
    Throttler,
    parse_begin_response,
    parse_start_tablet_copy,
)
from nyala.tserver.tablet_copy_leader import choose_copy_source

from .conftest import SCHEMA

ME, SOURCE = "d" * 32, "s" * 32
REQUEST = CopyRequest("t1", SOURCE, HostPort("127.0.0.1", 9), "l" * 32, 3, False, 0)


def begin_response(files: Sequence[tuple[int, str, bytes]], **changes: Any) -> tcpb.BeginTabletCopySessionResponsePB:
    partition_schema = PartitionSchema()
    partition = Partitioner(SCHEMA, partition_schema).partitions[0]
    response = tcpb.BeginTabletCopySessionResponsePB(
        session_id=b"session-1",
        session_idle_timeout_ms=600_000,
        current_term=3,
        applied_index=7,
        source_location="/dc1",
        metadata=tcpb.TabletCopyMetadataPB(
            table_id="table-1",
            table_name="t",
            schema=SCHEMA.to_json(),
            schema_version=2,
            partition=json.dumps(partition.to_dict()).encode(),
            partition_schema=json.dumps(partition_schema.to_dict()).encode(),
        ),
    )
    response.committed_config.CopyFrom(config_to_pb(RaftConfig.of_voters([SOURCE, ME])))
    for i, (kind, name, data) in enumerate(files):
        response.files.add(file_id=i, kind=kind, name=name, size_bytes=len(data), crc32c=crc32c.crc32c(data))
    for field, value in changes.items():
        setattr(response, field, value)
    return response


STORE = b"duckdb bytes " * 1000
SEGMENT = b"wal bytes " * 700
FILES = [(tcpb.STORE_FILE, "t1.duckdb", STORE), (tcpb.WAL_SEGMENT, "wal-000000004", SEGMENT)]


def test_a_valid_session_is_parsed_into_what_the_copy_installs() -> None:
    source = parse_begin_response("t1", begin_response(FILES))
    assert source.metadata.data_state is DataState.COPYING
    assert (source.metadata.table_id, source.metadata.schema_version, source.metadata.schema) == ("table-1", 2, SCHEMA)
    assert (source.term, source.applied_index, source.location, source.idle_timeout_s) == (3, 7, "/dc1", 600.0)
    assert source.config.peer_ids == (SOURCE, ME)
    assert [f.name for f in source.files] == ["t1.duckdb", "wal-000000004"]
    assert source.total_bytes == len(STORE) + len(SEGMENT)
    assert source.committed_index == 7  # a source that does not say: the applied index
    assert parse_begin_response("t1", begin_response(FILES, committed_index=12)).committed_index == 12


STORE_X = (tcpb.STORE_FILE, "t1.duckdb", b"x")
SEGMENT_1 = (tcpb.WAL_SEGMENT, "wal-000000001", b"")


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ([(tcpb.WAL_SEGMENT, "wal-000000001", b"x")], "not exactly one store file"),
        ([(tcpb.STORE_FILE, "t1.duckdb", b"x")], "no WAL segment"),
        ([(tcpb.STORE_FILE, "other.duckdb", b"x"), (tcpb.WAL_SEGMENT, "wal-000000001", b"x")], "unexpected store"),
        ([(tcpb.STORE_FILE, "../t1.duckdb", b"x"), (tcpb.WAL_SEGMENT, "wal-000000001", b"x")], "unexpected store"),
        ([(tcpb.STORE_FILE, "t1.duckdb", b"x"), (tcpb.WAL_SEGMENT, "../wal-000000001", b"x")], "not a WAL segment"),
        ([STORE_X, SEGMENT_1, (tcpb.WAL_SEGMENT, "wal-000000003", b"")], "not consecutive"),
        ([STORE_X, STORE_X, SEGMENT_1], "not exactly one store file"),
    ],
)
def test_a_session_with_unusable_files_is_refused_before_anything_is_written(
    files: list[tuple[int, str, bytes]], problem: str
) -> None:
    with pytest.raises(Corruption, match=problem):
        parse_begin_response("t1", begin_response(files))


def test_a_session_with_unusable_metadata_is_refused() -> None:
    bad = begin_response(FILES)
    bad.metadata.schema = b"{not json"
    with pytest.raises(Corruption, match="unusable session"):
        parse_begin_response("t1", bad)
    with pytest.raises(Corruption, match="no session id"):
        parse_begin_response("t1", begin_response(FILES, session_id=b""))
    with pytest.raises(Corruption, match="committed index 6 is below the applied index 7"):
        parse_begin_response("t1", begin_response(FILES, committed_index=6))
    empty = begin_response(FILES)
    empty.committed_config.Clear()
    with pytest.raises(Corruption, match="no voters"):
        parse_begin_response("t1", empty)


class FakeSource:
    """Answers FetchData from in-memory files; ``damage`` corrupts that many answers first."""

    def __init__(self, files: Sequence[bytes], damage: int = 0, fail: type[Exception] | None = None) -> None:
        self.files = files
        self.damage = damage
        self.fail = fail
        self.fetches: list[tuple[int, int, int]] = []

    async def call_with_sidecars(
        self, address: HostPort, method: RpcMethod[Any, Any], request: Any, timeout: float
    ) -> tuple[tcpb.FetchDataResponsePB, list[memoryview]]:
        assert method is FETCH_DATA
        self.fetches.append((request.file_id, request.offset, request.max_length))
        if self.fail is not None:
            raise self.fail("no such session")
        whole = self.files[request.file_id]
        data = whole[request.offset : request.offset + min(request.max_length, 1000)]  # the source's chunk is 1000
        response = tcpb.FetchDataResponsePB(
            file_id=request.file_id,
            offset=request.offset,
            length=len(data),
            chunk_crc32c=crc32c.crc32c(data),
            file_size_bytes=len(whole),
        )
        if self.damage:
            self.damage -= 1
            data = bytes([data[0] ^ 1]) + data[1:]
        return response, [memoryview(data)]


def client(source: FakeSource, counters: CopyCounters, retries: int = 2, location: str = "/dc1") -> TabletCopyClient:
    return TabletCopyClient(
        cast(Messenger, source),
        ME,
        chunk_size_bytes=3000,
        fetches_in_flight=3,
        max_retries=retries,
        throttler=Throttler(0),
        counters=counters,
        location=lambda: location,
    )


def test_every_file_is_fetched_checked_and_written_even_when_the_source_sends_shorter_chunks(tmp_path: Path) -> None:
    source = FakeSource([STORE, SEGMENT], damage=2)  # two damaged chunks, each fetched again
    counters = CopyCounters()
    parsed = parse_begin_response("t1", begin_response(FILES))
    downloaded = run(client(source, counters).download(REQUEST, parsed, tmp_path / "copy"))
    assert downloaded.store_files == (tmp_path / "copy" / "store" / "t1.duckdb",)
    assert (tmp_path / "copy" / "store" / "t1.duckdb").read_bytes() == STORE
    assert (downloaded.wal_dir / "wal-000000004").read_bytes() == SEGMENT
    assert counters.bytes_within_location == len(STORE) + len(SEGMENT)
    assert counters.bytes_across_locations == 0
    damaged_twice = [f for f in source.fetches if source.fetches.count(f) > 1]
    assert damaged_twice  # a damaged chunk was fetched again from the same offset


def test_a_chunk_that_keeps_failing_fails_the_copy_after_the_retries(tmp_path: Path) -> None:
    source = FakeSource([STORE, SEGMENT], damage=1000)
    parsed = parse_begin_response("t1", begin_response(FILES))
    with pytest.raises(IOFailure, match=r"failed 3 times; the last error: Corruption: .*CRC32C mismatch"):
        run(client(source, CopyCounters(), retries=2).download(REQUEST, parsed, tmp_path / "copy"))


def test_network_errors_are_retried_but_a_lost_session_fails_at_once(tmp_path: Path) -> None:
    parsed = parse_begin_response("t1", begin_response(FILES))
    gone = FakeSource([STORE, SEGMENT], fail=NotFound)
    with pytest.raises(NotFound):
        run(client(gone, CopyCounters()).download(REQUEST, parsed, tmp_path / "a"))
    assert len(gone.fetches) <= 3  # one per worker, none retried
    down = FakeSource([STORE, SEGMENT], fail=NetworkError)
    with pytest.raises(IOFailure, match="NetworkError"):
        run(client(down, CopyCounters(), retries=1).download(REQUEST, parsed, tmp_path / "b"))


def test_a_file_whose_whole_crc_disagrees_is_refused(tmp_path: Path) -> None:
    response = begin_response(FILES)
    response.files[1].crc32c ^= 0xFF
    parsed = parse_begin_response("t1", response)
    counters = CopyCounters()
    with pytest.raises(Corruption, match=r"wal-000000004: the copy holds 7000 bytes with CRC32C"):
        run(client(FakeSource([STORE, SEGMENT]), counters, location="/dc2").download(REQUEST, parsed, tmp_path / "c"))
    assert counters.bytes_across_locations == len(STORE) + len(SEGMENT)


def test_files_are_read_back_behind_the_writes_and_a_bad_write_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole-file check reads every byte back from the file, most of them while later
    chunks are still being fetched (chunks land out of order: three are in flight), so it
    catches bytes that reached the file wrong even when every chunk arrived intact."""
    monkeypatch.setattr(tablet_copy_client, "READ_BACK_EVERY", 3000)
    ranges: list[tuple[int, int]] = []
    crc_range = tablet_copy_client._crc_range

    def noted(path: Path, start: int, end: int, crc: int) -> int:
        if path.name == "t1.duckdb":
            ranges.append((start, end))
        return crc_range(path, start, end, crc)

    monkeypatch.setattr(tablet_copy_client, "_crc_range", noted)
    parsed = parse_begin_response("t1", begin_response(FILES))
    run(client(FakeSource([STORE, SEGMENT]), CopyCounters()).download(REQUEST, parsed, tmp_path / "good"))
    assert len(ranges) >= 2  # read back in pieces, the first behind the writes
    assert ranges[0][0] == 0
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(ranges))  # in order, each byte once
    assert ranges[-1][1] == len(STORE)
    pwrite_all = tablet_copy_client._pwrite_all

    def flipped(fd: int, data: Any, offset: int) -> None:
        if offset == 6000:  # one chunk reaches the file with a byte flipped
            data = bytes([data[0] ^ 1]) + bytes(data[1:])
        pwrite_all(fd, data, offset)

    monkeypatch.setattr(tablet_copy_client, "_pwrite_all", flipped)
    with pytest.raises(Corruption, match=r"t1.duckdb: the copy holds 13000 bytes with CRC32C"):
        run(client(FakeSource([STORE, SEGMENT]), CopyCounters()).download(REQUEST, parsed, tmp_path / "bad"))


def test_the_throttler_paces_bytes_to_the_rate() -> None:
    now = [100.0]
    throttler = Throttler(1_000_000, clock=lambda: now[0])
    assert [throttler.delay(500_000) for _ in range(4)] == [0.0, 0.5, 1.0, 1.5]
    now[0] += 10  # idle: no burst builds up
    assert [throttler.delay(1_000_000), throttler.delay(1)] == [0.0, 1.0]
    assert Throttler(0).delay(10**9) == 0.0


def progress(peer: str, match: int, state: ProgressState = ProgressState.REPLICATE) -> PeerProgress:
    p = Progress(match + 1)
    p.match, p.state = match, state
    return PeerProgress(peer, p, failed_ticks=1000)


def test_the_source_is_an_up_to_date_replica_in_the_destinations_location_else_the_leader() -> None:
    where = {"L": "/a", "D": "/b", "F1": "/b", "F2": "/b", "F3": "/c"}.get
    everyone = [progress("F1", 90), progress("F2", 100), progress("F3", 100), progress("D", 10)]

    def choose(peers: list[PeerProgress], location: Any = where, reachable: Any = lambda _u: True) -> str:
        return choose_copy_source("L", "D", peers, 100, lambda u: location(u) or "", reachable)

    assert choose(everyone) == "F2"  # F1 lags behind the commit index
    assert choose([progress("F2", 100, ProgressState.PROBE)]) == "L"
    assert choose(everyone, reachable=lambda u: u != "F2") == "L"
    assert choose(everyone, location={"L": "/b", "D": "/b", "F2": "/b"}.get) == "L"  # the leader is there too
    assert choose(everyone, location={"F2": "/b"}.get) == "L"  # the destination's location is unknown


def start_request(**changes: Any) -> tcpb.StartTabletCopyRequestPB:
    request = tcpb.StartTabletCopyRequestPB(
        dest_uuid=ME,
        tablet_id="t1",
        copy_peer_uuid=SOURCE,
        copy_peer_addr=common_pb2.HostPortPB(host="127.0.0.1", port=7050),
        caller_uuid="l" * 32,
        caller_term=4,
    )
    for field, value in changes.items():
        if field == "copy_peer_addr":
            request.copy_peer_addr.CopyFrom(value)
        else:
            setattr(request, field, value)
    return request


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"dest_uuid": "x"}, "is for server 'x'"),
        ({"tablet_id": "a/b"}, "tablet id 'a/b'"),
        ({"copy_peer_uuid": ""}, "copy_peer_uuid"),
        ({"copy_peer_uuid": ME}, "its own copy source"),
        ({"copy_peer_addr": common_pb2.HostPortPB(host="h", port=0)}, "copy_peer_addr"),
        ({"caller_uuid": ""}, "caller_uuid"),
        ({"caller_term": -1}, "caller_term must be >= 0"),
        ({"leader_first_index": -1}, "leader_first_index must be >= 0"),
    ],
)
def test_start_tablet_copy_is_validated_in_full(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        parse_start_tablet_copy(start_request(**changes), ME)
    parsed = parse_start_tablet_copy(start_request(replace_live_replica=True, leader_first_index=5), ME)
    assert parsed == CopyRequest("t1", SOURCE, HostPort("127.0.0.1", 7050), "l" * 32, 4, True, 5)
