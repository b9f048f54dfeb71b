"""CreateTable, DeleteTable and AlterTable on the leader, in seed 002's order.

Each operation: validate what needs no lock (bad input changes nothing), take the catalog
write lock, re-check against the committed view (name uniqueness, the table still there),
place new replicas, build ONE catalog write, replicate and commit it
(:meth:`CatalogManager.replicate`), release the lock, and kick the tablet tasks, which send
the tablet-server RPCs.  ``wait=true`` then waits, outside the lock, until the tablets are
RUNNING (create) or report the new schema version (alter); at the caller's deadline it
answers TimedOut and the operation still completes in the background.

A table's (or range's) own placement policy is placed with: a policy whose subtrees have too
few live tablet servers fails CreateTable (and an AlterTable adding ranges) with
InvalidArgument, and nothing is created.
"""

from __future__ import annotations

import logging
import time
import uuid as uuid_module
from collections.abc import Iterable, Sequence

from nyala.catalog import (
    NewTablet,
    TableInfo,
    TablePlacement,
    TabletInfo,
    alter_table_write,
    check_num_replicas,
    check_tablet_count,
    create_table_write,
    delete_table_write,
    plan_alter,
    validate_create_table,
)
from nyala.errors import AlreadyPresent, InvalidArgument, ServiceUnavailable
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import LeaderView
from nyala.master.metrics import MasterMetrics
from nyala.master.tablet_tasks import TabletTasks
from nyala.master.ts_manager import TSManager
from nyala.placement import PlacementConstraint, place_new_tablet
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.schema import Partition

__all__ = ["Ddl"]

log = logging.getLogger("nyala.master")


