"""The aiohttp application: routes, the HTML/JSON choice, errors as 400/404, start and stop."""

from __future__ import annotations

import inspect
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass

from aiohttp import web

from nyala.common.hostport import HostPort
from nyala.errors import InvalidArgument, NotFound, NyalaError
from nyala.web.query import BadRequest, Query
from nyala.web.render import render_html, render_json
from nyala.web.view import Page

__all__ = ["PageHandler", "PageRequest", "RawHandler", "WebServer"]

log = logging.getLogger("nyala.web")

API_PREFIX = "/api"
#: Request lines and headers beyond these sizes are refused by aiohttp with 400 (its parser
#: limits), before any handler runs.
MAX_LINE_BYTES = 8190


@dataclass(frozen=True)
class PageRequest:
    """What a page handler gets: the validated query and the path's parameters."""

    query: Query
    path: Mapping[str, str]


PageHandler = Callable[[PageRequest], Page | Awaitable[Page]]
RawHandler = Callable[[Query], web.StreamResponse | Awaitable[web.StreamResponse]]


class WebServer:
    """Serves pages (HTML, and JSON under ``/api``) and raw endpoints on one address."""

    def __init__(self, title: str) -> None:
        self.title = title
        #: (text, path) of the pages listed in every page's header.
        self.nav: list[tuple[str, str]] = []
        self.app = web.Application(middlewares=[self._errors], handler_args={"max_line_size": MAX_LINE_BYTES})
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.address: HostPort | None = None
        self._scheme = "http"

    def page(
        self,
        path: str,
        handler: PageHandler,
        *,
        params: Collection[str] = (),
        paged: bool = False,
        nav: str = "",
        default_format: str = "html",
    ) -> None:
        """Serve ``handler`` at ``path`` (HTML, or JSON with ``?format=json``) and at ``/api<path>``.

        ``params`` are the query parameters it takes besides ``format`` (and ``offset`` and
        ``limit`` when ``paged``); any other is a 400.
        """
        accepted = {"format", *params, *(("offset", "limit") if paged else ())}

        async def serve(request: web.Request, api: bool) -> web.StreamResponse:
            query = Query(list(request.query.items()), accepted)
            fmt = "json" if api else query.choice("format", ("html", "json"), default_format)
            result = handler(PageRequest(query, request.match_info))
            page = await result if inspect.isawaitable(result) else result
            if fmt == "json":
                return web.Response(text=render_json(page), status=page.status, content_type="application/json")
            document = render_html(page, server_title=self.title, nav=self.nav, path=request.path, query=query.items())
            return web.Response(text=document, status=page.status, content_type="text/html")

        async def html_or_json(request: web.Request) -> web.StreamResponse:
            return await serve(request, api=False)

        async def api(request: web.Request) -> web.StreamResponse:
            return await serve(request, api=True)

        self.app.router.add_get(path, html_or_json)
        self.app.router.add_get(API_PREFIX + (path if path != "/" else ""), api)
        if nav:
            self.nav.append((nav, path))

    def raw(self, path: str, handler: RawHandler, *, params: Collection[str] = ()) -> None:
        """Serve a handler that makes its own response (``/metrics``)."""
        accepted = set(params)

        async def serve(request: web.Request) -> web.StreamResponse:
            result = handler(Query(list(request.query.items()), accepted))
            return await result if inspect.isawaitable(result) else result

        self.app.router.add_get(path, serve)

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Every failure as a short text (or JSON under /api) naming the problem."""
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            message = exc.text or exc.reason
            if exc.status == 404:
                message = f"no page {request.path!r} on this server; try / for the list of pages"
            return _error(request, exc.status, message)
        except NotFound as exc:
            return _error(request, 404, str(exc))
        except (BadRequest, InvalidArgument) as exc:
            return _error(request, 400, str(exc))
        except NyalaError as exc:
            return _error(request, 503, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug: keep serving, say so, log the traceback
            log.exception("web page %s failed", request.path)
            return _error(request, 500, f"internal error: {type(exc).__name__}: {exc}")

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> HostPort:
        """Listen on ``host:port`` (0 picks a free port), HTTPS with ``ssl_context``; return the bound address."""
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, host, port, reuse_address=True, ssl_context=ssl_context)
        self._scheme = "http" if ssl_context is None else "https"
        await self._site.start()
        bound = self._runner.addresses[0]
        self.address = HostPort(str(bound[0]), int(bound[1]))
        return self.address

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        if self.address is None:
            raise RuntimeError("the web server is not started")
        return f"{self._scheme}://{self.address}"


def _error(request: web.Request, status: int, message: str) -> web.Response:
    wants_json = request.path.startswith(API_PREFIX + "/") or request.query.get("format") == "json"
    if wants_json:
        return web.json_response({"error": message, "status": status}, status=status)
    return web.Response(text=message + "\n", status=status, content_type="text/plain")
