"""The master's web pages: tables, a table's tablets, tablet servers, masters, locations, tasks.

Every page reads what the master keeps in memory: the leader's catalog and replica reports
(:class:`~nyala.master.leader.LeaderView`), the tablet-server registry
(:class:`~nyala.master.ts_manager.TSManager`) and the master peers.  Catalog pages need the
ready leader; a follower answers them 503 naming the leader's RPC address (the tablet
servers and masters pages answer on every master).  Long lists are paged.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence

from nyala.catalog import TableInfo, TabletInfo
from nyala.common.hostport import HostPort
from nyala.errors import NotFound, NyalaError
from nyala.master.auto_rebalancer import AutoRebalancer
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import LeaderView
from nyala.master.peers import MasterPeers
from nyala.master.replica_cache import ReplicaCache
from nyala.master.replica_management import Repair
from nyala.master.replicas import ReplicaReport
from nyala.master.tablet_tasks import TabletTasks
from nyala.master.ts_manager import TSDescriptor, TSManager
from nyala.placement import Verdict, check_constraint, check_tablet
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.services import GET_MASTER_REGISTRATION
from nyala.web import Badge, Fields, Link, Page, PageRequest, Table, WebServer
from nyala.web.view import Cell, paged

__all__ = ["MasterPages"]

#: Longest a masters page waits for another master's answer.
PEER_TIMEOUT_S = 1.0
#: Tablets of a table whose placement is checked on the locations page, at most (a summary).
NO_LOCATION = "(none)"


def role_name(role: int) -> str:
    return str(common_pb2.RaftRolePB.Name(role)) if role in common_pb2.RaftRolePB.values() else str(role)


def _enum_name(enum: object, value: int) -> str:
    try:
        return str(enum.Name(value))  # type: ignore[attr-defined]
    except ValueError:
        return str(value)


def _state_badge(text: str, good: Sequence[str] = ("RUNNING",), warn: Sequence[str] = ()) -> Badge:
    if text in good:
        return Badge(text, "good")
    return Badge(text, "warn" if text in warn else "bad")


class MasterPages:
    """Builds the master's pages; :meth:`add_to` registers them on the web server."""

    def __init__(
        self,
        uuid: str,
        catalog_manager: CatalogManager,
        ts_manager: TSManager,
        peers: MasterPeers,
        messenger: Messenger,
        fatal: Callable[[], BaseException | None],
        tasks: TabletTasks | None = None,
        rebalancer: AutoRebalancer | None = None,
    ) -> None:
        """``fatal`` tells why the sys catalog could not open (None while it opens or once it did);
        ``tasks`` and ``rebalancer`` show the replica work in progress on ``/tasks``."""
        self.tasks = tasks
        self.rebalancer = rebalancer
        self._replicas = ReplicaCache()
        self.uuid = uuid
        self.catalog_manager = catalog_manager
        self.ts_manager = ts_manager
        self.peers = peers
        self.messenger = messenger
        self.fatal = fatal

    def add_to(self, web: WebServer) -> None:
        web.page("/tables", self.tables, paged=True, nav="Tables")
        web.page("/tables/{table_id}", self.table, paged=True)
        web.page("/tservers", self.tservers, paged=True, nav="Tablet servers")
        web.page("/masters", self.masters, nav="Masters")
        web.page("/locations", self.locations, nav="Locations")
        web.page("/tasks", self.replica_work, paged=True, nav="Tasks")

    def _view(self) -> LeaderView:
        return self.catalog_manager.leader()  # NotTheLeader (503 naming the leader) on followers

    # -- tables ------------------------------------------------------------------------------

    def tables(self, request: PageRequest) -> Page:
        view = self._view()
        offset, limit = request.query.page()
        tables = view.catalog.live_tables()

        def row(table: TableInfo) -> list[Cell]:
            tablets = view.catalog.tablets_of(table.table_id)
            by_code = Counter(t.state for t in tablets)  # named once per state, not per tablet
            states = {_enum_name(mpb.SysTabletsEntryPB.State, code): n for code, n in by_code.items()}
            state = _enum_name(mpb.SysTablesEntryPB.State, table.entry.state)
            return [
                Link(table.name, f"/tables/{table.table_id}"),
                table.table_id,
                _state_badge(state, warn=("PREPARING", "ALTERING")),
                table.num_replicas,
                len(tablets),
                ", ".join(f"{n} {s}" for s, n in sorted(states.items())),
                _partitioning(table),
                table.version,
            ]

        columns = ["name", "id", "state", "replication_factor", "tablets", "tablet_states", "partitioning", "version"]
        return Page(
            "Tables",
            [
                Fields("summary", {"tables": len(tables), "tablets": sum(1 for t in view.catalog.all_tablets())}),
                paged("tables", columns, tables, row, offset, limit),
            ],
        )

    def table(self, request: PageRequest) -> Page:
        view = self._view()
        table_id = request.path["table_id"]
        table = view.catalog.table(table_id) or view.catalog.table_by_name(table_id)
        if table is None or table.removed:
            raise NotFound(f"no table with id or name {table_id!r}")
        offset, limit = request.query.page()
        tablets = view.catalog.tablets_of(table.table_id)
        schema = Table(
            "schema",
            ["column", "type", "nullable", "key"],
            [[c.name, str(c.type), c.nullable, table.schema.is_key(c.name)] for c in table.schema.columns],
            "Schema",
        )
        about = Fields(
            "table",
            {
                "name": table.name,
                "id": table.table_id,
                "state": _enum_name(mpb.SysTablesEntryPB.State, table.entry.state),
                "replication_factor": table.num_replicas,
                "schema_version": table.version,
                "partitioning": _partitioning(table),
                "tablets": len(tablets),
                "placement_policy": _placement_text(table),
            },
        )
        columns = ["tablet_id", "partition", "state", "leader", "replicas"]
        return Page(
            f"Table {table.name}",
            [about, schema, paged("tablets", columns, tablets, lambda t: self._tablet_row(view, t), offset, limit,
                                  "Tablets")],
        )  # fmt: skip

    def _tablet_row(self, view: LeaderView, tablet: TabletInfo) -> list[Cell]:
        reports = view.replicas.reports(tablet.tablet_id)
        leader = view.leader_of(tablet)
        replicas = [self._replica_text(uuid, reports.get(uuid), leader) for uuid in tablet.replicas]
        state = _enum_name(mpb.SysTabletsEntryPB.State, tablet.state)
        return [
            tablet.tablet_id,
            _partition_text(tablet),
            _state_badge(state, warn=("CREATING",)),
            self._server_name(leader) if leader else Badge("no leader", "bad"),
            replicas,
        ]

    def _replica_text(self, uuid: str, report: ReplicaReport | None, leader: str) -> str:
        ts = self.ts_manager
        descriptor = ts.get(uuid)
        where = "unknown server" if descriptor is None else f"{descriptor.address} {descriptor.location or ''}".strip()
        if report is None:
            health = "no report"
        elif report.error:
            health = f"{_enum_name(tpb.TabletStatePB, report.state)}: {report.error}"
        else:
            health = _enum_name(tpb.TabletStatePB, report.state)
        if descriptor is not None and not ts.is_live(descriptor):
            health = "server down"
        role = role_name(report.role) if report is not None else ("LEADER" if uuid == leader else "?")
        return f"{uuid[:8]} {where} {role} {health}"

    def _server_name(self, uuid: str) -> str:
        address = self.ts_manager.address_of(uuid)
        return f"{uuid[:8]} ({address})" if address is not None else uuid[:8]

    # -- tablet servers -----------------------------------------------------------------------

    def tservers(self, request: PageRequest) -> Page:
        ts = self.ts_manager
        now = ts.clock()
        try:
            view: LeaderView | None = self._view()
        except NyalaError:
            view = None  # a follower knows registrations and liveness only
        counts = {} if view is None else self._replica_counts(view)
        servers = ts.all()
        offset, limit = request.query.page()

        def row(d: TSDescriptor) -> list[Cell]:
            live = ts.is_live(d)
            state = "" if view is None else _enum_name(mpb.TServerStatePB, view.catalog.tserver_state(d.uuid))
            return [
                d.uuid,
                str(d.address),
                d.location,
                Badge("live", "good") if live else Badge("dead", "bad"),
                Badge(state, "warn") if state and state != "NONE" else state,
                round(d.since_heartbeat_s(now), 1),
                counts.get(d.uuid) if view is not None else None,
                d.num_live_tablets,
                d.registration.software_version,
            ]

        live = sum(1 for d in servers if ts.is_live(d))
        columns = ["uuid", "rpc_address", "location", "liveness", "state", "seconds_since_heartbeat",
                   "replicas", "live_tablets_reported", "version"]  # fmt: skip
        return Page(
            "Tablet servers",
            [
                Fields(
                    "summary",
                    {
                        "registered": len(servers),
                        "live": live,
                        "dead": len(servers) - live,
                        "catalog_known": view is not None,
                    },
                ),
                paged("tservers", columns, servers, row, offset, limit),
            ],
        )

    def _replica_counts(self, view: LeaderView) -> dict[str, int]:
        """Replicas per tablet server in the committed configs of live tablets (``replica_counts``
        of the catalog, with each tablet's replicas decoded once per change)."""
        counts: dict[str, int] = {}
        for tablet, replicas in self._replicas.walk(view.catalog.all_tablets()):
            if not tablet.dead:
                for uuid in replicas:
                    counts[uuid] = counts.get(uuid, 0) + 1
        return counts

    # -- masters ------------------------------------------------------------------------------

    async def masters(self, request: PageRequest) -> Page:
        rows = await asyncio.gather(*(self._master_row(a) for a in self.peers.addresses))
        return Page("Masters", [Table("masters", ["uuid", "rpc_address", "role", "term", "error"], rows)])

    async def _master_row(self, address: HostPort) -> list[Cell]:
        if address == self.peers.self_address:
            cm = self.catalog_manager
            return [self.uuid, str(address), _role_badge(role_name(cm.role)), cm.term, ""]
        try:
            answer = await self.messenger.call(
                address, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB(), timeout=PEER_TIMEOUT_S
            )
        except NyalaError as e:
            return [self.peers.uuid_of(address) or "", str(address), Badge("unreachable", "bad"), None,
                    f"{type(e).__name__}: {e}"]  # fmt: skip
        return [answer.instance.permanent_uuid, str(address), _role_badge(role_name(answer.role)), answer.term, ""]

    # -- locations ----------------------------------------------------------------------------

    def locations(self, request: PageRequest) -> Page:
        view = self._view()
        ts = self.ts_manager
        servers = ts.all()
        location_of = {d.uuid: d.location or NO_LOCATION for d in servers}
        per_location: dict[str, list[int]] = {}  # location -> [servers, live, replicas]
        counts = self._replica_counts(view)
        for d in servers:
            entry = per_location.setdefault(location_of[d.uuid], [0, 0, 0])
            entry[0] += 1
            entry[1] += ts.is_live(d)
            entry[2] += counts.get(d.uuid, 0)
        # The same rule as ksck's (nyala.placement.check_tablet): only live servers count.
        placement_of = {d.uuid: (location_of[d.uuid], ts.is_live(d)) for d in servers}
        live_per_location = {loc: n[1] for loc, n in per_location.items() if n[1]}
        violations: list[list[Cell]] = []
        if len(per_location) > 1:
            # Unconstrained tablets share a handful of (replication factor, replicas' locations)
            # shapes: each shape is checked once, so 10,000 tablets cost 10,000 lookups.
            verdicts: dict[tuple[int, tuple[tuple[str, bool], ...]], str] = {}
            for table in view.catalog.live_tables():
                for tablet in view.catalog.tablets_of(table.table_id):
                    replicas = self._replicas.replicas(tablet)
                    constraint = table.placement.for_range(tablet.partition.range)
                    if constraint.strict:  # judged by the table's own policy (docs/placement.md)
                        where = [location_of[u] for u in replicas if u in location_of]
                        own = check_constraint(constraint, table.num_replicas, where, live_per_location)
                        if own.outside or not own.policy.met:
                            violations.append([table.name, tablet.tablet_id, own.explain(constraint)])
                        continue
                    shape = (table.num_replicas, tuple(sorted(placement_of[u] for u in replicas if u in placement_of)))
                    problem = verdicts.get(shape)
                    if problem is None:
                        check = check_tablet(table.num_replicas, replicas, placement_of)
                        problem = verdicts[shape] = "" if check.verdict is Verdict.MET else check.explain()
                    if problem:
                        violations.append([table.name, tablet.tablet_id, problem])
        rows: list[list[Cell]] = [[loc, n[0], n[1], n[2], round(n[2] / n[0], 1) if n[0] else 0.0]
                                  for loc, n in sorted(per_location.items())]  # fmt: skip
        offset, limit = request.query.page()
        return Page(
            "Locations",
            [
                Table("locations", ["location", "servers", "live_servers", "replicas", "replicas_per_server"], rows),
                Table(
                    "violations",
                    ["table", "tablet_id", "problem"],
                    violations[offset : offset + limit],
                    "Placement policy violations",
                    len(violations),
                    offset,
                    limit,
                ),
            ],
        )

    # -- replica work in progress -------------------------------------------------------------

    def replica_work(self, request: PageRequest) -> Page:
        """Tablet server calls in flight and waiting to retry, config changes owed (re-replication),
        replicas being copied, and rebalancing moves on their way (each table paged alike)."""
        view = self._view()
        offset, limit = request.query.page()
        now = asyncio.get_running_loop().time()
        in_flight = [] if self.tasks is None else sorted(self.tasks.in_flight())
        retries = [] if self.tasks is None else sorted(self.tasks.retries_pending().items())
        repairs = sorted(view.repairs.values(), key=lambda r: r.tablet_id)
        copying = sorted(view.replicas.in_state(tpb.COPYING))
        moves = [] if self.rebalancer is None else sorted(self.rebalancer.moves_in_progress())
        sent = {} if self.tasks is None else dict(self.tasks.sent)

        def table_of(tablet_id: str) -> Cell:
            tablet = view.catalog.tablet(tablet_id)
            table = view.catalog.table(tablet.table_id) if tablet is not None else None
            return Link(table.name, f"/tables/{table.table_id}") if table is not None else ""

        def task_row(key: tuple[str, str, str]) -> list[Cell]:
            kind, tablet_id, uuid = key
            return [kind, tablet_id, table_of(tablet_id), self._server_name(uuid)]

        def retry_row(item: tuple[tuple[str, str, str], float]) -> list[Cell]:
            (kind, tablet_id, uuid), at = item
            return [kind, tablet_id, table_of(tablet_id), self._server_name(uuid), round(max(0.0, at - now), 1)]

        def repair_row(repair: Repair) -> list[Cell]:
            return [repair.kind.value, repair.tablet_id, table_of(repair.tablet_id), self._server_name(repair.leader),
                    self._server_name(repair.target) if repair.target else "(placed when sent)",
                    repair.cas_config_index]  # fmt: skip

        def copy_row(item: tuple[str, str, ReplicaReport]) -> list[Cell]:
            tablet_id, uuid, report = item
            return [tablet_id, table_of(tablet_id), self._server_name(uuid), report.error]

        def move_row(item: tuple[str, int, float]) -> list[Cell]:
            tablet_id, index, age = item
            return [tablet_id, table_of(tablet_id), index, round(age, 1)]

        summary: dict[str, Cell] = {
            "calls_in_flight": len(in_flight),
            "calls_waiting_to_retry": len(retries),
            "re_replication_steps_owed": len(repairs),
            "replicas_being_copied": len(copying),
            "rebalancing_moves_settling": len(moves),
            "rebalancing_moves_started": 0 if self.rebalancer is None else self.rebalancer.moves_started,
        }
        summary.update({f"sent_{kind}": n for kind, n in sent.items()})
        tablet_server = ["kind", "tablet_id", "table", "tserver"]
        return Page(
            "Replica work in progress",
            [
                Fields("summary", summary, "Summary (counters since this master started)"),
                paged("in_flight", tablet_server, in_flight, task_row, offset, limit, "Tablet server calls in flight"),
                paged("retries", [*tablet_server, "retry_in_s"], retries, retry_row, offset, limit,
                      "Calls that failed, waiting to retry"),
                paged("repairs", ["kind", "tablet_id", "table", "leader", "target", "cas_config_index"], repairs,
                      repair_row, offset, limit, "Re-replication: config changes owed to tablets"),
                paged("copies", ["tablet_id", "table", "tserver", "error"], copying, copy_row, offset, limit,
                      "Replicas being copied (reported COPYING)"),
                paged("moves", ["tablet_id", "table", "config_index", "seconds_since_sent"], moves, move_row, offset,
                      limit, "Rebalancing moves on their way to the catalog"),
            ],
        )  # fmt: skip

    # -- health and status --------------------------------------------------------------------

    def status_fields(self) -> dict[str, Cell]:
        cm = self.catalog_manager
        return {
            "role": role_name(cm.role),
            "term": cm.term,
            "leader_ready": cm.leader_ready,
            "leader_rpc_address": cm.leader_address(),
            "masters": [str(a) for a in self.peers.addresses],
            "location": "",
        }

    def not_ready(self) -> list[str]:
        fatal = self.fatal()
        if fatal is not None:
            return [f"the sys catalog failed to open: {fatal}"]
        cm = self.catalog_manager
        if cm.replica is None:
            return ["the sys catalog is still opening"]
        if cm.role == common_pb2.LEADER and not cm.leader_ready:
            return ["elected leader, still loading the catalog"]
        if cm.role != common_pb2.LEADER and not cm.leader_address():
            return ["no leader master is known"]
        return []


