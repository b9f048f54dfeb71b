"""The cost of moving a scan's bytes between two processes, with nothing else: the floor
under any scan that crosses a process boundary over loopback TCP.

A sender process (this file, run as a script) accepts ``streams`` connections on loopback and
answers each 8-byte request (a byte count) with that many bytes from one prebuilt buffer.  The
receiver (:func:`measure_loopback`, in the benchmark's process) asks for ``total_bytes`` in
``chunk_bytes`` pieces, one request at a time per stream as a scan's calls are, and receives
each piece into its own buffer from Arrow's memory pool, as Nyala's client does; it keeps every
piece until the end of a repeat, as a scan result is kept.  No Arrow decoding, no protobuf, no
storage: what remains is the kernel's copies, TCP, page faults and the system calls.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import cpu_of

_REQUEST = struct.Struct("!Q")


@dataclass
class LoopbackTiming:
    """Seconds of each repeat, with the CPU of each end over all repeats."""

    total_bytes: int
    seconds: list[float] = field(default_factory=list)
    receiver_cpu_s: float = 0.0
    sender_cpu_s: float = 0.0


def measure_loopback(total_bytes: int, chunk_bytes: int, streams: int, repeat: int) -> LoopbackTiming:
    """Move ``total_bytes`` from a sender process ``repeat`` times over ``streams`` connections."""
    timing = LoopbackTiming(total_bytes)
    sender = subprocess.Popen(
        [sys.executable, __file__, str(streams), str(chunk_bytes)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert sender.stdout is not None
        port = int(sender.stdout.readline())
        connections = [socket.create_connection(("127.0.0.1", port)) for _ in range(streams)]
        share = [total_bytes // streams + (i < total_bytes % streams) for i in range(streams)]
        _receive_all(connections, share, chunk_bytes)  # warm-up, off the clock
        cpu_start, sender_start = time.process_time(), cpu_of([sender.pid])
        for _ in range(repeat):
            start = time.perf_counter()
            _receive_all(connections, share, chunk_bytes)
            timing.seconds.append(time.perf_counter() - start)
        timing.receiver_cpu_s = time.process_time() - cpu_start
        timing.sender_cpu_s = cpu_of([sender.pid]) - sender_start
        for conn in connections:
            conn.close()
        sender.wait(timeout=30)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait()
    return timing


def _receive_all(connections: list[socket.socket], share: list[int], chunk_bytes: int) -> None:
    kept: list[list[pa.Buffer]] = [[] for _ in connections]
    threads = [
        threading.Thread(target=_receive, args=(conn, n, chunk_bytes, out))
        for conn, n, out in zip(connections, share, kept, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    received = sum(b.size for pieces in kept for b in pieces)
    if received != sum(share):
        raise RuntimeError(f"received {received:,} bytes, not {sum(share):,}")


def _receive(conn: socket.socket, total: int, chunk_bytes: int, out: list[pa.Buffer]) -> None:
    while total:
        size = min(chunk_bytes, total)
        conn.sendall(_REQUEST.pack(size))
        buffer = pa.allocate_buffer(size)
        view, filled = memoryview(buffer).cast("B"), 0
        while filled < size:
            got = conn.recv_into(view[filled:])
            if not got:
                raise RuntimeError("the sender closed the connection")
            filled += got
        out.append(buffer)
        total -= size


def _serve(streams: int, chunk_bytes: int) -> None:
    payload = bytes(range(256)) * (chunk_bytes // 256 + 1)
    with socket.create_server(("127.0.0.1", 0)) as server:
        print(server.getsockname()[1], flush=True)
        connections = [server.accept()[0] for _ in range(streams)]
    threads = [threading.Thread(target=_answer, args=(conn, memoryview(payload))) for conn in connections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _answer(conn: socket.socket, payload: memoryview) -> None:
    with conn:
        while request := conn.recv(_REQUEST.size, socket.MSG_WAITALL):
            (size,) = _REQUEST.unpack(request)
            conn.sendall(payload[:size])


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
