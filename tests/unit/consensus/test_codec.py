"""Raft messages to protobuf and back, with large entry payloads carried as call sidecars."""

from __future__ import annotations

import pytest

from nyala.consensus.core import AppendRequest, EntryType, Heartbeat, LogEntry, VoteRequest
from nyala.consensus.runtime.codec import MAX_SIDECARS, SIDECAR_MIN_BYTES, decode_message, encode_message
from nyala.errors import InvalidArgument
from nyala.proto import consensus_rpc_pb2 as pb
from nyala.rpc import Buffer

pytestmark = pytest.mark.timeout(30)


def _append(*payloads: bytes) -> AppendRequest:
    entries = tuple(LogEntry(3, 10 + i, EntryType.WRITE, p) for i, p in enumerate(payloads))
    return AppendRequest("g", "a", "b", 3, prev_index=9, prev_term=2, entries=entries, commit_index=8)


def _round_trip(message: AppendRequest | Heartbeat | VoteRequest) -> tuple[object, list[Buffer]]:
    sidecars: list[Buffer] = []
    wire = encode_message(message, sidecars).SerializeToString()
    views = [memoryview(bytes(s)) for s in sidecars]  # as the receiver gets them: views of a frame
    return decode_message(pb.RaftMessagePB.FromString(wire), views), sidecars


def test_large_payloads_travel_as_sidecars_and_small_ones_inline() -> None:
    big, small = b"x" * SIDECAR_MIN_BYTES, b"y" * (SIDECAR_MIN_BYTES - 1)
    message = _append(big, small, b"", big + b"z")
    decoded, sidecars = _round_trip(message)
    assert decoded == message
    assert [len(s) for s in sidecars] == [len(big), len(big) + 1]
    assert sidecars[0] is message.entries[0].payload  # referenced, not copied, on the way out
    assert all(type(e.payload) is bytes for e in decoded.entries)


def test_messages_without_entries_round_trip_without_sidecars() -> None:
    for message in (
        Heartbeat("g", "a", "b", 4, commit_index=7, read_seq=2, leader_commit=9),
        VoteRequest("g", "a", "b", 5, last_index=3, last_term=2, pre_vote=True, ignore_live_leader=False),
    ):
        decoded, sidecars = _round_trip(message)
        assert decoded == message
        assert sidecars == []


def test_payloads_go_inline_once_a_call_has_its_maximum_of_sidecars() -> None:
    sidecars: list[Buffer] = [b"earlier"] * (MAX_SIDECARS - 1)
    encoded = encode_message(_append(b"a" * SIDECAR_MIN_BYTES, b"b" * SIDECAR_MIN_BYTES), sidecars)
    assert len(sidecars) == MAX_SIDECARS
    first, second = encoded.append_request.entries
    assert first.payload_sidecar == MAX_SIDECARS
    assert not first.payload
    assert second.payload_sidecar == 0
    assert second.payload == b"b" * SIDECAR_MIN_BYTES


def test_a_missing_sidecar_is_refused_with_its_position() -> None:
    sidecars: list[Buffer] = []
    wire = encode_message(_append(b"x" * SIDECAR_MIN_BYTES), sidecars)
    with pytest.raises(InvalidArgument, match="names payload sidecar 0, but the call has 0 sidecars"):
        decode_message(wire, [])


def test_an_entry_with_both_an_inline_payload_and_a_sidecar_is_refused() -> None:
    wire = pb.RaftMessagePB(group_id="g", sender="a", recipient="b", term=1)
    wire.append_request.entries.add(term=1, index=1, type=int(EntryType.WRITE), payload=b"p", payload_sidecar=1)
    with pytest.raises(InvalidArgument, match="both an inline payload and sidecar 0"):
        decode_message(wire, [b"q"])


def test_an_unknown_entry_type_is_refused() -> None:
    wire = pb.RaftMessagePB(group_id="g", sender="a", recipient="b", term=1)
    wire.append_request.entries.add(term=1, index=1, type=99)
    with pytest.raises(InvalidArgument, match="log entry 1 has an unknown type"):
        decode_message(wire)
