"""The web server's routing, HTML/JSON forms, query validation and error answers, in process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from nyala.errors import NotFound
from nyala.metrics import LoopMetrics
from nyala.rpc import RpcServer
from nyala.web import Badge, Fields, Link, LogBuffer, Page, PageRequest, WebServer
from nyala.web.common import ServerFacts, add_common_pages
from nyala.web.view import paged

pytestmark = pytest.mark.timeout(60)


def _pages(web: WebServer, registry: CollectorRegistry, not_ready: list[str]) -> None:
    facts = ServerFacts(
        kind="tserver", uuid="ab" * 16, version="1.0", started_s=0.0,
        status=lambda: {"location": "/dc1/rack1"}, not_ready=lambda: not_ready,
        registry=registry, rpc=RpcServer(), logs=LogBuffer(),
    )  # fmt: skip
    add_common_pages(web, facts)

    def items(request: PageRequest) -> Page:
        offset, limit = request.query.page()
        rows = list(range(250))
        return Page("Items", [paged("items", ["n", "link"], rows, lambda n: [n, Link(f"#{n}", f"/items/{n}")],
                                    offset, limit)])  # fmt: skip

    def item(request: PageRequest) -> Page:
        name = request.path["name"]
        if name != "7":
            raise NotFound(f"no item {name!r}")
        return Page("Item", [Fields("item", {"name": name, "state": Badge("RUNNING", "good")})])

    web.page("/items", items, paged=True, nav="Items")
    web.page("/items/{name}", item)


def serve(test: Callable[[str, CollectorRegistry, list[str]], Awaitable[None]]) -> None:
    async def main() -> None:
        web = WebServer("Nyala test")
        registry = CollectorRegistry()
        not_ready: list[str] = []
        _pages(web, registry, not_ready)
        address = await web.start("127.0.0.1", 0)
        try:
            await test(f"http://{address}", registry, not_ready)
        finally:
            await web.stop()

    asyncio.run(main())


async def fetch(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


def test_a_page_answers_as_html_and_as_json_under_api_or_format() -> None:
    async def check(base: str, registry: Any, not_ready: Any) -> None:
        status, kind, body = await fetch(base + "/items")
        assert status == 200
        assert kind.startswith("text/html")
        assert "<a href='/items/3'>#3</a>" in body
        assert "next &rarr;" in body
        for url in ("/api/items?offset=200&limit=100", "/items?format=json&offset=200&limit=100"):
            status, kind, body = await fetch(base + url)
            data = json.loads(body)
            assert status == 200
            assert kind.startswith("application/json")
            assert [row["n"] for row in data["items"]] == list(range(200, 250))
            assert data["items_page"] == {"offset": 200, "limit": 100, "total": 250}
            assert data["items"][0]["link"] == "#200"

    serve(check)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/items?limit=0", "'limit' must be between 1 and 1000"),
        ("/items?offset=x", "'offset' must be an integer"),
        ("/items?colour=red", "unknown query parameter 'colour'"),
        ("/items?limit=5&limit=6", "'limit' is given more than once"),
        ("/items?format=xml", "'format' must be one of html, json"),
        ("/logs?lines=" + "9" * 300, "longer than 256 characters"),
        ("/metrics?x=1", "unknown query parameter 'x'"),
    ],
)
def test_a_malformed_query_is_a_400_naming_the_problem(url: str, message: str) -> None:
    async def check(base: str, registry: Any, not_ready: Any) -> None:
        status, _, body = await fetch(base + url)
        assert status == 400
        assert message in body

    serve(check)


def test_unknown_paths_and_ids_are_404_with_a_message() -> None:
    async def check(base: str, registry: Any, not_ready: Any) -> None:
        status, _, body = await fetch(base + "/nowhere")
        assert status == 404
        assert "no page '/nowhere'" in body
        status, kind, body = await fetch(base + "/api/items/9")
        assert status == 404
        assert kind.startswith("application/json")
        assert json.loads(body)["error"] == "no item '9'"
        status, _, body = await fetch(base + "/items/7?format=json")
        assert status == 200
        assert json.loads(body)["item"] == {"name": "7", "state": "RUNNING"}

    serve(check)


def test_common_pages_status_health_and_metrics() -> None:
    async def check(base: str, registry: CollectorRegistry, not_ready: list[str]) -> None:
        metrics = LoopMetrics()
        calls = metrics.counter("nyala_test_calls_total", "Calls.", ["method"])
        metrics.register_on(registry)
        calls.inc("Ping", amount=3)
        status, kind, body = await fetch(base + "/status")  # JSON by default
        server = json.loads(body)["server"]
        assert status == 200
        assert server["uuid"] == "ab" * 16
        assert server["location"] == "/dc1/rack1"
        assert (await fetch(base + "/healthz?format=json"))[0] == 200
        not_ready.append("no master answers heartbeats")
        status, _, body = await fetch(base + "/api/healthz")
        assert status == 503
        assert json.loads(body)["health"] == {
            "ready": False,
            "reasons": ["no master answers heartbeats"],
        }
        status, kind, body = await fetch(base + "/metrics")
        assert status == 200
        assert kind.startswith("text/plain")
        families = {f.name: f for f in text_string_to_metric_families(body)}
        assert families["nyala_test_calls"].samples[0].value == 3
        for path in ("/", "/rpcz", "/logs?lines=10", "/api/rpcz"):
            assert (await fetch(base + path))[0] == 200, path

    serve(check)
