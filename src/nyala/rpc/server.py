"""The RPC server: accepts connections, dispatches calls to handlers, enforces deadlines.

A handler takes the decoded request and a :class:`CallContext` (deadline, request sidecars,
a place for response sidecars) and returns the response message or raises.  A
``NyalaError`` becomes its status code; any other exception becomes INTERNAL with its type
and message, and is logged with its traceback, since it is a bug.

Two kinds of handler:

- a plain function runs inline, as soon as its frame is decoded, with no task (health
  checks, heartbeats, cached look-ups: most of a busy server's calls).  It must not block;
- a coroutine function runs as its own asyncio task under the caller's deadline: when the
  deadline passes, the task is cancelled and the caller gets TIMED_OUT.

Every call is counted in the server's :class:`~nyala.rpc.metrics.RpcMetrics` (calls, errors
by status code, latency and queue time per method, bytes), and the task handlers running
now are listed by :meth:`RpcServer.in_flight` (the web server's ``/rpcz``).

A connection that sends something that is not a valid frame is closed with a logged
reason; no other connection notices.  Responses produced in one event-loop turn leave in
one write.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from google.protobuf.message import DecodeError, Message

from nyala.common.hostport import HostPort, parse_address
from nyala.errors import InvalidArgument, NotFound, ServiceUnavailable
from nyala.proto import rpc_pb2
from nyala.rpc.framing import Frame, FrameDecoder, FrameError, RequestHeader, Sidecar, encode_response
from nyala.rpc.method import PING, RequestT, ResponseT, RpcMethod
from nyala.rpc.metrics import UNKNOWN_METHOD, MethodMetrics, RpcMetrics
from nyala.rpc.options import RpcOptions
from nyala.rpc.status import error_to_status
from nyala.rpc.transport import DeadlineTimer, FrameWriter

__all__ = ["AsyncHandler", "CallContext", "InlineHandler", "RpcServer"]

log = logging.getLogger("nyala.rpc")


@dataclass(slots=True)
class CallContext:
    """What a handler knows about its call besides the request message."""

    method: str
    peer: str
    #: Event-loop time (``loop.time()``) by which the caller wants an answer, or None.
    deadline: float | None
    request_sidecars: list[memoryview]
    response_sidecars: list[Sidecar] = field(default_factory=list)
    #: ``time.perf_counter()`` when the request arrived (latency, queue time, ``/rpcz``).
    started: float = 0.0

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never negative), or None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def add_sidecar(self, data: Sidecar) -> int:
        """Attach raw bytes to the response (or pieces that make up one sidecar); returns its index."""
        self.response_sidecars.append(data)
        return len(self.response_sidecars) - 1


InlineHandler = Callable[[RequestT, CallContext], ResponseT]
AsyncHandler = Callable[[RequestT, CallContext], Awaitable[ResponseT]]


@dataclass(frozen=True, slots=True)
class _Registration:
    method: RpcMethod[Any, Any]
    handler: Callable[[Any, CallContext], Any]
    inline: bool
    metrics: MethodMetrics


class RpcServer:
    """Serves registered methods on one listening address."""

    def __init__(
        self,
        options: RpcOptions | None = None,
        ssl_context: ssl.SSLContext | None = None,
        metrics: RpcMetrics | None = None,
    ) -> None:
        """``metrics``: where calls are counted (a server's registry); by default nowhere exported."""
        self.options = options or RpcOptions()
        self._ssl = ssl_context
        self._methods: dict[bytes, _Registration] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[_ServerConnection] = set()
        self.metrics = metrics or RpcMetrics()
        self.metrics.watch_connections(lambda: len(self._connections))
        self._unknown = self.metrics.method(UNKNOWN_METHOD)
        #: Coroutine handlers currently running, across all connections.
        self.calls_in_flight = 0
        self.add_method(PING, _ping)

    def add_method(
        self,
        method: RpcMethod[RequestT, ResponseT],
        handler: AsyncHandler[RequestT, ResponseT] | InlineHandler[RequestT, ResponseT],
    ) -> None:
        """Serve ``method`` with ``handler``: a coroutine function, or a plain function run inline."""
        key = method.full_name.encode()
        if key in self._methods:
            raise ValueError(f"method {method.full_name} is registered twice")
        inline = not inspect.iscoroutinefunction(handler)
        self._methods[key] = _Registration(method, handler, inline, self.metrics.method(method.full_name))

    async def start(self, address: str | HostPort = "127.0.0.1:0") -> HostPort:
        """Listen on ``address`` (port 0 picks a free port) and return the bound address."""
        host, port = parse_address(address)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ServerConnection(self), host, port, ssl=self._ssl, reuse_address=True
        )
        return self.address

    @property
    def address(self) -> HostPort:
        if self._server is None:
            raise RuntimeError("server is not started")
        bound = self._server.sockets[0].getsockname()
        return HostPort(bound[0], bound[1])

    async def stop(self) -> None:
        """Stop listening, close every connection and cancel the calls still running."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.abort("server shutting down", logging.DEBUG)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def in_flight(self) -> list[CallContext]:
        """The calls whose (task) handlers are running now, oldest first."""
        calls = [ctx for conn in self._connections for ctx in conn._running.values()]
        return sorted(calls, key=lambda ctx: ctx.started)

    def _lookup(self, method: bytes) -> _Registration:
        registration = self._methods.get(method)
        if registration is None:
            name = method.decode(errors="replace")
            raise NotFound(f"no method {name!r} on this server")
        return registration


def _ping(request: rpc_pb2.PingRequest, ctx: CallContext) -> rpc_pb2.PingResponse:
    return rpc_pb2.PingResponse(payload=request.payload)


class _ServerConnection(asyncio.BufferedProtocol):
    def __init__(self, server: RpcServer) -> None:
        self._server = server
        self._max_frame_bytes = server.options.max_frame_bytes
        self._metrics = server.metrics
        self._decoder = FrameDecoder(
            RequestHeader,
            server.options.max_frame_bytes,
            expect_preamble=True,
            buffer_bytes=server.options.read_buffer_bytes,
        )
        self._writer: FrameWriter | None = None
        self._deadlines: DeadlineTimer | None = None
        self._running: dict[asyncio.Task[None], CallContext] = {}
        self._expired: set[asyncio.Task[None]] = set()
        self._peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._writer = FrameWriter(transport)
        self._deadlines = DeadlineTimer(self._expire)
        self._server._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server._connections.discard(self)
        if self._writer is not None:
            self._writer.connection_lost()
        if self._deadlines is not None:
            self._deadlines.cancel()
        for task in self._running:
            task.cancel()

    def pause_writing(self) -> None:
        if self._writer is not None:
            self._writer.pause()

    def resume_writing(self) -> None:
        if self._writer is not None:
            self._writer.resume()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._metrics.received(nbytes)
        try:
            frames = self._decoder.buffer_updated(nbytes)
        except FrameError as exc:
            self.abort(str(exc))
            return
        for frame in frames:
            self._start_call(frame)

    def abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Close the connection at once; protocol violations log at WARNING, routine closes at DEBUG."""
        log.log(level, "closing RPC connection from %s: %s", self._peer, reason)
        if self._writer is not None:
            self._writer.abort()

    def _start_call(self, frame: Frame[RequestHeader]) -> None:
        """Validate a request and run or start its handler; a bad request is answered at once."""
        header = frame.header
        started = time.perf_counter()
        stats = self._server._unknown
        try:
            registration = self._server._lookup(header.method)
            stats = registration.metrics
            stats.calls.value += 1
            request: Message = registration.method.request_type()
            try:
                request.ParseFromString(frame.body)  # type: ignore[arg-type]  # upb takes any buffer
            except DecodeError as exc:
                raise InvalidArgument(f"request body of {registration.method.full_name} does not parse: {exc}") from exc
            ctx = CallContext(registration.method.full_name, self._peer, None, frame.sidecars, started=started)
            if registration.inline:
                response = registration.handler(request, ctx)
                self._respond_ok(header.call_id, registration, response, ctx)
                stats.latency.observe(time.perf_counter() - started)
                return
            self._start_task(header, registration, request, ctx)
        except Exception as exc:
            if stats is self._server._unknown:
                stats.calls.value += 1
            self._respond_error(header.call_id, exc, header.method, stats)
            stats.latency.observe(time.perf_counter() - started)

    def _start_task(
        self, header: RequestHeader, registration: _Registration, request: Message, ctx: CallContext
    ) -> None:
        server = self._server
        if server.calls_in_flight >= server.options.max_concurrent_calls:
            raise ServiceUnavailable(f"server is busy: {server.options.max_concurrent_calls} calls already running")
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._serve(header.call_id, registration, request, ctx))
        server.calls_in_flight += 1
        self._running[task] = ctx
        task.add_done_callback(self._task_done)
        if header.timeout_ms:
            ctx.deadline = loop.time() + header.timeout_ms / 1000
            assert self._deadlines is not None
            self._deadlines.arm(ctx.deadline)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        del self._running[task]
        self._expired.discard(task)
        self._server.calls_in_flight -= 1

    def _expire(self, now: float) -> float | None:
        """Cancel the running calls whose deadline has passed; return the next deadline."""
        following: float | None = None
        for task, ctx in self._running.items():
            if ctx.deadline is None:
                continue
            if ctx.deadline <= now:
                if not task.done() and task not in self._expired:
                    self._expired.add(task)
                    task.cancel()
            elif following is None or ctx.deadline < following:
                following = ctx.deadline
        return following

    async def _serve(self, call_id: int, registration: _Registration, request: Message, ctx: CallContext) -> None:
        stats = registration.metrics
        stats.queue.observe(time.perf_counter() - ctx.started)
        method = registration.method.full_name.encode()
        try:
            response = await registration.handler(request, ctx)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task not in self._expired:
                raise  # the connection is gone or the server is stopping: nobody to answer
            task.uncancel()
            self._metrics.error(stats.method, rpc_pb2.TIMED_OUT)
            self._respond(call_id, rpc_pb2.TIMED_OUT, f"{ctx.method} did not finish before its deadline", "")
        except Exception as exc:
            self._respond_error(call_id, exc, method, stats)
        else:
            try:
                self._respond_ok(call_id, registration, response, ctx)
            except Exception as exc:
                self._respond_error(call_id, exc, method, stats)
        stats.latency.observe(time.perf_counter() - ctx.started)

    def _respond_ok(self, call_id: int, registration: _Registration, response: Any, ctx: CallContext) -> None:
        expected = registration.method.response_type
        if not isinstance(response, expected):
            raise TypeError(f"handler of {ctx.method} returned {type(response).__name__}, expected {expected.__name__}")
        self._respond(call_id, rpc_pb2.OK, "", "", response.SerializeToString(), ctx.response_sidecars)

    def _respond_error(self, call_id: int, exc: Exception, method: bytes, stats: MethodMetrics) -> None:
        code, message, hint = error_to_status(exc)
        self._metrics.error(stats.method, code)
        if code == rpc_pb2.INTERNAL:
            log.error("handler of %s failed", method.decode(errors="replace"), exc_info=exc)
        self._respond(call_id, code, message, hint)

    def _respond(
        self, call_id: int, code: int, message: str, hint: str, body: bytes = b"", sidecars: list[Sidecar] | None = None
    ) -> None:
        writer = self._writer
        if writer is None or writer.closed:
            return
        try:
            pieces = encode_response(call_id, code, message, hint, body, sidecars or [], self._max_frame_bytes)
        except ValueError as exc:  # a response too big to send is the handler's bug
            log.error("response to call %d from %s: %s", call_id, self._peer, exc)
            pieces = encode_response(call_id, rpc_pb2.INTERNAL, str(exc), "", b"", [], self._max_frame_bytes)
        # The first piece starts with the frame's length, which counts everything after 8 bytes.
        self._metrics.sent(int.from_bytes(pieces[0][:4], "big") + 8)
        writer.send(pieces)
