"""Lock-free counters and histograms for code on one event loop, collected by ``prometheus_client``.

A family (:class:`CounterFamily`, :class:`HistogramFamily`) has fixed label names; ``child``
returns the series of one set of label values, created on first use and kept, so that hot
paths look a child up once and then only add to it.  :class:`LoopMetrics` is the
``prometheus_client`` collector of a group of families: registering it on a registry makes
them part of every scrape.  Nothing here locks: every update and the scrape itself must run
on the same thread (the server's event loop).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = ["LATENCY_BUCKETS_S", "CounterCallback", "CounterFamily", "GaugeCallback", "HistogramFamily", "LoopMetrics"]

#: Latency buckets from 50 us to 30 s: an inline RPC takes tens of microseconds, an fsync
#: milliseconds, a DDL call seconds.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class CounterChild:
    """One counter series: add with :meth:`inc` (or ``child.value += n``)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class HistogramChild:
    """One histogram series: counts per bucket (not cumulative) and the sum."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


class NullHistogramChild(HistogramChild):
    """A histogram series that records nothing: what a server with metrics off observes into."""

    __slots__ = ()

    def observe(self, value: float) -> None:
        pass


class _Family:
    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        if not name.startswith("nyala_"):
            raise ValueError(f"metric name {name!r} must start with nyala_")
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)

    def _check(self, labels: tuple[str, ...]) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {labels}")


class CounterFamily(_Family):
    """A counter with labels; exported as ``<name>_total``."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames)
        self._children: dict[tuple[str, ...], CounterChild] = {}
        if not self.labelnames:
            self.child()  # a series without labels reads 0 before its first event

    def child(self, *labels: str) -> CounterChild:
        found = self._children.get(labels)
        if found is None:
            self._check(labels)
            found = self._children[labels] = CounterChild()
        return found

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        self.child(*labels).value += amount

    def value(self, *labels: str) -> float:
        found = self._children.get(labels)
        return 0.0 if found is None else found.value

    def collect(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, child in self._children.items():
            family.add_metric(list(labels), child.value)
        return family


class HistogramFamily(_Family):
    """A histogram with labels and fixed bucket bounds (seconds by default)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS_S,
        enabled: bool = True,
    ) -> None:
        super().__init__(name, documentation, labelnames)
        self._child_type = HistogramChild if enabled else NullHistogramChild
        bounds = [float(b) for b in buckets if not math.isinf(b)]
        if bounds != sorted(set(bounds)) or not bounds:
            raise ValueError(f"bucket bounds of {name} must be increasing and not empty: {buckets}")
        self.bounds = tuple(bounds)
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        if not self.labelnames:
            self.child()

    def child(self, *labels: str) -> HistogramChild:
        found = self._children.get(labels)
        if found is None:
            self._check(labels)
            found = self._children[labels] = self._child_type(self.bounds)
        return found

    def observe(self, value: float, *labels: str) -> None:
        self.child(*labels).observe(value)

    def collect(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, child in self._children.items():
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip((*self.bounds, math.inf), child.counts, strict=True):
                cumulative += count
                buckets.append((_float_text(bound), cumulative))
            family.add_metric(list(labels), buckets, child.sum)
        return family


class GaugeCallback(_Family):
    """A gauge read at scrape time: ``read()`` returns (label values, value) pairs."""

    def __init__(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Iterable[tuple[Sequence[str], float]]],
        labelnames: Sequence[str] = (),
    ) -> None:
        super().__init__(name, documentation, labelnames)
        self._read = read

    def collect(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in self._read():
            family.add_metric(list(labels), value)
        return family


class CounterCallback(GaugeCallback):
    """A counter whose value lives elsewhere (a component's own tally), read at scrape time.

    The component keeps counting as it always did; the read must never go down (a tally
    reset with its owner would look like a counter reset to Prometheus, which it handles).
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Iterable[tuple[Sequence[str], float]]],
        labelnames: Sequence[str] = (),
    ) -> None:
        super().__init__(name.removesuffix("_total"), documentation, read, labelnames)

    def collect(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in self._read():
            family.add_metric(list(labels), value)
        return family


def _float_text(value: float) -> str:
    return "+Inf" if math.isinf(value) else repr(float(value))


Family = CounterFamily | HistogramFamily | GaugeCallback


class LoopMetrics(Collector):
    """The collector of a set of families; register it with :meth:`register_on`.

    ``enabled=False`` (a server started with metrics off) makes histograms record nothing and
    :meth:`register_on` export nothing; counters still add up (an attribute update each), so
    that code reading them for its own purposes keeps working.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._families: list[Family] = []

    def add(self, family: Family) -> Family:
        self._families.append(family)
        return family

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> CounterFamily:
        family = CounterFamily(name, documentation, labelnames)
        self._families.append(family)
        return family

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS_S,
    ) -> HistogramFamily:
        family = HistogramFamily(name, documentation, labelnames, buckets, self.enabled)
        self._families.append(family)
        return family

    def gauge(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Iterable[tuple[Sequence[str], float]]],
        labelnames: Sequence[str] = (),
    ) -> GaugeCallback:
        family = GaugeCallback(name, documentation, read, labelnames)
        self._families.append(family)
        return family

    def counter_callback(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Iterable[tuple[Sequence[str], float]]],
        labelnames: Sequence[str] = (),
    ) -> CounterCallback:
        family = CounterCallback(name, documentation, read, labelnames)
        self._families.append(family)
        return family

    def register_on(self, registry: CollectorRegistry | None) -> None:
        """Export the families through ``registry`` (None: keep counting, export nothing)."""
        if registry is not None and self.enabled:
            registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            yield family.collect()

    def describe(self) -> Iterator[Metric]:
        # Registration checks names for clashes from describe(); families without children
        # still name their series, and no gauge callback runs before the server is ready.
        for family in self._families:
            if isinstance(family, CounterCallback):
                yield CounterMetricFamily(family.name, family.documentation, labels=family.labelnames)
            elif isinstance(family, GaugeCallback):
                yield GaugeMetricFamily(family.name, family.documentation, labels=family.labelnames)
            else:
                yield family.collect()
