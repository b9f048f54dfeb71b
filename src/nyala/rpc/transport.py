"""Pieces shared by both ends of a connection: coalesced writes and one timer for many deadlines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from nyala.rpc.framing import Buffer

__all__ = ["DeadlineTimer", "FrameWriter"]


class FrameWriter:
    """Queues encoded frames and writes everything queued in one event-loop turn with one call.

    With many calls in flight this turns dozens of small ``send`` system calls into one.
    """

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self.loop = self._loop
        self._pending: list[Buffer] = []
        self._scheduled = False
        self._writable = asyncio.Event()
        self._writable.set()
        self.closed = False
        # Set only by the test-only network fault seam (nyala.rpc.netfault): frames queue up
        # unwritten while held, as behind a cut link, and go out when released.
        self._held = False

    def send(self, pieces: list[Buffer]) -> None:
        """Queue one encoded frame (see ``nyala.rpc.framing.encode_*``)."""
        if self.closed:
            return
        self._pending += pieces
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    @property
    def writable(self) -> bool:
        """False while the transport's buffer is above its high-water mark."""
        return self._writable.is_set()

    async def wait_writable(self) -> None:
        await self._writable.wait()

    def pause(self) -> None:
        self._writable.clear()

    def resume(self) -> None:
        self._writable.set()

    def hold(self) -> None:
        """Keep queued frames unwritten until :meth:`release` (a cut link)."""
        self._held = True

    def release(self) -> None:
        """Write what was held, and write on as usual."""
        self._held = False
        if self._pending and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def abort(self) -> None:
        self.connection_lost()
        self._transport.abort()

    def connection_lost(self) -> None:
        self.closed = True
        self._pending.clear()
        self._writable.set()  # wake writers so they notice the connection is gone

    def _flush(self) -> None:
        self._scheduled = False
        if self.closed or self._held or not self._pending:
            return
        pieces, self._pending = self._pending, []
        if len(pieces) == 1:
            self._transport.write(pieces[0])
        else:
            self._transport.writelines(pieces)


class DeadlineTimer:
    """One event-loop timer serving many deadlines.

    ``arm(deadline)`` makes sure the timer fires no later than ``deadline``; it only touches
    the event loop when that deadline is earlier than the one already armed, which is rare
    when calls share a timeout.  On firing, ``expire(now)`` handles what has expired and
    returns the next deadline still pending (or None).  A timer per call would cost about
    5 us per call and side in Python (measured); this costs a comparison.
    """

    def __init__(self, expire: Callable[[float], float | None]) -> None:
        self._expire = expire
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        self._at = 0.0

    def arm(self, deadline: float) -> None:
        if self._handle is not None:
            if deadline >= self._at:
                return
            self._handle.cancel()
        self._at = deadline
        self._handle = self._loop.call_at(deadline, self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        following = self._expire(self._loop.time())
        if following is not None:
            self.arm(following)
