"""Fixtures: a fake cluster per test, and a runner for async client code."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from nyala.rpc.loop import run as run_on_loop
from tests.unit.client.fakes import FakeCluster

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    fake = FakeCluster(num_masters=1, num_tservers=3)
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def run() -> Runner:
    def runner(coro: Coroutine[Any, Any, Any]) -> Any:
        return run_on_loop(coro)

    return runner
