"""The caller's side: a :class:`Messenger` keeps one multiplexed connection per peer.

A call is sent on the peer's connection (made on first use), registered under a fresh call
id, and completed by the response with that id, by its deadline (a timer, no extra task),
or by the connection dropping, whichever comes first.  So a dead peer fails every call in
flight promptly with ``NetworkError`` rather than leaving them to time out.

Reconnection: after a failed attempt, calls to that peer fail immediately with
``NetworkError`` for a backoff period that doubles with each consecutive failure (up to
``reconnect_backoff_max_s``); the first call after the period tries again.  Retrying
elsewhere or later is the caller's decision (the client library does it within its own
deadline), which keeps this layer free of policy.

A messenger given ``faults`` (a test kit's server; see :mod:`nyala.rpc.netfault`) stalls its
connections to the addresses those faults cut, as a cut network would.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from nyala.common.hostport import HostPort, parse_address
from nyala.errors import InvalidArgument, NetworkError, TimedOut
from nyala.proto import rpc_pb2
from nyala.rpc.framing import PREAMBLE, Buffer, Frame, FrameDecoder, FrameError, ResponseHeader, encode_request
from nyala.rpc.method import RequestT, ResponseT, RpcMethod
from nyala.rpc.netfault import NetworkFaults
from nyala.rpc.options import RpcOptions
from nyala.rpc.status import status_to_error
from nyala.rpc.transport import DeadlineTimer, FrameWriter

__all__ = ["Messenger"]

log = logging.getLogger("nyala.rpc")

_ResponseFuture = asyncio.Future[Frame[ResponseHeader]]


class Messenger:
    """Makes RPC calls to any number of peers; safe to share among all tasks of one event loop."""

    def __init__(
        self,
        options: RpcOptions | None = None,
        ssl_context: ssl.SSLContext | None = None,
        *,
        rng: random.Random | None = None,
        faults: NetworkFaults | None = None,
    ) -> None:
        """``faults`` is for tests only: the network cuts this messenger obeys."""
        self.options = options or RpcOptions()
        self.faults = faults
        self._ssl = ssl_context
        self._peers: dict[HostPort, _Peer] = {}
        # Addresses as callers spell them (str or HostPort), so the hot path parses nothing.
        self._peers_by_key: dict[str | HostPort, _Peer] = {}
        self._call_ids = itertools.count(1)
        self._rng = rng or random.Random()
        self._closed = False

    def open_connections(self) -> int:
        """Connections to peers that are open now (the RPC metrics' outbound gauge)."""
        return sum(1 for peer in self._peers.values() if peer.live_connection is not None)

    async def call(
        self,
        address: str | HostPort,
        method: RpcMethod[RequestT, ResponseT],
        request: RequestT,
        *,
        timeout: float | None = None,
        sidecars: Sequence[Buffer] = (),
    ) -> ResponseT:
        """Call ``method`` on the server at ``address`` and return its response.

        Raises the ``nyala.errors`` class of a non-OK status, ``TimedOut`` when ``timeout``
        seconds (default ``options.default_timeout_s``) pass first, or ``NetworkError``.
        """
        response, _ = await self.call_with_sidecars(address, method, request, timeout=timeout, sidecars=sidecars)
        return response

    async def call_with_sidecars(
        self,
        address: str | HostPort,
        method: RpcMethod[RequestT, ResponseT],
        request: RequestT,
        *,
        timeout: float | None = None,
        sidecars: Sequence[Buffer] = (),
    ) -> tuple[ResponseT, list[memoryview]]:
        """Like :meth:`call`, also returning the response's sidecars (views of received bytes)."""
        if self._closed:
            raise NetworkError("the messenger is closed")
        loop = asyncio.get_running_loop()
        budget = self.options.default_timeout_s if timeout is None else timeout
        if budget <= 0:
            raise TimedOut(f"{method.full_name} to {address}: deadline already passed")
        deadline = loop.time() + budget
        peer = self._peers_by_key.get(address) or self._peer(address)
        conn = peer.live_connection or await peer.connection(deadline)
        if not conn.writable:
            await conn.wait_writable()
        call_id = next(self._call_ids)
        future = conn.start_call(call_id, method, request, sidecars, deadline)
        try:
            frame = await future
        except asyncio.CancelledError:
            conn.forget(call_id)  # a late response will be dropped
            raise
        header = frame.header
        if header.code != rpc_pb2.OK:
            raise status_to_error(header.code, header.message, header.leader_hint)
        response = method.response_type()
        response.ParseFromString(frame.body)  # type: ignore[arg-type]  # upb takes any buffer
        return response, frame.sidecars

    async def close(self) -> None:
        """Close every connection; calls in flight fail with ``NetworkError``."""
        self._closed = True
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
        self._peers_by_key.clear()
        await asyncio.sleep(0)  # let transports run their connection_lost callbacks

    def drop_connection(self, address: str | HostPort) -> None:
        """Close the connection to one peer (its calls fail); the next call reconnects."""
        peer = self._peers.get(parse_address(address))
        if peer is not None:
            peer.close()

    def _peer(self, address: str | HostPort) -> _Peer:
        parsed = parse_address(address)
        peer = self._peers.get(parsed)
        if peer is None:
            peer = self._peers[parsed] = _Peer(parsed, self)
        self._peers_by_key[address] = peer
        return peer


@dataclass
class _Backoff:
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""


class _Peer:
    """Connection state for one address: the live connection, an attempt in progress, or backoff."""

    def __init__(self, address: HostPort, messenger: Messenger) -> None:
        self.address = address
        self._messenger = messenger
        self._conn: _ClientConnection | None = None
        self._connecting: asyncio.Future[_ClientConnection] | None = None
        self._backoff = _Backoff()

    @property
    def live_connection(self) -> _ClientConnection | None:
        conn = self._conn
        return conn if conn is not None and not conn.closed else None

    async def connection(self, deadline: float) -> _ClientConnection:
        if self.live_connection is not None:
            return self.live_connection
        loop = asyncio.get_running_loop()
        if self._connecting is None:
            now = loop.time()
            if now < self._backoff.retry_at:
                raise NetworkError(
                    f"{self.address} is unreachable ({self._backoff.last_error}); "
                    f"next connection attempt in {self._backoff.retry_at - now:.2f} s"
                )
            self._connecting = loop.create_task(self._connect())
            # Callers may give up first; the outcome is still consumed so it is never "unretrieved".
            self._connecting.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.shield(self._connecting)
        except TimeoutError as exc:
            raise TimedOut(f"connecting to {self.address} did not finish before the call's deadline") from exc

    async def _connect(self) -> _ClientConnection:
        messenger = self._messenger
        options = messenger.options
        loop = asyncio.get_running_loop()
        faults = messenger.faults
        try:
            async with asyncio.timeout(options.connect_timeout_s):
                if faults is not None and faults.is_cut(self.address):
                    await faults.wait_reachable(self.address)  # SYNs unanswered until the cut heals
                _, conn = await loop.create_connection(
                    lambda: _ClientConnection(self.address, options, faults),
                    self.address.host,
                    self.address.port,
                    ssl=messenger._ssl,
                    server_hostname=self.address.host if messenger._ssl is not None else None,
                )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            self._record_failure(loop.time(), exc)
            raise NetworkError(f"cannot connect to {self.address}: {exc or type(exc).__name__}") from exc
        finally:
            self._connecting = None
        self._backoff = _Backoff()
        self._conn = conn
        return conn

    def _record_failure(self, now: float, exc: BaseException) -> None:
        options = self._messenger.options
        backoff = self._backoff
        backoff.failures += 1
        delay = min(options.reconnect_backoff_max_s, options.reconnect_backoff_initial_s * 2 ** (backoff.failures - 1))
        backoff.retry_at = now + delay * self._messenger._rng.uniform(0.8, 1.2)
        backoff.last_error = str(exc) or type(exc).__name__

    def close(self) -> None:
        if self._conn is not None:
            self._conn.abort("closed by the caller", logging.DEBUG)
            self._conn = None


class _ClientConnection(asyncio.BufferedProtocol):
    """One TCP (or TLS) connection carrying many concurrent calls to one server."""

    def __init__(self, address: HostPort, options: RpcOptions, faults: NetworkFaults | None = None) -> None:
        self._address = address
        self._faults = faults
        self._transport: asyncio.Transport | None = None
        self._cut = False
        self._max_frame_bytes = options.max_frame_bytes
        self._decoder = FrameDecoder(
            ResponseHeader,
            options.max_frame_bytes,
            expect_preamble=False,
            buffer_bytes=options.read_buffer_bytes,
        )
        self._writer: FrameWriter | None = None
        self._deadlines: DeadlineTimer | None = None
        self._pending: dict[int, tuple[_ResponseFuture, float, str]] = {}
        self.closed = False

    @property
    def writable(self) -> bool:
        return self._writer is None or self._writer.writable

    async def wait_writable(self) -> None:
        if self._writer is not None:
            await self._writer.wait_writable()

    def start_call(
        self,
        call_id: int,
        method: RpcMethod[RequestT, ResponseT],
        request: RequestT,
        sidecars: Sequence[Buffer],
        deadline: float,
    ) -> _ResponseFuture:
        """Send one request; the returned future gets its response frame or its error."""
        writer, deadlines = self._writer, self._deadlines
        assert writer is not None, "call before connection_made"
        assert deadlines is not None
        if self.closed:
            raise NetworkError(f"connection to {self._address} was lost")
        loop = asyncio.get_running_loop()
        remaining_ms = int((deadline - loop.time()) * 1000)
        if remaining_ms <= 0:
            raise TimedOut(f"{method.full_name} to {self._address}: deadline passed before sending")
        try:
            pieces = encode_request(
                call_id, method.wire_name, remaining_ms, request.SerializeToString(), sidecars, self._max_frame_bytes
            )
        except ValueError as exc:
            raise InvalidArgument(f"{method.full_name} request: {exc}") from exc
        future: _ResponseFuture = loop.create_future()
        self._pending[call_id] = (future, deadline, method.full_name)
        deadlines.arm(deadline)
        writer.send(pieces)
        return future

    def forget(self, call_id: int) -> None:
        self._pending.pop(call_id, None)

    def _expire(self, now: float) -> float | None:
        """Fail the calls whose deadline has passed; return the next deadline."""
        following: float | None = None
        expired = []
        for call_id, (future, deadline, name) in self._pending.items():
            if deadline <= now:
                expired.append(call_id)
                if not future.done():
                    future.set_exception(TimedOut(f"{name} to {self._address} timed out waiting for a response"))
            elif following is None or deadline < following:
                following = deadline
        for call_id in expired:
            del self._pending[call_id]
        return following

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._writer = FrameWriter(transport)
        self._deadlines = DeadlineTimer(self._expire)
        transport.write(PREAMBLE)
        if self._faults is not None:
            self._faults.register(self)

    # -- the test-only network fault seam (nyala.rpc.netfault) ------------------------------

    @property
    def peer_address(self) -> HostPort:
        return self._address

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._writer is not None, "loop before connection_made"
        return self._writer.loop

    def set_cut(self, cut: bool) -> None:
        """Stall the connection in both directions (nothing written or read), or resume it."""
        if cut == self._cut or self.closed:
            return
        assert self._transport is not None
        assert self._writer is not None
        self._cut = cut
        if cut:
            self._writer.hold()
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()
            self._writer.release()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._faults is not None:
            self._faults.forget(self)
        if self._writer is not None:
            self._writer.connection_lost()
        if self._deadlines is not None:
            self._deadlines.cancel()
        reason = f"connection to {self._address} was lost" + (f": {exc}" if exc else "")
        pending, self._pending = self._pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(NetworkError(reason))

    def pause_writing(self) -> None:
        if self._writer is not None:
            self._writer.pause()

    def resume_writing(self) -> None:
        if self._writer is not None:
            self._writer.resume()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._decoder.buffer_updated(nbytes)
        except FrameError as exc:
            self.abort(f"invalid response from server: {exc}")
            return
        pending = self._pending
        for frame in frames:
            entry = pending.pop(frame.header.call_id, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(frame)
            # else: the call timed out or was cancelled; the late answer is dropped

    def abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Close the connection at once; protocol violations log at WARNING, routine closes at DEBUG."""
        if not self.closed:
            log.log(level, "closing RPC connection to %s: %s", self._address, reason)
        if self._writer is not None:
            self._writer.abort()