class Ddl:
    """The leader's table operations."""

    def __init__(self, manager: CatalogManager, ts_manager: TSManager, tasks: TabletTasks) -> None:
        self._manager = manager
        self._ts = ts_manager
        self._tasks = tasks
        self._started_s = ts_manager.clock()
        # A master that just started has not heard every tablet server yet (nothing about them
        # is persisted): too few live servers then means "retry", not "bad request".
        self._warm_up_s = manager.options.tserver_warm_up_s
        #: Where operations and placements are counted (the server's metrics).
        self.metrics = MasterMetrics()

    def _live_tservers(self, view: LeaderView, num_replicas: int) -> int:
        live = view.sync_tservers(self._ts)
        if num_replicas > live and self._ts.clock() - self._started_s < self._warm_up_s:
            raise ServiceUnavailable(
                f"only {live} tablet servers have registered since this master started, fewer than the "
                f"{num_replicas} replicas asked for; retry once they have heartbeated"
            )
        return live

    def _place(
        self,
        view: LeaderView,
        table_id: str,
        partitions: Sequence[Partition],
        rf: int,
        placement: TablePlacement,
        table_name: str,
    ) -> list[NewTablet]:
        """Servers for each new tablet: locations first (policy), then range-aware within them."""
        now_s = time.monotonic()
        self._check_policies(view, {placement.for_range(p.range) for p in partitions}, rf, table_name)
        tablets = []
        for p in partitions:
            tablet_id = uuid_module.uuid4().hex
            constraint = placement.for_range(p.range)
            try:
                placed = place_new_tablet(
                    view.placement, table_id, p.range.lower, rf, now_s=now_s, constraint=constraint
                )
            except ServiceUnavailable as e:
                if constraint.strict:  # the table's own policy cannot be met: a bad request, not a retry
                    raise InvalidArgument(f"table {table_name!r}: {e}") from None
                raise
            self.metrics.placed("new_tablet", "policy_met" if placed.policy_met else "policy_violated")
            if not placed.policy_met:  # best effort (seed 000): placed anyway, and said so
                log.warning("tablet %s of table %s: %s", tablet_id, table_id, placed.explain())
            tablets.append(NewTablet(tablet_id, p, placed.tserver_uuids))
        return tablets

    def _check_policies(
        self, view: LeaderView, constraints: Iterable[PlacementConstraint], rf: int, table_name: str
    ) -> None:
        """InvalidArgument when a strict policy's subtrees hold fewer live servers than ``rf``
        (ServiceUnavailable while this master may not have heard every server yet)."""
        live = view.placement.live_servers_per_location()
        for constraint in constraints:
            inside = sum(n for location, n in live.items() if constraint.allows(location))
            if constraint.strict and inside < rf:
                if self._ts.clock() - self._started_s < self._warm_up_s:
                    raise ServiceUnavailable(
                        f"table {table_name!r}: only {inside} tablet server(s) in "
                        f"{', '.join(constraint.subtrees)} have registered since this master started, fewer "
                        f"than the {rf} replicas; retry once they have heartbeated"
                    )
                raise InvalidArgument(
                    f"table {table_name!r}: placement policy ({constraint.describe()}) cannot be met: "
                    f"{inside} live tablet server(s) in {', '.join(constraint.subtrees)}, fewer than the "
                    f"{rf} replicas of each tablet; no replica is placed outside"
                )

    async def create_table(self, request: mpb.CreateTableRequestPB, timeout_s: float | None) -> str:
        with self.metrics.catalog_operation("create_table"):
            return await self._create_table(request, timeout_s)

    async def _create_table(self, request: mpb.CreateTableRequestPB, timeout_s: float | None) -> str:
        view = self._manager.leader()
        num_replicas = request.num_replicas or self._manager.options.catalog.default_num_replicas
        live = self._live_tservers(view, num_replicas)
        new = validate_create_table(request, live, self._manager.options.catalog)

        async def write() -> tuple[str, int]:
            view = self._manager.leader()
            existing = view.catalog.table_by_name(new.name)
            if existing is not None:
                raise AlreadyPresent(f"table {new.name!r} already exists with id {existing.table_id}")
            table_id = uuid_module.uuid4().hex
            tablets = self._place(view, table_id, new.partitioner.partitions, new.num_replicas, new.placement, new.name)
            await self._manager.replicate(view, create_table_write(table_id, new, tablets, time.time_ns() // 1000))
            return table_id, len(tablets)

        table_id, count = await self._manager.exclusive(write)
        log.info("created table %s (%s) with %d tablets x %d replicas", new.name, table_id, count, new.num_replicas)
        self._tasks.kick()
        if request.wait:
            await self._wait_created(table_id, timeout_s)
        return table_id

    async def _wait_created(self, table_id: str, timeout_s: float | None) -> None:
        def done(view: LeaderView) -> bool:
            table = view.catalog.table(table_id)
            return table is None or table.removed or view.create_done(table)

        await self._manager.wait_until(done, timeout_s, f"the tablets of table {table_id} to be running")

    def is_create_table_done(self, ident: common_pb2.TableIdentifierPB) -> bool:
        view = self._manager.leader()
        return view.create_done(view.catalog.find_table(ident))

    async def delete_table(self, request: mpb.DeleteTableRequestPB) -> None:
        with self.metrics.catalog_operation("delete_table"):
            await self._delete_table(request)

    async def _delete_table(self, request: mpb.DeleteTableRequestPB) -> None:
        async def write() -> tuple[TableInfo, int]:
            view = self._manager.leader()
            table = view.catalog.find_table(request.table)
            tablets = view.catalog.tablets_of(table.table_id)
            reason = f"table {table.name} deleted at {time.strftime('%Y-%m-%d %H:%M:%S')}"
            await self._manager.replicate(view, delete_table_write(table, tablets, reason))
            return table, len(tablets)

        table, count = await self._manager.exclusive(write)
        log.info("deleted table %s (%s) and its %d tablets", table.name, table.table_id, count)
        self._tasks.kick()

    async def alter_table(self, request: mpb.AlterTableRequestPB, timeout_s: float | None) -> int:
        with self.metrics.catalog_operation("alter_table"):
            return await self._alter_table(request, timeout_s)

    async def _alter_table(self, request: mpb.AlterTableRequestPB, timeout_s: float | None) -> int:
        async def write() -> TableInfo:
            view = self._manager.leader()
            table = view.catalog.find_table(request.table)
            plan = plan_alter(table, request)
            if plan.new_name is not None and view.catalog.table_by_name(plan.new_name) is not None:
                raise AlreadyPresent(f"cannot rename table {table.name!r}: table {plan.new_name!r} already exists")
            new_tablets: list[NewTablet] = []
            if plan.placement != table.placement:  # a new policy must be one the cluster can meet
                view.sync_tservers(self._ts)
                changed = [plan.placement.table, *plan.placement.ranges.values()]
                self._check_policies(view, changed, table.num_replicas, table.name)
            if plan.added:
                live = self._live_tservers(view, table.num_replicas)
                options = self._manager.options.catalog
                check_num_replicas(table.num_replicas, live, options)
                check_tablet_count(len(plan.added), table.num_replicas, live, options)
                new_tablets = self._place(
                    view, table.table_id, plan.added, table.num_replicas, plan.placement, table.name
                )
            dropped = self._dropped_tablets(view, table, plan.dropped)
            await self._manager.replicate(view, alter_table_write(table, plan, new_tablets, dropped))
            return table

        table = await self._manager.exclusive(write)
        version = table.version + 1
        log.info("altered table %s (%s) to version %d", table.name, table.table_id, version)
        self._tasks.kick()
        if request.wait:
            await self._wait_altered(table.table_id, version, timeout_s)
        return version

    def _dropped_tablets(self, view: LeaderView, table: TableInfo, dropped: Sequence[Partition]) -> list[TabletInfo]:
        wanted = set(dropped)
        out = [t for t in view.catalog.tablets_of(table.table_id) if t.partition in wanted]
        if len(out) != len(wanted):
            raise AssertionError(f"table {table.name!r}: dropped ranges do not match its tablets")
        return out

    async def _wait_altered(self, table_id: str, version: int, timeout_s: float | None) -> None:
        def done(view: LeaderView) -> bool:
            table = view.catalog.table(table_id)
            if table is None or table.removed or table.version > version:
                return True
            return view.alter_done(table)

        await self._manager.wait_until(
            done, timeout_s, f"every tablet of table {table_id} to reach schema version {version}"
        )
