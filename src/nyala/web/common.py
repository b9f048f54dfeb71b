"""The pages every server has: home, status, health, metrics, calls in flight, the log's tail."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from nyala.rpc import RpcServer
from nyala.web.logbuffer import LogBuffer
from nyala.web.server import PageRequest, WebServer
from nyala.web.view import Badge, Cell, Fields, Link, Page, Table, Text

__all__ = ["ServerFacts", "add_common_pages"]

MAX_LOG_LINES = 2000


@dataclass
class ServerFacts:
    """How the common pages learn about their server; each callable reads memory only."""

    kind: str
    uuid: str
    version: str
    started_s: float  # time.time() at start
    #: uuid, role, addresses, location, ...: the body of /status, in display order.
    status: Callable[[], dict[str, Cell]]
    #: Why the server is not ready; empty when it is.
    not_ready: Callable[[], list[str]]
    registry: CollectorRegistry
    rpc: RpcServer
    logs: LogBuffer


def add_common_pages(web_server: WebServer, facts: ServerFacts) -> None:
    """Serve ``/``, ``/status``, ``/healthz``, ``/metrics``, ``/rpcz`` and ``/logs``."""

    def status_fields() -> Fields:
        items: dict[str, Cell] = {
            "uuid": facts.uuid,
            "kind": facts.kind,
            "version": facts.version,
            "uptime_s": round(time.time() - facts.started_s, 1),
        }
        items.update(facts.status())
        return Fields("server", items)

    def home(request: PageRequest) -> Page:
        reasons = facts.not_ready()
        health = Badge("ready", "good") if not reasons else Badge("not ready", "bad")
        pages: list[list[str] | str | Link] = [Link(text, path) for text, path in web_server.nav]
        return Page(
            f"{facts.kind} {facts.uuid[:8]}",
            [
                status_fields(),
                Fields("health", {"state": health, "reasons": reasons}, "Health"),
                Table("pages", ["page"], [[p] for p in pages], "Pages"),
            ],
        )

    def status(request: PageRequest) -> Page:
        return Page("Status", [status_fields()])

    def healthz(request: PageRequest) -> Page:
        reasons = facts.not_ready()
        return Page(
            "Health",
            [Fields("health", {"ready": not reasons, "reasons": reasons})],
            status=200 if not reasons else 503,
        )

    def rpcz(request: PageRequest) -> Page:
        now = time.perf_counter()
        calls = facts.rpc.in_flight()
        rows: list[list[Cell]] = [
            [c.method, c.peer, round((now - c.started) * 1000, 1), None if c.remaining() is None else
             round((c.remaining() or 0.0) * 1000, 1)]
            for c in calls
        ]  # fmt: skip
        offset, limit = request.query.page()
        table = Table(
            "calls", ["method", "peer", "elapsed_ms", "deadline_in_ms"], rows[offset : offset + limit],
            "RPC calls in flight", len(rows), offset, limit,
        )  # fmt: skip
        return Page("RPCs in flight", [table])

    def logs(request: PageRequest) -> Page:
        lines = request.query.integer("lines", 200, minimum=1, maximum=MAX_LOG_LINES)
        return Page(f"Last {lines} log lines", [Text("lines", "\n".join(facts.logs.tail(lines)))])

    def metrics(query: object) -> web.Response:
        response = web.Response(body=generate_latest(facts.registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    web_server.page("/", home, nav="Home")
    web_server.page("/status", status, default_format="json")
    web_server.page("/healthz", healthz)
    web_server.page("/rpcz", rpcz, paged=True, nav="RPCs")
    web_server.page("/logs", logs, params=("lines",), nav="Logs")
    web_server.raw("/metrics", metrics)
