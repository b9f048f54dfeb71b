"""The pure parts: byte layouts and the log index, checked against simple models."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nyala.errors import Corruption, NotFound
from nyala.wal import LogEntry
from nyala.wal.format import (
    KIND_ENTRY,
    Footer,
    batch_header,
    decode_segment_header,
    effective_records,
    encode_entries,
    encode_footer,
    encode_segment_header,
    encode_truncate_marker,
    find_footer,
    iter_records,
    parse_segment_name,
    segment_name,
    valid_batch_at,
)
from nyala.wal.index import LogIndex

entry_lists = st.integers(1, 2**40).flatmap(
    lambda first: st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 0xFFFF), st.binary(max_size=64)), min_size=1, max_size=8
    ).map(
        lambda items: [
            LogEntry(term, first + i, etype, data)
            for i, (term, etype, data) in enumerate(sorted(items, key=lambda t: t[0]))
        ]
    )
)


@given(entry_lists)
@settings(max_examples=200, deadline=None)
def test_records_round_trip(entries: list[LogEntry]) -> None:
    data, runs = encode_entries(entries)
    records = list(iter_records(data, "test"))
    decoded = [LogEntry(r.term, r.op_index, r.type, data[r.start : r.start + r.length]) for r in records]
    assert decoded == entries
    assert all(r.kind == KIND_ENTRY for r in records)
    assert runs == [(e.index, e.term) for k, e in enumerate(entries) if k == 0 or entries[k - 1].term != e.term]


def test_markers_inside_a_payload_cut_what_precedes_them() -> None:
    first, _ = encode_entries([LogEntry(1, i, 0, b"a") for i in range(1, 6)])
    second, _ = encode_entries([LogEntry(2, i, 0, b"b") for i in range(3, 5)])
    payload = first + encode_truncate_marker(2) + second + encode_truncate_marker(3)
    assert [(r.op_index, r.term) for r in effective_records(payload, "x")] == [(1, 1), (2, 1), (3, 2)]


def test_malformed_payloads_are_corruption() -> None:
    data, _ = encode_entries([LogEntry(1, 1, 0, b"abc")])
    with pytest.raises(Corruption, match="w: record header cut short at payload offset 27"):
        list(iter_records(data + b"\x01", "w"))
    with pytest.raises(Corruption, match=re.escape("w: malformed record (kind 9) at payload offset 0")):
        list(iter_records(b"\x09" + data[1:], "w"))
    with pytest.raises(Corruption, match="malformed record"):
        list(iter_records(data[:-1], "w"))


def test_segment_header_round_trip_and_damage() -> None:
    raw = encode_segment_header(42, "tablet-ü")
    header = decode_segment_header(raw + b"rest", "f")
    assert (header.seqno, header.tablet_id, header.size, header.version) == (42, "tablet-ü", len(raw), 1)
    with pytest.raises(Corruption, match="f: segment header is truncated"):
        decode_segment_header(raw[:10], "f")
    for offset in range(len(raw)):
        damaged = bytearray(raw)
        damaged[offset] ^= 1
        with pytest.raises(Corruption, match=r"f: .* at byte offset \d+"):
            decode_segment_header(bytes(damaged), "f")


def test_batch_framing_detects_any_flipped_bit() -> None:
    payload = b"payload bytes" * 3
    frame = b"\0" * 5 + batch_header(payload) + payload
    assert valid_batch_at(frame, 5, len(frame)) == len(payload)
    assert valid_batch_at(frame, 5, len(frame) - 1) is None  # cut short
    for offset in range(5, len(frame)):
        damaged = bytearray(frame)
        damaged[offset] ^= 0x10
        assert valid_batch_at(bytes(damaged), 5, len(frame)) is None


def test_footer_is_found_from_the_end() -> None:
    body = encode_segment_header(1, "t") + b"x" * 100
    footer = Footer(7, 3, 9)
    data = body + encode_footer(footer)
    assert find_footer(data, 20) == (footer, len(body))
    assert find_footer(body, 20) is None
    damaged = bytearray(data)
    damaged[len(body) + 2] ^= 1
    assert find_footer(bytes(damaged), 20) is None


def test_segment_names() -> None:
    assert segment_name(1) == "wal-000000001"
    assert parse_segment_name("wal-000000001") == 1
    assert parse_segment_name("wal-1234567890") == 1234567890
    for other in ("wal-000000001.tmp", "wal-1", "LOCK", "xwal-000000001"):
        assert parse_segment_name(other) is None


def test_index_spans_terms_truncation_and_gc() -> None:
    index = LogIndex()
    index.add(1, 100, 1, 3, [(1, 1)])
    index.add(1, 200, 4, 4, [(4, 1)])
    index.add(2, 50, 5, 9, [(5, 2), (8, 3)])
    assert (index.first_index, index.last_index, len(index)) == (1, 9, 9)
    assert [index.term_at(i) for i in range(1, 10)] == [1, 1, 1, 1, 2, 2, 2, 3, 3]
    spans = index.spans_from(2, 10)
    assert [(s.lo, s.hi, s.seqno, s.offset) for s in spans] == [(2, 3, 1, 100), (4, 4, 1, 200), (5, 9, 2, 50)]
    index.truncate_after(6)
    assert (index.last_index, index.last_term) == (6, 2)
    index.add(2, 80, 7, 7, [(7, 4)])
    assert [index.term_at(i) for i in (6, 7)] == [2, 4]
    assert [(s.lo, s.hi) for s in index.spans_from(5, 10)] == [(5, 6), (7, 7)]
    index.drop_segments_through(1)
    assert (index.first_index, index.last_index) == (5, 7)
    with pytest.raises(NotFound, match=re.escape("index 4 is not in the log (it holds indexes 5..7)")):
        index.term_at(4)
    index.truncate_after(4)
    assert (index.first_index, index.last_index, len(index), index.last_term) == (5, 4, 0, None)
    with pytest.raises(NotFound, match="no entries; the next index is 5"):
        index.term_at(5)


@given(st.lists(st.tuples(st.sampled_from(["add", "truncate", "gc"]), st.integers(1, 5), st.integers(0, 2))))
@settings(max_examples=200, deadline=None)
def test_index_agrees_with_a_dict_model(operations: list[tuple[str, int, int]]) -> None:
    """Random adds (a batch per op, a segment every few), truncations and GCs against a dict."""
    index = LogIndex()
    model: dict[int, tuple[int, int, int]] = {}  # op index -> (term, seqno, batch offset)
    term, seqno, offset = 1, 1, 0
    for op, amount, bump in operations:
        last = index.last_index
        if op == "add":
            term += bump
            offset += 1
            seqno += offset % 3 == 0
            index.add(seqno, offset, last + 1, last + amount, [(last + 1, term)])
            model.update({i: (term, seqno, offset) for i in range(last + 1, last + amount + 1)})
        elif op == "truncate":
            after = max(last - amount, index.first_index - 1)
            index.truncate_after(after)
            model = {i: v for i, v in model.items() if i <= after}
        elif model:
            cut = min(v[1] for v in model.values())
            index.drop_segments_through(cut)
            model = {i: v for i, v in model.items() if v[1] > cut}
        assert len(index) == len(model)
        for i, (t, s, o) in model.items():
            assert index.term_at(i) == t
            span = index.spans_from(i, 1)[0]
            assert (span.lo, span.seqno, span.offset) == (i, s, o)
            assert span.hi >= i
