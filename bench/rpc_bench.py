"""RPC throughput: Nyala's framing against grpc.aio doing the same work in the same run.

Each system gets a server in its own process (as in a real deployment, one core each side on
a 2-core machine) and a client running N workers that each make calls back to back:

- calls/s with 1, 16 and 64 calls in flight, 100-byte request and response payloads;
- MB/s fetching 1 MiB per call (a Nyala response sidecar; a grpc bytes field), 4 in flight.

Nyala's Ping handler is a plain function run inline (no task per call); the "async handler"
row serves the same echo from a coroutine, as grpc.aio always does, for a like-for-like figure.

Usage: ``python bench/rpc_bench.py [--seconds 3] [--no-grpc]``.  Figures are printed, never
asserted; the target is at least 10x grpc.aio's calls/s at 64 in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nyala.proto import rpc_pb2
from nyala.rpc import PING, CallContext, Messenger, RpcMethod, RpcServer
from nyala.rpc.loop import run

PAYLOAD = b"x" * 100
MIB = 1024 * 1024
FETCH = RpcMethod("BenchService", "Fetch", rpc_pb2.PingRequest, rpc_pb2.PingResponse)
# The same echo as PING, served by a coroutine handler (a task per call) instead of inline.
ASYNC_PING = RpcMethod("BenchService", "AsyncPing", rpc_pb2.PingRequest, rpc_pb2.PingResponse)
_BLOB = os.urandom(MIB)


@dataclass
class Result:
    calls_per_s: float
    mb_per_s: float
    client_cpu_us: float = 0.0  # CPU time per call in the client process
    server_cpu_us: float = 0.0  # CPU time per call in the server process


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(call: Callable[[], Awaitable[int]], in_flight: int, seconds: float, server_pid: int) -> Result:
    """Run ``in_flight`` workers calling back to back for ``seconds``; count calls, bytes and CPU."""
    stop_at = time.perf_counter() + seconds
    calls = 0
    received = 0

    async def worker() -> None:
        nonlocal calls, received
        while time.perf_counter() < stop_at:
            received += await call()
            calls += 1

    for _ in range(20):  # warm up connections and code paths
        await call()
    start = time.perf_counter()
    cpu_start, server_cpu_start = time.process_time(), process_cpu_seconds(server_pid)
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - start
    client_cpu = time.process_time() - cpu_start
    server_cpu = process_cpu_seconds(server_pid) - server_cpu_start
    return Result(calls / elapsed, received / elapsed / 1e6, client_cpu / calls * 1e6, server_cpu / calls * 1e6)


# --- servers (run in a child process) -------------------------------------------------


async def serve_nyala(port_pipe: int) -> None:
    server = RpcServer()

    async def fetch(request: rpc_pb2.PingRequest, ctx: CallContext) -> rpc_pb2.PingResponse:
        ctx.add_sidecar(_BLOB)
        return rpc_pb2.PingResponse()

    async def async_ping(request: rpc_pb2.PingRequest, ctx: CallContext) -> rpc_pb2.PingResponse:
        return rpc_pb2.PingResponse(payload=request.payload)

    server.add_method(FETCH, fetch)
    server.add_method(ASYNC_PING, async_ping)
    address = await server.start("127.0.0.1:0")
    os.write(port_pipe, f"{address.port}\n".encode())
    await asyncio.Event().wait()


async def serve_grpc(port_pipe: int) -> None:
    import grpc

    async def ping(request: bytes, context: object) -> bytes:
        return request

    async def fetch(request: bytes, context: object) -> bytes:
        return _BLOB

    def handler(fn: Callable[[bytes, object], Awaitable[bytes]]) -> object:
        return grpc.unary_unary_rpc_method_handler(fn)

    generic = grpc.method_handlers_generic_handler("Bench", {"Ping": handler(ping), "Fetch": handler(fetch)})
    options = [("grpc.max_send_message_length", 8 * MIB), ("grpc.max_receive_message_length", 8 * MIB)]
    server = grpc.aio.server(options=options)
    server.add_generic_rpc_handlers((generic,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    os.write(port_pipe, f"{port}\n".encode())
    await server.wait_for_termination()


# --- clients ----------------------------------------------------------------------------


async def bench_nyala(port: int, seconds: float, pid: int) -> dict[str, Result]:
    messenger = Messenger()
    address = f"127.0.0.1:{port}"
    request = rpc_pb2.PingRequest(payload=PAYLOAD)

    async def ping() -> int:
        response = await messenger.call(address, PING, request)
        return len(response.payload)

    async def fetch() -> int:
        _, sidecars = await messenger.call_with_sidecars(address, FETCH, rpc_pb2.PingRequest())
        return len(sidecars[0])

    async def async_ping() -> int:
        response = await messenger.call(address, ASYNC_PING, request)
        return len(response.payload)

    results = {f"calls/s, {n} in flight": await drive(ping, n, seconds, pid) for n in (1, 16, 64)}
    # grpc.aio runs every handler as a coroutine; this row compares like with like.
    results["calls/s, 64, async handler"] = await drive(async_ping, 64, seconds, pid)
    results["1 MiB fetch, 4 in flight"] = await drive(fetch, 4, seconds, pid)
    await messenger.close()
    return results


async def bench_grpc(port: int, seconds: float, pid: int) -> dict[str, Result]:
    import grpc

    options = [("grpc.max_receive_message_length", 8 * MIB)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        ping_stub = channel.unary_unary("/Bench/Ping")
        fetch_stub = channel.unary_unary("/Bench/Fetch")

        async def ping() -> int:
            return len(await ping_stub(PAYLOAD))

        async def fetch() -> int:
            return len(await fetch_stub(b""))

        results = {f"calls/s, {n} in flight": await drive(ping, n, seconds, pid) for n in (1, 16, 64)}
        results["calls/s, 64, async handler"] = results["calls/s, 64 in flight"]
        results["1 MiB fetch, 4 in flight"] = await drive(fetch, 4, seconds, pid)
    return results


def start_server(kind: str) -> tuple[subprocess.Popen[bytes], int]:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, "--pipe", str(write_fd)], pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        line = pipe.readline()
    if not line:
        proc.kill()
        raise RuntimeError(f"{kind} benchmark server did not start")
    return proc, int(line)


def measure(kind: str, seconds: float) -> dict[str, Result]:
    proc, port = start_server(kind)
    try:
        if kind == "nyala":
            return run(bench_nyala(port, seconds, proc.pid))
        return run(bench_grpc(port, seconds, proc.pid), use_uvloop=False)  # grpc.aio runs on the standard loop
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each measurement")
    parser.add_argument("--no-grpc", action="store_true", help="skip the grpc.aio reference")
    parser.add_argument("--serve", choices=["nyala", "grpc"], help=argparse.SUPPRESS)
    parser.add_argument("--pipe", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "nyala":
        run(serve_nyala(args.pipe))
        return
    if args.serve == "grpc":
        run(serve_grpc(args.pipe), use_uvloop=False)
        return
    nyala = measure("nyala", args.seconds)
    grpc_results = None if args.no_grpc else measure("grpc", args.seconds)
    print(f"\nRPC benchmark, {os.cpu_count()} cores, {args.seconds:.0f} s per figure, server in its own process")
    print(f"{'scenario':<28}{'nyala':>14}{'grpc.aio':>14}{'ratio':>9}   CPU us/call client+server (nyala | grpc)")
    for name, result in nyala.items():
        is_bytes = "MiB" in name
        value = result.mb_per_s if is_bytes else result.calls_per_s
        unit = " MB/s" if is_bytes else ""
        ref = grpc_results[name] if grpc_results else None
        ref_value = (ref.mb_per_s if is_bytes else ref.calls_per_s) if ref else None
        ref_text = f"{ref_value:>14,.0f}" if ref_value else f"{'-':>14}"
        ratio = f"{value / ref_value:>8.1f}x" if ref_value else f"{'-':>9}"
        cpu = f"{result.client_cpu_us:.0f}+{result.server_cpu_us:.0f}"
        ref_cpu = f"{ref.client_cpu_us:.0f}+{ref.server_cpu_us:.0f}" if ref else "-"
        print(f"{name + unit:<28}{value:>14,.0f}{ref_text}{ratio}   {cpu} | {ref_cpu}")


if __name__ == "__main__":
    main()
