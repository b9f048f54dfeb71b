"""The tablet server's and master's collectors, event-loop lag, and their bounded label sets."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pytest
from prometheus_client.registry import CollectorRegistry

from nyala.catalog import CatalogState
from nyala.errors import InvalidArgument, NotTheLeader
from nyala.master.leader import LeaderView
from nyala.master.metrics import MasterMetrics, tablet_health
from nyala.master.replica_cache import ReplicaCache
from nyala.master.replicas import ReplicaReport
from nyala.master.ts_manager import TSManager
from nyala.metrics import LoopMetrics
from nyala.metrics.event_loop import LoopLagMonitor
from nyala.placement import PlacementOptions
from nyala.proto import common_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.schema.rowops import OpType
from nyala.testing.wait import wait_for_async
from nyala.tserver.metrics import TabletServerMetrics
from nyala.tserver.tablet_copy_client import CopyCounters
from nyala.tserver.write_metrics import WriteMetrics
from tests.unit.catalog.helpers import created, servers
from tests.unit.master.test_leader_view import with_config
from tests.unit.master.test_ts_manager import Clock, heartbeat
from tests.unit.web.test_metrics import samples

pytestmark = pytest.mark.timeout(60)


def test_a_counter_read_from_its_owner_exports_as_a_counter() -> None:
    registry = CollectorRegistry()
    metrics = LoopMetrics()
    tally = {"n": 3}
    metrics.counter_callback("nyala_things_total", "Things.", lambda: [((), float(tally["n"]))])
    metrics.register_on(registry)
    assert samples(registry)[("nyala_things_total", ())] == 3
    tally["n"] = 5
    assert samples(registry)[("nyala_things_total", ())] == 5


def test_rows_written_count_by_base_operation_without_the_failed_rows() -> None:
    registry = CollectorRegistry()
    metrics = LoopMetrics()
    writes = WriteMetrics(metrics)
    metrics.register_on(registry)
    ops = pa.array([OpType.INSERT, OpType.INSERT, OpType.UPSERT_IGNORE, OpType.UPDATE, OpType.DELETE_IGNORE],
                   pa.int8())  # fmt: skip
    writes.count(ops, failed_rows=[1])
    writes.count(pa.array([OpType.UPSERT] * 3, pa.int8()), failed_rows=[2], only_op=OpType.UPSERT)
    writes.row_errors.inc()
    got = samples(registry)
    assert got[("nyala_tablet_rows_written_total", (("op", "insert"),))] == 1
    assert got[("nyala_tablet_rows_written_total", (("op", "upsert"),))] == 3  # 1, and 2 of a batch of 3
    assert got[("nyala_tablet_rows_written_total", (("op", "update"),))] == 1
    assert got[("nyala_tablet_rows_written_total", (("op", "delete"),))] == 1
    assert got[("nyala_tablet_row_errors_total", ())] == 1


@dataclass
class FakeStore:
    rows: int = 10
    nbytes: int = 1000
    disk: int = 5000

    def memrowset_rows(self) -> int:
        return self.rows

    def memrowset_bytes(self) -> int:
        return self.nbytes

    def file_size_bytes(self) -> int:
        return self.disk


@dataclass
class FakeTablet:
    state: int = tpb.RUNNING
    store: FakeStore | None = field(default_factory=FakeStore)


def tserver_metrics(tablets: list[FakeTablet], counters: CopyCounters | None = None) -> CollectorRegistry:
    """A tablet server's registry reading ``tablets``, its disk bytes refreshed once."""
    registry = CollectorRegistry()
    metrics = TabletServerMetrics(registry)
    metrics.watch(
        tablets=lambda: tablets,  # type: ignore[arg-type,return-value]
        flushes=lambda: 7,
        scanners_open=lambda: 2,
        scanners_expired=lambda: 1,
        copy_counters=lambda: counters,
        copy_source=lambda: None,
        copies_in_progress=lambda: 0,
    )
    metrics.rows_scanned.inc(40)
    asyncio.run(metrics.refresh_disk_bytes())
    return registry


