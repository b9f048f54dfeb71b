"""The lock-free metric families, the RPC server's metrics, and bounded labels."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from nyala.errors import InvalidArgument
from nyala.metrics import LoopMetrics
from nyala.proto import rpc_pb2
from nyala.rpc import PING, CallContext, Messenger, RpcMethod, RpcServer
from nyala.rpc.metrics import RpcMetrics

pytestmark = pytest.mark.timeout(60)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_and_histograms_export_in_prometheus_format() -> None:
    registry = CollectorRegistry()
    metrics = LoopMetrics()
    calls = metrics.counter("nyala_x_total", "Xs.", ["kind"])
    latency = metrics.histogram("nyala_x_seconds", "X time.", buckets=(0.1, 1.0))
    metrics.gauge("nyala_x_open", "Open xs.", lambda: [((), 4.0)])
    metrics.register_on(registry)
    calls.child("a").inc()
    calls.inc("a", amount=2)
    for value in (0.05, 0.5, 5.0):
        latency.observe(value)
    got = samples(registry)
    assert got[("nyala_x_total", (("kind", "a"),))] == 3
    assert got[("nyala_x_seconds_bucket", (("le", "0.1"),))] == 1
    assert got[("nyala_x_seconds_bucket", (("le", "1.0"),))] == 2
    assert got[("nyala_x_seconds_bucket", (("le", "+Inf"),))] == 3
    assert got[("nyala_x_seconds_count", ())] == 3
    assert got[("nyala_x_seconds_sum", ())] == pytest.approx(5.55)
    assert got[("nyala_x_open", ())] == 4


def test_a_family_refuses_bad_names_and_label_counts() -> None:
    metrics = LoopMetrics()
    with pytest.raises(ValueError, match="must start with nyala_"):
        metrics.counter("calls_total", "Calls.")
    family = metrics.counter("nyala_y_total", "Ys.", ["method"])
    with pytest.raises(ValueError, match="takes labels"):
        family.child("a", "b")


ECHO_FAIL = RpcMethod("Test", "Fail", rpc_pb2.PingRequest, rpc_pb2.PingResponse)


def test_rpc_calls_errors_and_bytes_are_counted_and_labels_stay_bounded() -> None:
    registry = CollectorRegistry()

    async def fail(request: rpc_pb2.PingRequest, ctx: CallContext) -> rpc_pb2.PingResponse:
        raise InvalidArgument("no")

    async def main() -> None:
        server = RpcServer(metrics=RpcMetrics(registry))
        server.add_method(ECHO_FAIL, fail)
        address = await server.start("127.0.0.1:0")
        messenger = Messenger()
        try:
            for _ in range(3):
                await messenger.call(address, PING, rpc_pb2.PingRequest(payload=b"x" * 100))
            with pytest.raises(InvalidArgument):
                await messenger.call(address, ECHO_FAIL, rpc_pb2.PingRequest())
            for i in range(20):  # methods nobody registered share one label value
                bogus = RpcMethod("Bogus", f"M{i}", rpc_pb2.PingRequest, rpc_pb2.PingResponse)
                with pytest.raises(Exception, match="no method"):
                    await messenger.call(address, bogus, rpc_pb2.PingRequest())
            got = samples(registry)
            assert got[("nyala_rpc_calls_total", (("method", "GenericService.Ping"),))] == 3
            assert got[("nyala_rpc_calls_total", (("method", "Test.Fail"),))] == 1
            assert got[("nyala_rpc_errors_total", (("code", "INVALID_ARGUMENT"), ("method", "Test.Fail")))] == 1
            assert got[("nyala_rpc_calls_total", (("method", "unknown"),))] == 20
            assert got[("nyala_rpc_call_duration_seconds_count", (("method", "GenericService.Ping"),))] == 3
            assert got[("nyala_rpc_queue_duration_seconds_count", (("method", "Test.Fail"),))] == 1
            assert got[("nyala_rpc_received_bytes_total", ())] > 300
            assert got[("nyala_rpc_sent_bytes_total", ())] > 300
            assert got[("nyala_rpc_connections", (("direction", "inbound"),))] == 1
            methods = {dict(labels).get("method") for (name, labels) in got if name == "nyala_rpc_calls_total"}
            assert methods == {"GenericService.Ping", "Test.Fail", "unknown"}
        finally:
            await messenger.close()
            await server.stop()

    asyncio.run(main())
