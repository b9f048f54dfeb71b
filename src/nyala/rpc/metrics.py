"""The RPC server's metrics: calls, errors, latency and queue time per method, bytes, connections.

Label values are bounded: ``method`` is one of the methods the server registered (a call to
any other method counts as ``unknown``), ``code`` one of the status codes.  Counting runs on
the event loop with :mod:`nyala.metrics.loop` families, a few attribute updates per call.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.registry import CollectorRegistry

from nyala.metrics import CounterFamily, HistogramFamily, LoopMetrics
from nyala.metrics.loop import CounterChild, HistogramChild
from nyala.proto import rpc_pb2

__all__ = ["MethodMetrics", "RpcMetrics"]

UNKNOWN_METHOD = "unknown"


class MethodMetrics:
    """The series of one method, looked up once when the method is registered."""

    __slots__ = ("calls", "latency", "method", "queue")

    def __init__(self, method: str, calls: CounterChild, latency: HistogramChild, queue: HistogramChild) -> None:
        self.method = method
        self.calls = calls
        self.latency = latency
        self.queue = queue


class RpcMetrics:
    """Every metric of one RPC server (and of the messenger beside it, for its connections)."""

    def __init__(self, registry: CollectorRegistry | None = None, enabled: bool = True) -> None:
        self._set = LoopMetrics(enabled)
        self.calls: CounterFamily = self._set.counter(
            "nyala_rpc_calls_total", "RPC calls received, by method, whatever their outcome.", ["method"]
        )
        self.errors: CounterFamily = self._set.counter(
            "nyala_rpc_errors_total", "RPC calls answered with an error, by method and status code.", ["method", "code"]
        )
        self.latency: HistogramFamily = self._set.histogram(
            "nyala_rpc_call_duration_seconds",
            "Time from a call's arrival to its answer, by method.",
            ["method"],
        )
        self.queue: HistogramFamily = self._set.histogram(
            "nyala_rpc_queue_duration_seconds",
            "Time from a call's arrival until its handler starts running, by method (task handlers only; "
            "inline handlers start at once).",
            ["method"],
        )
        self.received_bytes: CounterFamily = self._set.counter(
            "nyala_rpc_received_bytes_total", "Bytes received on inbound RPC connections."
        )
        self.sent_bytes: CounterFamily = self._set.counter(
            "nyala_rpc_sent_bytes_total", "Bytes of responses sent on inbound RPC connections."
        )
        self._received = self.received_bytes.child()
        self._sent = self.sent_bytes.child()
        self._inbound: Callable[[], int] = lambda: 0
        self._outbound: Callable[[], int] = lambda: 0
        self._set.gauge(
            "nyala_rpc_connections",
            "Open RPC connections: inbound (clients and peers calling this server) and outbound (this "
            "server's messenger calling others).",
            lambda: [(("inbound",), self._inbound()), (("outbound",), self._outbound())],
            ["direction"],
        )
        self._set.register_on(registry)

    def watch_connections(
        self, inbound: Callable[[], int] | None = None, outbound: Callable[[], int] | None = None
    ) -> None:
        """Where the connection gauge reads its values at scrape time."""
        if inbound is not None:
            self._inbound = inbound
        if outbound is not None:
            self._outbound = outbound

    def method(self, name: str) -> MethodMetrics:
        return MethodMetrics(name, self.calls.child(name), self.latency.child(name), self.queue.child(name))

    def error(self, method: str, code: int) -> None:
        self.errors.child(method, _code_name(code)).value += 1

    def received(self, nbytes: int) -> None:
        self._received.value += nbytes

    def sent(self, nbytes: int) -> None:
        self._sent.value += nbytes


def _code_name(code: int) -> str:
    try:
        return str(rpc_pb2.StatusCode.Name(code))
    except ValueError:
        return "UNKNOWN_CODE"
