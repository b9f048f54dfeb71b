"""The frame decoder, fed byte streams cut at arbitrary places (no sockets)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nyala.rpc.framing import (
    PREAMBLE,
    Frame,
    FrameDecoder,
    FrameError,
    RequestHeader,
    ResponseHeader,
    SplitSidecar,
    encode_request,
    encode_response,
)

MAX = 1 << 20


def feed(decoder: FrameDecoder[Any], data: bytes, cuts: list[int]) -> list[Frame[Any]]:
    """Deliver ``data`` the way a socket would: in pieces, into the buffers the decoder offers."""
    frames = []
    offset = 0
    for size in [*cuts, len(data)]:
        chunk_end = min(len(data), offset + max(1, size))
        while offset < chunk_end:
            target = decoder.get_buffer(-1)
            n = min(len(target), chunk_end - offset)
            assert n > 0, "decoder offered an empty buffer"
            target[:n] = data[offset : offset + n]
            offset += n
            frames += decoder.buffer_updated(n)
    return frames


def request_bytes(call_id: int, body: bytes, sidecars: list[bytes], method: bytes = b"Svc.Method") -> bytes:
    return b"".join(bytes(p) for p in encode_request(call_id, method, 1500, body, sidecars, MAX))


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(
        st.tuples(st.binary(max_size=300), st.lists(st.binary(max_size=3000), max_size=3)), min_size=1, max_size=6
    ),
    cuts=st.lists(st.integers(1, 5000), max_size=20),
    buffer_bytes=st.sampled_from([1024, 4096, 256 * 1024]),
)
def test_requests_survive_any_chunking(messages, cuts, buffer_bytes) -> None:
    stream = PREAMBLE + b"".join(request_bytes(i, body, sc) for i, (body, sc) in enumerate(messages))
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=True, buffer_bytes=buffer_bytes)
    frames = feed(decoder, stream, cuts)
    assert len(frames) == len(messages)
    for i, (frame, (body, sidecars)) in enumerate(zip(frames, messages, strict=True)):
        assert frame.header.call_id == i
        assert frame.header.method == b"Svc.Method"
        assert frame.header.timeout_ms == 1500
        assert bytes(frame.body) == body
        assert [bytes(s) for s in frame.sidecars] == sidecars


def test_response_carries_status_message_and_leader_hint() -> None:
    pieces = encode_response(7, 7, "not the leader: ask", "ts-2", b"body", [b"side"], MAX)
    decoder = FrameDecoder(ResponseHeader, MAX, expect_preamble=False)
    (frame,) = feed(decoder, b"".join(bytes(p) for p in pieces), [])
    header = frame.header
    assert (header.call_id, header.code, header.message, header.leader_hint) == (7, 7, "not the leader: ask", "ts-2")
    assert bytes(frame.body) == b"body"
    assert [bytes(s) for s in frame.sidecars] == [b"side"]


def test_a_split_sidecar_goes_out_as_its_pieces_and_arrives_as_one() -> None:
    column = memoryview(bytes(range(256)) * 8)
    split = SplitSidecar([b"head", column, b"", b"tail"])
    assert len(split) == 4 + 2048 + 4
    pieces = encode_response(3, 0, "", "", b"body", [b"first", split, b"last"], MAX)
    assert any(piece is column for piece in pieces)  # handed to the socket as it is, not copied
    decoder = FrameDecoder(ResponseHeader, MAX, expect_preamble=False)
    (frame,) = feed(decoder, b"".join(bytes(p) for p in pieces), [100])
    assert [bytes(s) for s in frame.sidecars] == [b"first", b"head" + bytes(column) + b"tail", b"last"]


def test_frame_larger_than_half_the_buffer_is_received_into_its_own_buffer() -> None:
    sidecar = bytes(range(256)) * 400  # 100 KiB against a 4 KiB receive buffer
    stream = PREAMBLE + request_bytes(1, b"b", [sidecar]) + request_bytes(2, b"c", [])
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=True, buffer_bytes=4096)
    frames = feed(decoder, stream, [100, 5000, 7])
    assert [f.header.call_id for f in frames] == [1, 2]
    assert bytes(frames[0].sidecars[0]) == sidecar


def test_oversized_frame_is_refused_from_its_prefix_alone() -> None:
    decoder = FrameDecoder(RequestHeader, 1000, expect_preamble=True)
    prefix = struct.pack("!II", 1001, 20)
    with pytest.raises(FrameError, match="1001 bytes exceeds the maximum frame size of 1000"):
        feed(decoder, PREAMBLE + prefix, [])


def test_encoder_refuses_a_frame_over_the_limit_naming_both_sizes() -> None:
    with pytest.raises(ValueError, match=r"frame of \d+ bytes exceeds the maximum frame size of 100 bytes"):
        encode_request(1, b"S.M", 0, b"x" * 200, [], 100)


def test_bad_preamble_is_refused() -> None:
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=True)
    with pytest.raises(FrameError, match="bad connection preamble"):
        feed(decoder, b"GET / HTTP/1.1\r\n", [])


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (struct.pack("!II", 10, 11) + b"x" * 10, "header length 11 is invalid"),
        (struct.pack("!II", 4, 4) + b"\x01\x00\x00", "does not parse"),
    ],
)
def test_malformed_prefix_or_header_is_refused(frame: bytes, message: str) -> None:
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=False)
    with pytest.raises(FrameError, match=message):
        feed(decoder, frame + b"\x00" * 16, [])


def test_sizes_that_do_not_add_up_are_refused() -> None:
    good = request_bytes(1, b"body", [])
    frame_len, header_len = struct.unpack_from("!II", good)
    tampered = struct.pack("!II", frame_len + 3, header_len) + good[8:] + b"xyz"
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=False)
    with pytest.raises(FrameError, match="do not add up"):
        feed(decoder, tampered, [])


def test_response_frame_sent_to_a_server_is_refused() -> None:
    pieces = encode_response(1, 0, "", "", b"", [], MAX)
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=False)
    with pytest.raises(FrameError, match="expected a request frame"):
        feed(decoder, b"".join(bytes(p) for p in pieces), [])


@pytest.mark.parametrize("buffer_bytes", [1024, 256 * 1024], ids=["own-buffer", "shared-buffer"])
def test_sidecars_arrive_aligned_for_arrow(buffer_bytes: int) -> None:
    import pyarrow as pa

    sidecars = [b"a" * 3, b"b" * 5000, b"", b"c" * 7]
    stream = PREAMBLE + request_bytes(1, b"odd-sized body", sidecars, method=b"S.Method1")
    decoder = FrameDecoder(RequestHeader, MAX, expect_preamble=True, buffer_bytes=buffer_bytes)
    (frame,) = feed(decoder, stream, [17, 333])
    assert [bytes(s) for s in frame.sidecars] == sidecars
    for sidecar in frame.sidecars:
        if len(sidecar):
            # Arrow reads buffers in place; Decimal128, the widest type, needs 16-byte alignment.
            assert pa.py_buffer(sidecar).address % 16 == 0
