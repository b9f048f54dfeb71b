"""Follower reads from the client's side: reads spread over the masters within the bound,
refusals move on to the next master, DDL and the reads right after it stay on the leader."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from nyala.client import ClientOptions, connect
from nyala.errors import InvalidArgument
from tests.unit.client.fakes import FakeCluster
from tests.unit.client.helpers import FAST, hashed, kv_schema


@pytest.fixture
def three_masters() -> Iterator[FakeCluster]:
    fake = FakeCluster(num_masters=3, num_tservers=3)
    yield fake
    fake.close()


def list_calls(cluster: FakeCluster) -> list[int]:
    return [m.calls.get("ListTables", 0) for m in cluster.masters]


def test_without_a_bound_every_read_goes_to_the_leader(three_masters: FakeCluster) -> None:
    with connect(three_masters.master_addresses, options=FAST) as client:
        for _ in range(6):
            assert client.list_tables() == []
    assert list_calls(three_masters) == [6, 0, 0]


def test_reads_within_the_bound_spread_over_every_master(three_masters: FakeCluster) -> None:
    with connect(three_masters.master_addresses, options=FAST, master_read_staleness_ms=1000) as client:
        assert client.aio.options.master_read_staleness_ms == 1000
        for _ in range(6):
            assert client.list_tables() == []
    assert list_calls(three_masters) == [2, 2, 2]  # round robin


def test_a_master_too_stale_for_the_bound_refuses_and_the_next_one_answers(three_masters: FakeCluster) -> None:
    three_masters.follower_staleness_ms = {1: 5000}
    with connect(three_masters.master_addresses, options=FAST, master_read_staleness_ms=1000) as client:
        for _ in range(6):
            assert client.list_tables() == []
    calls = list_calls(three_masters)
    # Asked in its turn (every other read or every third, by where the round robin started),
    # refused, and the next master answered instead: every read was answered by the others.
    assert calls[1] in (2, 3)
    assert calls[0] + calls[2] == 6


def test_ddl_and_the_reads_right_after_it_go_to_the_leader(three_masters: FakeCluster) -> None:
    with connect(three_masters.master_addresses, options=FAST, master_read_staleness_ms=60_000) as client:
        client.create_table("t", kv_schema(), hashed(2))
        assert [m.calls.get("CreateTable", 0) for m in three_masters.masters] == [1, 0, 0]
        before = list_calls(three_masters)
        for _ in range(3):
            assert client.list_tables() == ["t"]  # within a bound of its own DDL: the leader's answer
        after = list_calls(three_masters)
        assert [a - b for a, b in zip(after, before, strict=True)] == [3, 0, 0]


def test_a_bad_bound_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="master_read_staleness_ms must be 0-86400000, got -1"):
        dataclasses.replace(ClientOptions(), master_read_staleness_ms=-1)
    with pytest.raises(InvalidArgument, match="master_read_staleness_ms"):
        connect("127.0.0.1:1", options=FAST, master_read_staleness_ms=86_400_001)