def test_tablet_server_gauges_sum_over_tablets() -> None:
    counters = CopyCounters(started=3, completed=2, failed=1, bytes_within_location=10, bytes_across_locations=20)
    counters.installed_s.observe(1.5)
    tablets = [FakeTablet(), FakeTablet(), FakeTablet(tpb.BOOTSTRAPPING, None)]
    got = samples(tserver_metrics(tablets, counters))
    assert got[("nyala_tablets", (("state", "RUNNING"),))] == 2
    assert got[("nyala_tablets", (("state", "BOOTSTRAPPING"),))] == 1
    assert got[("nyala_tablet_memrowset_bytes", ())] == 2000
    assert got[("nyala_tablet_memrowset_rows", ())] == 20
    assert got[("nyala_tablet_on_disk_bytes", ())] == 10000
    assert got[("nyala_tablet_flushes_total", ())] == 7
    assert got[("nyala_tablet_rows_scanned_total", ())] == 40
    assert got[("nyala_scanners_open", ())] == 2
    assert got[("nyala_tablet_copies_total", (("outcome", "failed"),))] == 1
    assert got[("nyala_tablet_copy_fetched_bytes_total", (("scope", "across_locations"),))] == 20
    assert got[("nyala_tablet_copy_duration_seconds_count", (("outcome", "installed"),))] == 1
    assert got[("nyala_tablet_copy_duration_seconds_sum", (("outcome", "installed"),))] == 1.5


def test_tablet_server_series_do_not_grow_with_the_tablet_count() -> None:
    few = samples(tserver_metrics([FakeTablet() for _ in range(3)], CopyCounters()))
    many = samples(tserver_metrics([FakeTablet() for _ in range(3000)], CopyCounters()))
    assert set(few) == set(many)


def live_tservers(clock: Clock) -> TSManager:
    ts = TSManager(unresponsive_timeout_ms=3000, clock=clock)
    for i, uuid in enumerate(servers()):
        ts.heartbeat(heartbeat(uuid, 1, register=True, port=7050 + i))
    return ts


def running_view() -> tuple[LeaderView, str]:
    state = CatalogState()
    tablet = state.tablets_of(created(state))[0]
    view = LeaderView.build(1, state, PlacementOptions())
    view.commit(with_config(state, tablet, servers(), 2))
    return view, tablet.tablet_id


def report(leader: str) -> ReplicaReport:
    return ReplicaReport(tpb.RUNNING, common_pb2.FOLLOWER, 1, leader, 0)


def test_tablet_health_goes_from_leaderless_to_healthy_to_under_replicated() -> None:
    view, tablet_id = running_view()
    tablet = view.catalog.tablet(tablet_id)
    assert tablet is not None
    live = set(servers())
    assert tablet_health(view, tablet, live.__contains__, 3) == "leaderless"
    for uuid in servers():
        view.record_report(uuid, tablet, report(servers()[0]))
    assert tablet_health(view, tablet, live.__contains__, 3) == "healthy"
    live.discard(servers()[2])
    assert tablet_health(view, tablet, live.__contains__, 3) == "under_replicated"


def test_master_gauges_read_the_leader_view_and_nothing_on_a_follower() -> None:
    clock = Clock()
    ts = live_tservers(clock)
    view, tablet_id = running_view()
    tablet = view.catalog.tablet(tablet_id)
    assert tablet is not None
    for uuid in servers():
        view.record_report(uuid, tablet, report(servers()[0]))
    leading = {"yes": True}

    def current_view() -> LeaderView:
        if not leading["yes"]:
            raise NotTheLeader("not the leader")
        return view

    registry = CollectorRegistry()
    metrics = MasterMetrics(registry)
    sent = {"add": 2, "move": 1}
    metrics.watch(view=current_view, ts_manager=ts, tasks_sent=lambda: sent,
                  tasks_in_flight=lambda: [("add", tablet_id, servers()[1])], rebalance=lambda: (4, 1))  # fmt: skip
    got = samples(registry)
    others = len(view.catalog.tablets_of(tablet.table_id)) - 1  # still CREATING: no config committed
    assert got[("nyala_master_tablets", (("health", "healthy"),))] == 1
    assert got[("nyala_master_tablets", (("health", "creating"),))] == others
    assert got[("nyala_master_tablets", (("health", "leaderless"),))] == 0
    assert got[("nyala_master_tablet_servers", (("liveness", "live"), ("state", "NONE")))] == 3
    assert got[("nyala_master_re_replications_total", ())] == 2
    assert got[("nyala_master_tablet_tasks_total", (("kind", "move"),))] == 1
    assert got[("nyala_master_tablet_tasks_in_flight", (("kind", "add"),))] == 1
    assert got[("nyala_master_rebalance_moves_total", ())] == 1
    clock.now += 10  # every server misses its heartbeats
    leading["yes"] = False
    got = samples(registry)
    assert not [k for k in got if k[0] == "nyala_master_tablets"]
    assert got[("nyala_master_tablet_servers", (("liveness", "dead"), ("state", "UNKNOWN")))] == 3


