"""A fake cluster per test and a helper to run ``nyala`` commands against it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from nyala.tools.cli import main
from tests.unit.client.fakes import FakeCluster

Invoke = Callable[..., Result]


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    fake = FakeCluster(num_masters=1, num_tservers=3)
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def nyala(cluster: FakeCluster) -> Invoke:
    """``nyala(group, command, *args)``: run ``nyala GROUP COMMAND MASTERS *args``."""

    def invoke(group: str, command: str, *args: str) -> Result:
        return CliRunner().invoke(main, [group, command, cluster.master_addresses, *args, "--timeout-s", "5"])

    return invoke
