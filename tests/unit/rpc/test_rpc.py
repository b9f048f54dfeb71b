"""The RPC layer over real loopback sockets: calls, errors, deadlines, limits and failures."""

from __future__ import annotations

import asyncio
import hashlib
import random
import struct

import pytest

from nyala import errors
from nyala.proto import rpc_pb2
from nyala.rpc import PING, CallContext, Messenger, RpcMethod, RpcOptions, RpcServer
from nyala.rpc.framing import PREAMBLE, ResponseHeader, encode_request
from nyala.testing.wait import wait_for_async
from tests.unit.rpc.conftest import Runner, closed_by_peer, raw_connection, serving

Ping = rpc_pb2.PingRequest
Pong = rpc_pb2.PingResponse
ECHO = RpcMethod("TestService", "Echo", Ping, Pong)
SLOW = RpcMethod("TestService", "Slow", Ping, Pong)
FAIL = RpcMethod("TestService", "Fail", Ping, Pong)
WRONG = RpcMethod("TestService", "Wrong", Ping, Pong)
DEADLINE = RpcMethod("TestService", "Deadline", Ping, Pong)
BLOCK = RpcMethod("TestService", "Block", Ping, Pong)


async def echo(request: Ping, ctx: CallContext) -> Pong:
    """Echo the payload and every request sidecar, reversed in order."""
    for sidecar in reversed(ctx.request_sidecars):
        ctx.add_sidecar(bytes(sidecar))
    return Pong(payload=request.payload)


async def slow_echo(request: Ping, ctx: CallContext) -> Pong:
    await asyncio.sleep(int(request.payload or b"0") / 1000)
    return Pong(payload=request.payload)


