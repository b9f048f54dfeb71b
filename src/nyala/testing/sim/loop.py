"""The simulator's virtual clock: a heap of timed callbacks, run one at a time.

Time is an integer number of microseconds since the start of the run.  Events at the same
time run in the order they were scheduled (a sequence number breaks ties), so a run is a
pure function of its seed.  Each event run is one *step*.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["MS", "SECOND", "EventLoop"]

MS = 1_000
SECOND = 1_000_000


class EventLoop:
    """A single-threaded discrete-event scheduler on virtual time."""

    __slots__ = ("_heap", "_seq", "now", "steps")

    def __init__(self) -> None:
        self.now = 0
        self.steps = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Callable[[Any], None], Any]] = []

    def call_at(self, when: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn, arg))

    def call_later(self, delay: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self.now + max(delay, 0), self._seq, fn, arg))

    def run_until(self, deadline: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to virtual time ``deadline``; with ``stop``, return True as soon as it
        holds (checked after every event).  The clock ends at ``deadline`` unless stopped."""
        heap = self._heap
        pop = heapq.heappop
        while heap and heap[0][0] <= deadline:
            when, _, fn, arg = pop(heap)
            self.now = when
            self.steps += 1
            fn(arg)
            if stop is not None and stop():
                return True
        self.now = max(self.now, deadline)
        return stop is not None and stop()
