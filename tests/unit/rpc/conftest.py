"""Fixtures for RPC tests: every test runs on both uvloop and the standard event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from nyala.common.hostport import HostPort
from nyala.rpc import Messenger, RpcOptions, RpcServer
from nyala.rpc.loop import run as run_on_loop

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture(params=["uvloop", "asyncio"])
def run(request: pytest.FixtureRequest) -> Runner:
    use_uvloop = request.param == "uvloop"

    def runner(coro: Coroutine[Any, Any, Any]) -> Any:
        return run_on_loop(coro, use_uvloop=use_uvloop)

    return runner


@contextlib.asynccontextmanager
async def serving(
    server: RpcServer | None = None, messenger_options: RpcOptions | None = None, **messenger_kwargs: Any
) -> AsyncIterator[tuple[RpcServer, HostPort, Messenger]]:
    """A started server on a free loopback port and a messenger; both closed on exit."""
    server = server or RpcServer()
    address = await server.start("127.0.0.1:0")
    messenger = Messenger(messenger_options, **messenger_kwargs)
    try:
        yield server, address, messenger
    finally:
        await messenger.close()
        await server.stop()


async def raw_connection(address: HostPort) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A plain socket to the server, for sending bytes no well-behaved client would send."""
    return await asyncio.open_connection(address.host, address.port)


async def closed_by_peer(reader: asyncio.StreamReader, within_s: float = 10.0) -> bool:
    """True when the server closes the connection (EOF) before ``within_s`` passes."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True
