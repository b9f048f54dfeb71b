"""Waiting for a condition with a deadline: how tests and the test kit wait, never for time.

``wait_for(condition, what=..., timeout_s=...)`` calls ``condition`` until it returns
something other than ``None`` or ``False`` and returns that value, so one call both waits and
fetches what was awaited (an index of 0 or an empty list counts as found).  If the deadline
passes first it raises :class:`WaitTimeout`, an ``AssertionError`` whose message names what
was awaited, the last value seen and the last error the condition raised (among those it
was told to retry, ``retry_on``); any other error of the condition propagates at once.

:func:`wait_for_async` is the twin for coroutines: it sleeps with ``asyncio.sleep`` and
accepts conditions that are plain functions or coroutine functions.

Checks start right away and back off from 1 ms up to ``interval_s`` between checks, so a
condition that holds soon is noticed soon and one that takes long is not checked in a
tight loop.  The last check falls on the deadline itself: a slow machine gets the whole
``timeout_s``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

__all__ = ["WaitTimeout", "wait_for", "wait_for_async"]

T = TypeVar("T")

#: Pause before the second check; it doubles up to ``interval_s``.
FIRST_INTERVAL_S = 0.001


class WaitTimeout(AssertionError):
    """A condition did not hold before its deadline."""

    def __init__(self, what: str, timeout_s: float, last: object, error: Exception | None) -> None:
        message = f"timed out after {timeout_s:g} s waiting for {what}; last value seen: {last!r}"
        if error is not None:
            message += f"; last error: {type(error).__name__}: {error}"
        super().__init__(message)
        self.what = what
        self.timeout_s = timeout_s
        self.last = last
        self.error = error


class _Checks:
    """The bookkeeping both waits share: deadline, back-off, the last value and error seen."""

    def __init__(
        self, what: str, timeout_s: float, interval_s: float, retry_on: tuple[type[Exception], ...], now: float
    ) -> None:
        if timeout_s < 0 or interval_s <= 0:
            raise ValueError(f"waiting for {what}: timeout_s must be >= 0 and interval_s > 0")
        self.what = what
        self.timeout_s = timeout_s
        self.deadline = now + timeout_s
        self.interval_s = interval_s
        self.retry_on = retry_on
        self.delay = min(FIRST_INTERVAL_S, interval_s)
        self.last: object = None
        self.error: Exception | None = None

    def failed(self, exc: Exception) -> None:
        """Note an error of the condition: retried when listed in ``retry_on``, else raised."""
        if not isinstance(exc, self.retry_on):
            raise exc
        self.error = exc

    def pause(self, now: float) -> float:
        """How long to sleep before the next check; raises WaitTimeout once the deadline has passed."""
        if now >= self.deadline:
            raise self.timeout()
        pause = min(self.delay, self.deadline - now)
        self.delay = min(self.delay * 2, self.interval_s)
        return pause

    def timeout(self) -> WaitTimeout:
        return WaitTimeout(self.what, self.timeout_s, self.last, self.error)


def _found(value: object) -> bool:
    return value is not None and value is not False


def wait_for(
    condition: Callable[[], T | None],
    *,
    what: str,
    timeout_s: float = 30.0,
    interval_s: float = 0.05,
    retry_on: tuple[type[Exception], ...] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Call ``condition`` until it returns neither None nor False; return that value.

    ``what`` names the awaited condition in the failure message ("three live tablet
    servers").  Errors of the types in ``retry_on`` count as "not yet" (the last one is
    quoted on timeout); other errors propagate.  ``clock`` and ``sleep`` are for tests of
    this function.  A condition that blocks is not interrupted: give it its own timeout.
    """
    checks = _Checks(what, timeout_s, interval_s, retry_on, clock())
    while True:
        try:
            value = condition()
        except Exception as exc:
            checks.failed(exc)
        else:
            if _found(value):
                return value  # type: ignore[return-value]  # neither None nor False: a T
            checks.last = value
        sleep(checks.pause(clock()))


@overload
async def wait_for_async(
    condition: Callable[[], Awaitable[T | None]],
    *,
    what: str,
    timeout_s: float = ...,
    interval_s: float = ...,
    retry_on: tuple[type[Exception], ...] = ...,
) -> T: ...


@overload
async def wait_for_async(
    condition: Callable[[], T | None],
    *,
    what: str,
    timeout_s: float = ...,
    interval_s: float = ...,
    retry_on: tuple[type[Exception], ...] = ...,
) -> T: ...


async def wait_for_async(
    condition: Callable[[], Any],
    *,
    what: str,
    timeout_s: float = 30.0,
    interval_s: float = 0.05,
    retry_on: tuple[type[Exception], ...] = (),
) -> Any:
    """:func:`wait_for` inside an event loop; ``condition`` may be a coroutine function.

    The time is the loop's (``loop.time()``).  A coroutine condition still running at the
    deadline is cancelled, and the wait fails naming what it waited for.
    """
    loop = asyncio.get_running_loop()
    checks = _Checks(what, timeout_s, interval_s, retry_on, loop.time())
    while True:
        try:
            value = condition()
            if inspect.isawaitable(value):
                value = await _before(checks.deadline, value)
        except _PastDeadline:
            raise checks.timeout() from None
        except Exception as exc:
            checks.failed(exc)
        else:
            if _found(value):
                return value
            checks.last = value
        await asyncio.sleep(checks.pause(loop.time()))


class _PastDeadline(Exception):
    """A coroutine condition was still running at the wait's deadline."""


async def _before(deadline: float, awaitable: Awaitable[T]) -> T:
    timeout = asyncio.timeout_at(deadline)
    try:
        async with timeout:
            return await awaitable
    except TimeoutError:
        # The condition's own TimeoutError (an RPC that timed out, say) is a failed check;
        # only the expired deadline of this wait ends the wait.
        if timeout.expired():
            raise _PastDeadline from None
        raise