def test_round_trip_returns_the_response_and_its_sidecars(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()
        server.add_method(ECHO, echo)
        async with serving(server) as (_, address, messenger):
            response, sidecars = await messenger.call_with_sidecars(
                address, ECHO, Ping(payload=b"hello"), sidecars=[b"one", b"", b"three"]
            )
            assert response.payload == b"hello"
            assert [bytes(s) for s in sidecars] == [b"three", b"", b"one"]
            assert (await messenger.call(str(address), PING, Ping(payload=b"p"))).payload == b"p"

    run(main())


def test_large_sidecars_arrive_intact(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()
        server.add_method(ECHO, echo)
        rng = random.Random(7)
        blobs = [rng.randbytes(5 * 1024 * 1024), rng.randbytes(300_000), rng.randbytes(10)]
        async with serving(server) as (_, address, messenger):
            _, sidecars = await messenger.call_with_sidecars(address, ECHO, Ping(), sidecars=blobs, timeout=60)
            received = [hashlib.sha256(s).hexdigest() for s in reversed(sidecars)]
            assert received == [hashlib.sha256(b).hexdigest() for b in blobs]

    run(main())


def test_many_concurrent_calls_share_one_connection_and_get_their_own_answers(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()
        server.add_method(SLOW, slow_echo)
        rng = random.Random(3)
        delays = [rng.randrange(0, 30) for _ in range(2000)]
        async with serving(server) as (_, address, messenger):
            calls = [messenger.call(address, SLOW, Ping(payload=str(d).encode() + b"")) for d in delays]
            # The payload names the delay, so answers complete out of order; each must match its call.
            answers = await asyncio.gather(*calls)
            assert [a.payload for a in answers] == [str(d).encode() for d in delays]
            assert len(server._connections) == 1

    run(main())


def test_unknown_method_is_not_found(run: Runner) -> None:
    async def main() -> None:
        async with serving() as (_, address, messenger):
            with pytest.raises(errors.NotFound, match=r"no method 'TestService\.Echo'"):
                await messenger.call(address, ECHO, Ping())

    run(main())


def test_handler_exception_becomes_an_internal_error_with_its_message(run: Runner) -> None:
    async def fail(request: Ping, ctx: CallContext) -> Pong:
        raise ZeroDivisionError("division by zero in the handler")

    async def main() -> None:
        server = RpcServer()
        server.add_method(FAIL, fail)
        async with serving(server) as (_, address, messenger):
            with pytest.raises(errors.InternalError, match="ZeroDivisionError: division by zero in the handler"):
                await messenger.call(address, FAIL, Ping())
            assert (await messenger.call(address, PING, Ping(payload=b"still up"))).payload == b"still up"

    run(main())


@pytest.mark.parametrize(
    "error",
    [
        errors.InvalidArgument("column 'x' has the wrong type"),
        errors.AlreadyPresent("key exists"),
        errors.ServiceUnavailable("bootstrapping"),
        errors.NotTheLeader("not the leader", leader_hint="ts-3"),
        errors.Corruption("bad crc at offset 12"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_nyala_errors_keep_their_class_message_and_hint(run: Runner, error: errors.NyalaError) -> None:
    def fail(request: Ping, ctx: CallContext) -> Pong:  # an inline handler raises the same way
        raise error

    async def main() -> None:
        server = RpcServer()
        server.add_method(FAIL, fail)
        async with serving(server) as (_, address, messenger):
            with pytest.raises(type(error), match=str(error)) as caught:
                await messenger.call(address, FAIL, Ping())
            if isinstance(error, errors.NotTheLeader):
                assert isinstance(caught.value, errors.NotTheLeader)
                assert caught.value.leader_hint == "ts-3"

    run(main())


def test_handler_returning_the_wrong_message_type_is_an_internal_error(run: Runner) -> None:
    async def wrong(request: Ping, ctx: CallContext) -> Pong:
        return Ping()  # type: ignore[return-value]

    async def main() -> None:
        server = RpcServer()
        server.add_method(WRONG, wrong)
        async with serving(server) as (_, address, messenger):
            with pytest.raises(errors.InternalError, match="returned PingRequest, expected PingResponse"):
                await messenger.call(address, WRONG, Ping())

    run(main())


def test_the_server_cancels_a_handler_at_the_callers_deadline(run: Runner) -> None:
    async def main() -> None:
        cancelled = asyncio.Event()

        async def block(request: Ping, ctx: CallContext) -> Pong:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return Pong()

        server = RpcServer()
        server.add_method(BLOCK, block)
        async with serving(server) as (_, address, messenger):
            await messenger.call(address, PING, Ping())  # connected: the deadline below is the call's alone
            # Both sides hold the same deadline; whichever notices first answers TimedOut.
            with pytest.raises(errors.TimedOut):
                await messenger.call(address, BLOCK, Ping(), timeout=0.2)
            async with asyncio.timeout(10):
                await cancelled.wait()  # the server saw the same deadline and stopped working
            # Its task ends right after the handler.
            await wait_for_async(lambda: server.calls_in_flight == 0, what="no call in flight on the server")

    run(main())


def test_the_client_gives_up_at_its_deadline_when_the_server_never_answers(run: Runner) -> None:
    async def main() -> None:
        received = asyncio.Event()

        class BlackHole(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                received.set()  # reads the call and never answers

        loop = asyncio.get_running_loop()
        hole = await loop.create_server(BlackHole, "127.0.0.1", 0)
        address = hole.sockets[0].getsockname()
        messenger = Messenger()
        try:
            with pytest.raises(errors.TimedOut, match=r"TestService\.Block to .* timed out waiting for a response"):
                # Long enough to connect on a loaded machine: connecting late fails with another message.
                await messenger.call(f"{address[0]}:{address[1]}", BLOCK, Ping(), timeout=1.0)
            assert received.is_set()
        finally:
            await messenger.close()
            hole.close()
            await hole.wait_closed()

    run(main())


def test_server_answers_timed_out_when_its_handler_overruns_the_deadline(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()

        async def block(request: Ping, ctx: CallContext) -> Pong:
            await asyncio.sleep(3600)
            return Pong()

        server.add_method(BLOCK, block)
        async with serving(server) as (_, address, _messenger):
            reader, writer = await raw_connection(address)
            try:
                # A raw caller that does not enforce its own deadline: only the server's applies.
                request = encode_request(5, BLOCK.wire_name, 150, Ping().SerializeToString(), [], 1 << 20)
                writer.write(PREAMBLE + b"".join(bytes(p) for p in request))
                async with asyncio.timeout(10):
                    frame_len, header_len = struct.unpack("!II", await reader.readexactly(8))
                    frame = memoryview(await reader.readexactly(frame_len))
                from nyala.rpc.framing import _parse_response

                header, _ = _parse_response(frame, header_len)
                assert isinstance(header, ResponseHeader)
                assert header.call_id == 5
                assert header.code == rpc_pb2.TIMED_OUT
                assert "TestService.Block did not finish before its deadline" in header.message
            finally:
                writer.close()

    run(main())


def test_handler_sees_the_callers_deadline(run: Runner) -> None:
    async def remaining(request: Ping, ctx: CallContext) -> Pong:
        left = ctx.remaining()
        return Pong(payload=str(left).encode())

    async def main() -> None:
        server = RpcServer()
        server.add_method(DEADLINE, remaining)
        async with serving(server) as (_, address, messenger):
            left = float((await messenger.call(address, DEADLINE, Ping(), timeout=5.0)).payload)
            assert 0 < left <= 5.0

    run(main())


def test_a_request_bigger_than_the_frame_limit_is_refused_before_sending(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()
        server.add_method(ECHO, echo)
        async with serving(server, RpcOptions(max_frame_bytes=64 * 1024)) as (_, address, messenger):
            with pytest.raises(errors.InvalidArgument, match="exceeds the maximum frame size of 65536"):
                await messenger.call(address, ECHO, Ping(), sidecars=[b"x" * 70_000])
            assert (await messenger.call(address, ECHO, Ping(payload=b"ok"))).payload == b"ok"

    run(main())


def test_an_oversized_frame_closes_only_that_connection(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer(RpcOptions(max_frame_bytes=1 << 20))
        async with serving(server) as (_, address, messenger):
            reader, writer = await raw_connection(address)
            try:
                # Only the 8-byte prefix is sent: the server must refuse without waiting for 2 GiB.
                writer.write(PREAMBLE + struct.pack("!II", 2**31, 10))
                assert await closed_by_peer(reader)
            finally:
                writer.close()
            assert (await messenger.call(address, PING, Ping(payload=b"alive"))).payload == b"alive"

    run(main())


def test_garbage_bytes_on_the_port_do_not_hurt_the_server(run: Runner) -> None:
    async def main() -> None:
        rng = random.Random(11)
        async with serving() as (server, address, messenger):
            for i in range(40):
                reader, writer = await raw_connection(address)
                try:
                    junk = rng.randbytes(rng.randrange(1, 5000))
                    writer.write(PREAMBLE + junk if i % 2 else junk)
                    await writer.drain()
                    writer.write_eof()
                    await closed_by_peer(reader, within_s=5)
                finally:
                    writer.close()
            assert (await messenger.call(address, PING, Ping(payload=b"fine"))).payload == b"fine"
            assert len(server._connections) == 1  # only the messenger's connection remains

    run(main())


def test_a_malformed_request_body_is_an_invalid_argument(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()
        server.add_method(ECHO, echo)
        async with serving(server) as (_, address, _messenger):
            reader, writer = await raw_connection(address)
            try:
                request = encode_request(9, ECHO.wire_name, 1000, b"\xff\xff\xff\xff", [], 1 << 20)
                writer.write(PREAMBLE + b"".join(bytes(p) for p in request))
                async with asyncio.timeout(10):
                    frame_len, header_len = struct.unpack("!II", await reader.readexactly(8))
                    frame = memoryview(await reader.readexactly(frame_len))
                from nyala.rpc.framing import _parse_response

                header, _ = _parse_response(frame, header_len)
                assert header.code == rpc_pb2.INVALID_ARGUMENT
                assert "request body of TestService.Echo does not parse" in header.message
            finally:
                writer.close()

    run(main())


def test_a_dropped_connection_fails_calls_in_flight_promptly(run: Runner) -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def block(request: Ping, ctx: CallContext) -> Pong:
            started.set()
            await asyncio.sleep(3600)
            return Pong()

        server = RpcServer()
        server.add_method(BLOCK, block)
        async with serving(server) as (_, address, messenger):
            call = asyncio.ensure_future(messenger.call(address, BLOCK, Ping(), timeout=600))
            await started.wait()
            await server.stop()
            with pytest.raises(errors.NetworkError, match="was lost"):
                async with asyncio.timeout(10):  # far below the call's own 600 s deadline
                    await call

    run(main())


def test_calls_reconnect_after_the_server_comes_back(run: Runner) -> None:
    async def main() -> None:
        first = RpcServer()
        async with serving(first) as (_, address, messenger):
            assert (await messenger.call(address, PING, Ping(payload=b"1"))).payload == b"1"
            await first.stop()
            second = RpcServer()
            await second.start(address)
            try:
                # Retrying while the messenger backs off from the lost connection, as a client would.
                response = await wait_for_async(
                    lambda: messenger.call(address, PING, Ping(payload=b"2")),
                    what="a call to the restarted server",
                    timeout_s=20,
                    retry_on=(errors.NetworkError,),
                )
                assert response.payload == b"2"
            finally:
                await second.stop()

    run(main())


def test_an_unreachable_peer_fails_fast_while_backing_off(run: Runner) -> None:
    async def main() -> None:
        server = RpcServer()
        address = await server.start("127.0.0.1:0")
        await server.stop()  # nothing listens on this port now
        async with serving() as (_, _other, messenger):
            with pytest.raises(errors.NetworkError, match=r"cannot connect to 127\.0\.0\.1"):
                await messenger.call(address, PING, Ping())
            with pytest.raises(errors.NetworkError, match="next connection attempt in"):
                await messenger.call(address, PING, Ping())

    run(main())


def test_a_busy_server_answers_service_unavailable(run: Runner) -> None:
    async def main() -> None:
        release = asyncio.Event()

        async def block(request: Ping, ctx: CallContext) -> Pong:
            await release.wait()
            return Pong(payload=b"done")

        server = RpcServer(RpcOptions(max_concurrent_calls=2))
        server.add_method(BLOCK, block)
        async with serving(server) as (_, address, messenger):
            running = [asyncio.ensure_future(messenger.call(address, BLOCK, Ping())) for _ in range(2)]
            await wait_for_async(lambda: server.calls_in_flight == 2, what="two calls in flight on the server")
            with pytest.raises(errors.ServiceUnavailable, match="server is busy"):
                await messenger.call(address, BLOCK, Ping())
            release.set()
            assert [r.payload for r in await asyncio.gather(*running)] == [b"done", b"done"]

    run(main())


def test_a_cancelled_call_leaves_the_connection_usable(run: Runner) -> None:
    async def main() -> None:
        started = asyncio.Event()
        release = asyncio.Event()

        async def held(request: Ping, ctx: CallContext) -> Pong:
            started.set()
            await release.wait()
            return Pong(payload=b"late")

        server = RpcServer()
        server.add_method(BLOCK, held)
        server.add_method(ECHO, echo)
        async with serving(server) as (_, address, messenger):
            call = asyncio.ensure_future(messenger.call(address, BLOCK, Ping()))
            await started.wait()  # the server is working on it
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # While the cancelled call is still being worked on, another call goes through.
            assert (await messenger.call(address, ECHO, Ping(payload=b"1"))).payload == b"1"
            # Now the late answer goes out; once the server is done with it, it is ahead of the
            # next answer on the one connection, so the client reads it first and must drop it.
            release.set()
            await wait_for_async(lambda: server.calls_in_flight == 0, what="the late answer sent")
            assert (await messenger.call(address, PING, Ping(payload=b"x"))).payload == b"x"
            assert len(server._connections) == 1  # the same connection throughout

    run(main())


def test_a_closed_messenger_refuses_calls(run: Runner) -> None:
    async def main() -> None:
        async with serving() as (_, address, messenger):
            await messenger.close()
            with pytest.raises(errors.NetworkError, match="messenger is closed"):
                await messenger.call(address, PING, Ping())

    run(main())


def test_registering_a_method_twice_is_refused() -> None:
    server = RpcServer()
    with pytest.raises(ValueError, match="registered twice"):
        server.add_method(PING, echo)


def test_method_names_are_validated() -> None:
    with pytest.raises(ValueError, match="without dots"):
        RpcMethod("Bad.Service", "M", Ping, Pong)
