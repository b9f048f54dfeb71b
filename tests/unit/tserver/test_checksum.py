"""Checksum markers: applied in log order, checksummed in the background; the Checksum call."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from nyala.consensus.core import EntryType, LogEntry, Role
from nyala.consensus.runtime import RaftReplica
from nyala.errors import Corruption, InvalidArgument, IOFailure, NotFound, NotTheLeader
from nyala.proto import common_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext
from nyala.rpc.loop import run
from nyala.schema import OpType, make_row_operations
from nyala.storage import RowsChecksum, ScanSpec, TabletStore, TabletStoreManager, checksum_batches
from nyala.tserver import TabletServerOptions
from nyala.tserver.checksum import ChecksumTracker
from nyala.tserver.envelope import ChecksumPayload, decode_payload, encode_checksum, encode_write
from nyala.tserver.manager import TabletManager
from nyala.tserver.metadata import MetadataFile
from nyala.tserver.service import TabletService
from nyala.tserver.state_machine import TabletStateMachine
from nyala.tserver.tablet import TabletReplica

from .conftest import SCHEMA, ListScanner, batches, metadata

pytestmark = pytest.mark.timeout(60)


def write(index: int, ids: range) -> LogEntry:
    rows = [{"id": i, "v": float(i), "s": f"s{i}"} for i in ids]
    return LogEntry(1, index, EntryType.WRITE, encode_write(make_row_operations(SCHEMA, OpType.UPSERT, rows)))


def marker(index: int) -> LogEntry:
    return LogEntry(1, index, EntryType.WRITE, encode_checksum())


def rows_checksum(store: TabletStore) -> RowsChecksum:
    with store.scan(ScanSpec()) as scanner:
        return checksum_batches(scanner)


def make_machine(
    tmp_path: Path, stores: TabletStoreManager, tablet_id: str = "tablet-1"
) -> tuple[TabletStateMachine, TabletStore]:
    meta = metadata(tablet_id)
    directory = tmp_path / tablet_id
    directory.mkdir()
    meta.save(directory)
    store = stores.create_tablet(meta.tablet_id, meta.schema)
    return TabletStateMachine(store, MetadataFile(directory, meta), lambda: None), store


def test_the_marker_payload_round_trips_and_refuses_a_body() -> None:
    assert decode_payload(encode_checksum()) == ChecksumPayload()
    with pytest.raises(Corruption, match="checksum marker with 2 unexpected bytes"):
        decode_payload(encode_checksum() + b"xx")


def test_a_marker_checksums_exactly_the_entries_before_it(tmp_path: Path, stores: TabletStoreManager) -> None:
    machine, _ = make_machine(tmp_path, stores)
    # One apply call: writes before the marker, the marker, writes after it (they must not count).
    results = machine.apply([write(1, range(50)), write(2, range(25, 80)), marker(3), write(4, range(80, 90))])
    assert [(r.index, r.error) for r in results] == [(1, None), (2, None), (3, None), (4, None)]  # type: ignore[union-attr]
    future = machine.checksums.result(3)
    assert future is not None
    at_marker = future.result(timeout=30)
    reference, reference_store = make_machine(tmp_path, stores, "tablet-2")
    reference.apply([write(1, range(80))])  # the same rows, written otherwise
    assert at_marker.num_rows == 80
    assert at_marker == rows_checksum(reference_store)
    assert machine.checksums.result(4) is None  # a write is not a marker


def test_the_tracker_keeps_the_last_results_and_records_errors() -> None:
    tracker = ChecksumTracker(keep=2)
    for index in (1, 2, 3):
        tracker.start(index, lambda: ListScanner(batches(10, 5)))

    def broken() -> ListScanner:
        raise IOFailure("the store is gone")

    tracker.start(4, broken)
    assert tracker.result(1) is None
    assert tracker.result(2) is None
    done = tracker.result(3)
    assert done is not None
    assert done.result(timeout=30).num_rows == 15
    failed = tracker.result(4)
    assert failed is not None
    with pytest.raises(IOFailure, match="the store is gone"):
        failed.result(timeout=30)
    with pytest.raises(ValueError, match="at least one"):
        ChecksumTracker(keep=0)


class StandInRaft:
    """Commits and applies a proposal at once; plays leader or follower."""

    def __init__(self, machine: TabletStateMachine) -> None:
        self.machine = machine
        self.role = Role.LEADER
        self.peer_id = "me"
        self.leader_id = "me"
        self.failed = None
        self.applied_index = 0
        self.term = 1

    async def wait_applied(self, index: int) -> None:
        assert index <= self.applied_index

    async def replicate(self, payload: bytes) -> object:
        self.applied_index += 1
        return self.machine.apply([LogEntry(1, self.applied_index, EntryType.WRITE, payload)])[0]


class OneTablet:
    """The part of a TabletManager the service uses: one tablet."""

    def __init__(self, tablet: TabletReplica) -> None:
        self.tablet = tablet

    def get(self, tablet_id: str) -> TabletReplica:
        if tablet_id != self.tablet.tablet_id:
            raise NotFound(f"tablet {tablet_id!r} is not hosted on this server")
        return self.tablet


def test_the_checksum_call(tmp_path: Path, stores: TabletStoreManager) -> None:
    meta = metadata()
    meta.save(tmp_path)
    file = MetadataFile(tmp_path, meta)
    store = stores.create_tablet(meta.tablet_id, meta.schema)
    tablet = TabletReplica(tmp_path, file)
    machine = TabletStateMachine(store, file, lambda: None, tablet.tracker, tablet.checksums)
    raft = StandInRaft(machine)
    tablet.attach(store, cast(RaftReplica, raft))
    status = (common_pb2.NodeInstancePB(), common_pb2.ServerRegistrationPB())
    manager = cast(TabletManager, OneTablet(tablet))
    service = TabletService(manager, cast(object, None), cast(object, None), TabletServerOptions(), lambda: status)  # type: ignore[arg-type]

    def call(tablet_id: str = "tablet-1", index: int = 0) -> tpb.ChecksumResponsePB:
        request = tpb.ChecksumRequestPB(tablet_id=tablet_id, marker_index=index)
        return run(service.checksum(request, CallContext("Checksum", "test", None, [])))

    machine.apply([write(1, range(30))])
    raft.applied_index = 1
    first = call()
    assert (first.marker_index, first.rows_checksummed) == (2, 30)
    assert first.checksum == rows_checksum(store).checksum
    again = call(index=2)  # what any replica answers for that marker
    assert again == first
    with pytest.raises(NotFound, match="has no checksum at index 1"):
        call(index=1)
    with pytest.raises(NotFound, match="'nope' is not hosted"):
        call("nope")
    with pytest.raises(InvalidArgument, match="names the tablet"):
        call("")
    with pytest.raises(InvalidArgument, match=r"marker_index is 0 .* got -1"):
        call(index=-1)
    raft.role, raft.leader_id = Role.FOLLOWER, "other"
    with pytest.raises(NotTheLeader):
        call()
    assert raft.applied_index == 2  # nothing was replicated by the refused calls