def test_catalog_operations_count_outcomes_and_time() -> None:
    registry = CollectorRegistry()
    metrics = MasterMetrics(registry)
    with metrics.catalog_operation("create_table"):
        pass
    with pytest.raises(InvalidArgument), metrics.catalog_operation("create_table"):
        raise InvalidArgument("bad schema")
    metrics.placed("new_tablet", "policy_met")
    got = samples(registry)
    assert got[("nyala_master_catalog_operations_total", (("operation", "create_table"), ("outcome", "ok")))] == 1
    assert got[("nyala_master_catalog_operations_total", (("operation", "create_table"), ("outcome", "error")))] == 1
    assert got[("nyala_master_catalog_operation_duration_seconds_count", (("operation", "create_table"),))] == 2
    assert got[("nyala_master_placement_decisions_total", (("kind", "new_tablet"), ("outcome", "policy_met")))] == 1


def test_event_loop_lag_records_a_loop_blocked_by_a_handler() -> None:
    registry = CollectorRegistry()
    monitor = LoopLagMonitor(registry, interval_s=0.01)

    async def main() -> None:
        monitor.start()
        try:
            blocked_until = time.perf_counter() + 0.1
            while time.perf_counter() < blocked_until:  # a handler that blocks the loop
                pass
            await wait_for_async(lambda: monitor.lag.count >= 1, what="a lag sample", timeout_s=10)
        finally:
            monitor.stop()

    asyncio.run(main())
    assert monitor.lag.sum >= 0.05  # the first timer fired at least 90 ms late
    assert samples(registry)[("nyala_event_loop_lag_seconds_count", ())] >= 1


def test_event_loop_lag_refuses_a_zero_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        LoopLagMonitor(None, interval_s=0)


def test_metrics_off_export_nothing_and_histograms_record_nothing() -> None:
    registry = CollectorRegistry()
    metrics = LoopMetrics(enabled=False)
    latency = metrics.histogram("nyala_off_seconds", "Off.").child()
    writes = WriteMetrics(metrics)
    metrics.register_on(registry)
    latency.observe(1.0)
    writes.count(pa.array([OpType.INSERT], pa.int8()))
    assert latency.count == 0
    assert writes._rows["insert"].value == 0
    assert samples(registry) == {}
    assert samples(tserver_metrics_off()) == {}


def tserver_metrics_off() -> CollectorRegistry:
    registry = CollectorRegistry()
    TabletServerMetrics(registry, enabled=False)
    MasterMetrics(registry, enabled=False)
    return registry


def test_the_replica_cache_decodes_a_tablet_again_only_when_its_entry_changed() -> None:
    view, tablet_id = running_view()
    cache = ReplicaCache()
    first = {tablet.tablet_id: replicas for tablet, replicas in cache.walk(view.catalog.all_tablets())}
    tablet = view.catalog.tablet(tablet_id)
    assert tablet is not None
    assert first[tablet_id] == servers()
    assert cache.replicas(tablet) is first[tablet_id]  # the same tuple: not decoded again
    moved = view.catalog.tablet(tablet_id)
    assert moved is not None
    view.commit(with_config(view.catalog, moved, (*servers()[:2], "f" * 32), 3))
    changed = view.catalog.tablet(tablet_id)
    assert changed is not None
    assert changed is not tablet
    assert cache.replicas(changed) == (*servers()[:2], "f" * 32)
