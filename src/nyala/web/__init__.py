"""The HTTP side of every Nyala server: status pages, their JSON forms, and Prometheus metrics.

How it works:

- :class:`WebServer` is an ``aiohttp`` application served on the server's own event loop,
  beside RPC (``--webserver-port``, 0 disables it).  Handlers only read memory the server
  already keeps (the catalog, the tablet registry, the RPC server's calls), so a page never
  waits on disk or network and never disturbs RPC service for long.
- A page handler returns a :class:`~nyala.web.view.Page`: a title and sections (a table of
  rows, a set of fields, a block of text).  The same page renders as HTML for people, and as
  JSON for scripts under ``/api/<path>`` or with ``?format=json``
  (:mod:`nyala.web.render`).  Long tables are paged (``offset``, ``limit``) so a page stays
  fast for 10,000 tablets.
- Every page declares the query parameters it takes; anything else, a malformed value or a
  repeated parameter is answered 400 naming the problem (:mod:`nyala.web.query`).  An unknown
  path, table or tablet is 404 with a message.
- :mod:`nyala.web.common` adds the pages every server has: ``/`` (home), ``/status``,
  ``/healthz``, ``/metrics`` (``prometheus_client``'s exposition of the server's own
  registry), ``/rpcz`` (calls in flight) and ``/logs`` (the tail of the server's log, kept in
  memory by :class:`~nyala.web.logbuffer.LogBuffer`).  Masters and tablet servers add their
  own pages in ``nyala.master.web`` and ``nyala.tserver.web``.

Layer 1: it knows nothing of masters or tablet servers; they hand it pages.
"""

from nyala.web.logbuffer import LogBuffer
from nyala.web.query import BadRequest, Query
from nyala.web.server import PageRequest, WebServer
from nyala.web.view import Badge, Fields, Link, Page, Table, Text

__all__ = [
    "BadRequest",
    "Badge",
    "Fields",
    "Link",
    "LogBuffer",
    "Page",
    "PageRequest",
    "Query",
    "Table",
    "Text",
    "WebServer",
]
