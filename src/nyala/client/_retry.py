"""Deadlines and backoff: how every client operation bounds its retries.

An operation gets one deadline (event-loop time).  Each attempt of an RPC gets the remaining
time, capped by ``rpc_attempt_timeout_ms`` so that a paused server costs one attempt, not the
whole operation.  Between attempts of a retriable failure the client sleeps with exponential
backoff and jitter, never past the deadline; when the deadline passes, the operation raises
``TimedOut`` naming what it was doing and the last error seen.
"""

from __future__ import annotations

import asyncio
import random

from nyala.errors import NyalaError, TimedOut

from .options import ClientOptions

__all__ = ["Backoff", "Deadline"]


class Deadline:
    """A point in event-loop time by which an operation must finish."""

    __slots__ = ("at", "what")

    def __init__(self, timeout_s: float, what: str) -> None:
        self.at = asyncio.get_running_loop().time() + timeout_s
        self.what = what

    def remaining(self) -> float:
        return max(0.0, self.at - asyncio.get_running_loop().time())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def attempt_timeout(self, options: ClientOptions) -> float:
        """Time one attempt may take: what is left, capped per attempt."""
        return min(self.remaining(), options.rpc_attempt_timeout_ms / 1000)

    def timed_out(self, last_error: BaseException | None, attempts: int) -> TimedOut:
        detail = f"; last error: {type(last_error).__name__}: {last_error}" if last_error is not None else ""
        return TimedOut(f"{self.what} did not finish before its deadline ({attempts} attempts){detail}")


class Backoff:
    """Exponential backoff with jitter, bounded by a deadline."""

    __slots__ = ("_delay", "_max", "_rng", "attempts", "last_error")

    def __init__(self, options: ClientOptions, rng: random.Random | None = None) -> None:
        self._delay = options.retry_backoff_initial_ms / 1000
        self._max = options.retry_backoff_max_ms / 1000
        self._rng = rng or random.Random()
        self.attempts = 0
        self.last_error: NyalaError | None = None

    async def wait(self, deadline: Deadline, error: NyalaError | None = None) -> None:
        """Record ``error`` and sleep before the next attempt; TimedOut when no time is left."""
        self.attempts += 1
        if error is not None:
            self.last_error = error
        remaining = deadline.remaining()
        if remaining <= 0:
            raise deadline.timed_out(self.last_error, self.attempts)
        pause = min(remaining, self._delay * self._rng.uniform(0.5, 1.0))
        self._delay = min(self._max, self._delay * 2)
        await asyncio.sleep(pause)

    def check(self, deadline: Deadline) -> None:
        """Raise TimedOut if the deadline has passed."""
        if deadline.expired:
            raise deadline.timed_out(self.last_error, self.attempts)
