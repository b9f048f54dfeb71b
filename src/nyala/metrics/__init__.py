"""Metrics of one server, exposed in Prometheus' text format by ``prometheus_client``.

How it works:

- Each server process owns one ``prometheus_client.CollectorRegistry`` (never the global
  one), so several servers can run in one test process without their series mixing.  The
  components of the server register their metrics on it; a component built without a
  registry (unit tests, tools) counts into metrics nobody exports.
- Code that runs on the event loop (RPC dispatch, the Raft driver) counts with the plain,
  lock-free families of :mod:`nyala.metrics.loop`: an increment is an attribute update and
  an observation a bisect, where ``prometheus_client``'s own metrics take a lock per value
  (1.2 us per ``inc``, 4.5 us per ``Histogram.observe``, measured).  They are read by a
  ``Collector`` when the registry is scraped, which happens on the same loop.
- Code that runs on other threads counts into objects only that thread updates (the WAL's
  per-log tallies, :mod:`nyala.wal.metrics`), summed by a collector at scrape time: the
  locked metrics of ``prometheus_client`` cost 12 us a replicated write in the WAL alone.
- Gauges whose value already lives somewhere (open connections, replicas by role) are read
  at scrape time by a collector callback, never kept up to date by hand.

Names follow Prometheus' conventions: a ``nyala_`` prefix, the unit in the name
(``_seconds``, ``_bytes``, ``_entries``), ``_total`` on counters, and only label values from a
bounded set (method names a server registered, status codes, roles), never ids.
"""

from nyala.metrics.loop import CounterCallback, CounterFamily, GaugeCallback, HistogramFamily, LoopMetrics

__all__ = ["CounterCallback", "CounterFamily", "GaugeCallback", "HistogramFamily", "LoopMetrics"]