def _role_badge(role: str) -> Badge:
    return Badge(role, "good" if role == "LEADER" else "plain")


def _placement_text(table: TableInfo) -> str:
    """The table's own placement policy and its ranges', for people."""
    placement = table.placement
    parts = [placement.table.describe()]
    for bounds, constraint in sorted(placement.ranges.items(), key=lambda item: (item[0].lower, item[0].upper)):
        parts.append(f"range {table.partitioner.show_range(bounds)}: {constraint.describe()}")
    return "; ".join(parts)


def _partitioning(table: TableInfo) -> str:
    schema = table.partitioner.partition_schema
    parts = [f"hash({', '.join(d.columns)}) into {d.num_buckets}" for d in schema.hash_dimensions]
    if schema.range_columns:
        parts.append(f"range({', '.join(schema.range_columns)}) in {len(table.partitioner.ranges)} ranges")
    return "; ".join(parts) or "one tablet"


def _partition_text(tablet: TabletInfo) -> str:
    p = tablet.partition
    text = f"buckets {list(p.hash_buckets)}" if p.hash_buckets else ""
    bounds = p.range
    if bounds.lower or bounds.upper:
        text += f" range [{bounds.lower.hex()[:16] or '-inf'}, {bounds.upper.hex()[:16] or '+inf'})"
    return text.strip() or "whole table"
