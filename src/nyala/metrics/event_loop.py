"""Event-loop lag: how late a timer set on the server's loop fires.

Every server does its RPC dispatch, Raft ticks and page rendering on one asyncio loop; a
handler that blocks it (a slow scrape, a synchronous disk call) delays everything else.
:class:`LoopLagMonitor` arms a timer every ``interval_s`` and records how much later than
asked it ran, in ``nyala_event_loop_lag_seconds`` (a histogram) and the last sample in
``nyala_event_loop_lag_last_seconds``.  It costs one timer callback per interval.
"""

from __future__ import annotations

import asyncio

from prometheus_client.registry import CollectorRegistry

from nyala.metrics.loop import LoopMetrics

__all__ = ["LAG_BUCKETS_S", "LoopLagMonitor"]

#: From 1 ms (a busy loop) to 10 s (a loop stuck behind a blocking call).
LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLagMonitor:
    """Samples the lag of the running loop every ``interval_s`` between :meth:`start` and :meth:`stop`."""

    def __init__(self, registry: CollectorRegistry | None = None, interval_s: float = 0.5) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        metrics = LoopMetrics()
        self.lag = metrics.histogram(
            "nyala_event_loop_lag_seconds",
            f"How much later than asked a timer on the server's event loop fired (sampled every {interval_s} s).",
            buckets=LAG_BUCKETS_S,
        ).child()
        self.last_s = 0.0
        metrics.gauge(
            "nyala_event_loop_lag_last_seconds", "The event loop's lag at the last sample.", lambda: [((), self.last_s)]
        )
        metrics.register_on(registry)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start sampling on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._arm()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._loop = None

    def _arm(self) -> None:
        assert self._loop is not None
        due = self._loop.time() + self.interval_s
        self._handle = self._loop.call_at(due, self._fired, due)

    def _fired(self, due: float) -> None:
        if self._loop is None:
            return
        self.record(max(0.0, self._loop.time() - due))
        self._arm()

    def record(self, lag_s: float) -> None:
        self.last_s = lag_s
        self.lag.observe(lag_s)
