"""Handing results from the appender thread to asyncio event loops, in bulk.

``asyncio.wrap_future`` costs one ``call_soon_threadsafe`` (a self-pipe write and a loop
wake-up) per completed future.  Instead the appender thread collects a whole group's asyncio
futures per event loop and calls :func:`post` once per loop per group; the callback then
resolves them inside the loop, in the order given (reservation order).  Calls that one thread
makes to one loop run in that order, so successive groups also resolve in order.

A future found already done inside the loop was cancelled by the task awaiting it.  That does
not withdraw the append: it was reserved, so it is written and synced like any other, and only
its result goes unobserved.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TypeVar

__all__ = ["post"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def post(
    loop: asyncio.AbstractEventLoop, results: list[tuple[asyncio.Future[T], T]], failure: BaseException | None
) -> None:
    """From any thread: resolve each future with its value (or all with ``failure``) inside ``loop``."""
    try:
        loop.call_soon_threadsafe(_resolve, results, failure)
    except RuntimeError:
        # The loop was closed with appends in flight, so nobody can await them any more.  The
        # appends themselves are durable (or failed) exactly as for any other caller.
        log.debug("event loop closed before %d write-ahead log results were delivered", len(results))


def _resolve(results: list[tuple[asyncio.Future[T], T]], failure: BaseException | None) -> None:
    """Runs inside the loop: complete every future of one group, in order."""
    for future, value in results:
        if future.done():
            continue  # cancelled by its awaiting task; the append is durable all the same
        if failure is None:
            future.set_result(value)
        else:
            future.set_exception(failure)
