"""Small helpers shared by the client tests."""

from __future__ import annotations

import pytest

from nyala.client import ClientOptions, Partitioning, schema
from nyala.client._retry import Backoff, Deadline
from nyala.errors import NyalaError
from nyala.schema import Schema

FAST = ClientOptions(
    operation_timeout_ms=5_000,
    admin_operation_timeout_ms=5_000,
    rpc_attempt_timeout_ms=2_000,
    retry_backoff_initial_ms=2,
    retry_backoff_max_ms=50,
)


def kv_schema() -> Schema:
    return schema([("id", "int64"), ("name", "string"), ("v", "double")], primary_key="id")


def hashed(buckets: int = 4) -> Partitioning:
    return Partitioning().add_hash_partitions("id", buckets)


def rows(start: int, stop: int) -> list[dict[str, object]]:
    return [{"id": i, "name": f"n{i}", "v": i * 0.5} for i in range(start, stop)]


def count_pauses(monkeypatch: pytest.MonkeyPatch) -> list[NyalaError | None]:
    """Record the error of every retry pause (``Backoff.wait``) the client takes."""
    pauses: list[NyalaError | None] = []
    wait = Backoff.wait

    async def counted(self: Backoff, deadline: Deadline, error: NyalaError | None = None) -> None:
        pauses.append(error)
        await wait(self, deadline, error)

    monkeypatch.setattr(Backoff, "wait", counted)
    return pauses
