"""Fake masters and tablet servers on real loopback RPC, for testing the client alone.

They implement just enough of MasterService and TabletServerService, as
docs/cluster_contract.md describes them, to exercise the client: leader hints, locations
with a TTL, writes with per-row errors, scans with continuation and ordered resumption.
Replication is perfect and instant: all replicas of a tablet share one dict of rows.  The
servers run on their own event loop in a background thread, so synchronous and asynchronous
clients can both use them; tests change the fake's state through :meth:`FakeCluster.do`,
which runs a function on that loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
import uuid as uuidlib
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import pyarrow as pa

from nyala.common.hostport import HostPort
from nyala.errors import (
    AlreadyPresent,
    InvalidArgument,
    NotFound,
    NotTheLeader,
    ServiceUnavailable,
    TimedOut,
)
from nyala.proto import common_pb2, rpc_pb2
from nyala.proto import consensus_pb2 as cspb
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext, RpcMethod, RpcServer
from nyala.schema import (
    ColumnSchema,
    OpType,
    Partition,
    Partitioner,
    Predicate,
    Schema,
    decode_row_operations,
    encode_key,
)
from nyala.services import (
    ALTER_TABLE,
    CONNECT_TO_MASTER,
    CREATE_TABLE,
    DELETE_TABLE,
    DELETE_TABLET,
    GET_CONSENSUS_STATE,
    GET_TABLE_LOCATIONS,
    GET_TABLE_SCHEMA,
    GET_TABLET_LOCATIONS,
    GET_TABLET_SERVER_STATUS,
    LIST_MASTERS,
    LIST_TABLES,
    LIST_TABLET_SERVERS,
    LIST_TABLETS,
    SCAN,
    WRITE,
)

T = TypeVar("T")


@dataclasses.dataclass
class FakeTablet:
    id: str
    partition: Partition
    replicas: list[str]
    leader: str
    rows: dict[tuple[Any, ...], dict[str, Any]] = dataclasses.field(default_factory=dict)
    op_index: int = 0


@dataclasses.dataclass
class FakeTable:
    id: str
    name: str
    schema: Schema
    partitioner: Partitioner
    num_replicas: int
    version: int = 0
    tablets: list[FakeTablet] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class FakeScanner:
    rows: list[dict[str, Any]]
    columns: list[str]
    ordered: bool
    tablet: FakeTablet
    position: int = 0
    next_seq: int = 1


class FakeTServer:
    """One tablet server: serves Write, Scan, ListTablets, GetConsensusState,
    GetTabletServerStatus and DeleteTablet (which only marks the replica TOMBSTONED)."""

    def __init__(self, cluster: FakeCluster, uuid: str) -> None:
        self.cluster = cluster
        self.uuid = uuid
        self.rpc = RpcServer()
        self.address: HostPort | None = None
        self.scanners: dict[bytes, FakeScanner] = {}
        self.calls: dict[str, int] = {}
        #: Raise this on the next Write/Scan calls (each entry used once).
        self.write_failures: list[Exception] = []
        self.scan_failures: list[Exception] = []
        #: Apply this many Writes and then answer TIMED_OUT (a lost response).
        self.lose_write_responses = 0
        self.min_applied_seen: list[int] = []
        #: The request id of every Write received, in order.
        self.request_ids: list[tpb.RequestIdPB] = []
        self.rpc.add_method(WRITE, self.write)
        self.rpc.add_method(SCAN, self.scan)
        self.rpc.add_method(LIST_TABLETS, self.list_tablets)
        self.rpc.add_method(GET_CONSENSUS_STATE, self.consensus_state)
        self.rpc.add_method(GET_TABLET_SERVER_STATUS, self.status)
        self.rpc.add_method(DELETE_TABLET, self.delete_tablet)
        #: Every DeleteTablet request served.
        self.deletes: list[tpb.DeleteTabletRequestPB] = []

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _tablet(self, tablet_id: str) -> FakeTablet:
        tablet = self.cluster.tablets.get(tablet_id)
        if tablet is None or self.uuid not in tablet.replicas:
            raise NotFound(f"tablet {tablet_id} is not hosted here")
        return tablet

    # --- writes ----------------------------------------------------------------------------

    def write(self, request: tpb.WriteRequestPB, ctx: CallContext) -> tpb.WriteResponsePB:
        self._count("Write")
        self.request_ids.append(request.request_id)
        if self.write_failures:
            raise self.write_failures.pop(0)
        tablet = self._tablet(request.tablet_id)
        if tablet.leader != self.uuid:
            raise NotTheLeader("not the leader", leader_hint=tablet.leader)
        table = self.cluster.table_of(tablet)
        if request.schema_version < table.version:
            raise InvalidArgument(f"schema version {request.schema_version} is older than {table.version}")
        if not ctx.request_sidecars:
            raise InvalidArgument("no row operations in sidecar 0")
        ops = decode_row_operations(ctx.request_sidecars[0], table.schema)
        errors = []
        for i, (op, row) in enumerate(zip(ops.ops.to_pylist(), ops.data.to_pylist(), strict=True)):
            error = self._apply(table, tablet, OpType(op), row)
            if error is not None:
                errors.append(tpb.RowErrorPB(row_index=i, code=error[0], message=error[1]))
        tablet.op_index += 1
        if self.lose_write_responses > 0:
            self.lose_write_responses -= 1
            raise TimedOut("the response was lost")
        return tpb.WriteResponsePB(per_row_errors=errors, op_index=tablet.op_index)

    def _apply(self, table: FakeTable, tablet: FakeTablet, op: OpType, row: dict[str, Any]) -> tuple[int, str] | None:
        if not tablet.partition.contains_key(table.partitioner.partition_key(row)):
            return rpc_pb2.INVALID_ARGUMENT, "row is not in this tablet's partition"
        key = tuple(row[c] for c in table.schema.key_names)
        exists = key in tablet.rows
        base = op.base
        if base is OpType.INSERT:
            if exists:
                return None if op.ignores_errors else (rpc_pb2.ALREADY_PRESENT, f"key {key} already present")
            tablet.rows[key] = _full_row(table.schema, row)
        elif base is OpType.UPSERT:
            tablet.rows[key] = {**tablet.rows[key], **row} if exists else _full_row(table.schema, row)
        elif base is OpType.UPDATE:
            if not exists:
                return None if op.ignores_errors else (rpc_pb2.NOT_FOUND, f"key {key} not found")
            tablet.rows[key].update(row)
        else:
            if not exists:
                return None if op.ignores_errors else (rpc_pb2.NOT_FOUND, f"key {key} not found")
            del tablet.rows[key]
        return None

    # --- scans -----------------------------------------------------------------------------

    def scan(self, request: tpb.ScanRequestPB, ctx: CallContext) -> tpb.ScanResponsePB:
        self._count("Scan")
        if self.scan_failures:
            raise self.scan_failures.pop(0)
        if request.HasField("new_scan_request"):
            scanner_id = uuidlib.uuid4().hex.encode()
            self.scanners[scanner_id] = self._open(request.new_scan_request)
        else:
            scanner_id = request.scanner_id
            scanner = self.scanners.get(scanner_id)
            if scanner is None:
                raise NotFound("scanner expired")
            if request.call_seq_id != scanner.next_seq:
                raise InvalidArgument(f"call_seq_id {request.call_seq_id}, expected {scanner.next_seq}")
            scanner.next_seq += 1
            if request.close_scanner:
                del self.scanners[scanner_id]
                return tpb.ScanResponsePB()
        return self._batch(scanner_id, ctx)

    def _open(self, new: tpb.NewScanRequestPB) -> FakeScanner:
        tablet = self._tablet(new.tablet_id)
        if new.leader_only and tablet.leader != self.uuid:
            raise NotTheLeader("not the leader", leader_hint=tablet.leader)
        self.min_applied_seen.append(new.min_applied_index)
        table = self.cluster.table_of(tablet)
        schema = table.schema
        predicates = [Predicate.from_dict(d, schema) for d in json.loads(new.predicates or b"[]")]
        types = [c.type for c in schema.key_columns]
        items = sorted(tablet.rows.items(), key=lambda kv: encode_key(types, kv[0]))
        rows = []
        for key, row in items:
            encoded = encode_key(types, key)
            if new.lower_bound_primary_key and encoded < new.lower_bound_primary_key:
                continue
            if new.exclusive_upper_bound_primary_key and encoded >= new.exclusive_upper_bound_primary_key:
                continue
            if new.last_primary_key and encoded <= new.last_primary_key:
                continue
            if all(p.matches(row.get(p.column)) for p in predicates):
                rows.append(row)
        if new.limit:
            rows = rows[: new.limit]
        columns = list(new.projected_columns) or schema.names
        for c in columns:
            schema.index_of(c)
        return FakeScanner(rows, columns, new.order_by_primary_key, tablet)

    def _batch(self, scanner_id: bytes, ctx: CallContext) -> tpb.ScanResponsePB:
        scanner = self.scanners[scanner_id]
        table = self.cluster.table_of(scanner.tablet)
        chunk = scanner.rows[scanner.position : scanner.position + self.cluster.rows_per_batch]
        scanner.position += len(chunk)
        more = scanner.position < len(scanner.rows)
        response = tpb.ScanResponsePB(
            scanner_id=scanner_id if more else b"", has_more_results=more, num_rows=len(chunk)
        )
        if chunk:
            arrow_schema = pa.schema([pa.field(c, table.schema.column(c).arrow_type) for c in scanner.columns])
            batch = pa.Table.from_pylist([{c: r.get(c) for c in scanner.columns} for r in chunk], schema=arrow_schema)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, arrow_schema) as writer:
                writer.write_table(batch)
            ctx.add_sidecar(sink.getvalue().to_pybytes())
            if scanner.ordered:
                types = [c.type for c in table.schema.key_columns]
                last = chunk[-1]
                response.last_primary_key = encode_key(types, [last[k] for k in table.schema.key_names])
        if not more:
            del self.scanners[scanner_id]
        return response

    # --- admin -----------------------------------------------------------------------------

    def list_tablets(self, request: tpb.ListTabletsRequestPB, ctx: CallContext) -> tpb.ListTabletsResponsePB:
        out = []
        for tablet in self.cluster.tablets.values():
            if self.uuid in tablet.replicas:
                table = self.cluster.table_of(tablet)
                state = self.cluster.tablet_states.get((self.uuid, tablet.id), tpb.RUNNING)
                out.append(
                    tpb.ListTabletsResponsePB.StatusPB(
                        tablet_id=tablet.id, table_id=table.id, table_name=table.name, state=state
                    )
                )
        return tpb.ListTabletsResponsePB(tablets=out)

    def status(
        self, request: tpb.GetTabletServerStatusRequestPB, ctx: CallContext
    ) -> tpb.GetTabletServerStatusResponsePB:
        return tpb.GetTabletServerStatusResponsePB(instance=common_pb2.NodeInstancePB(permanent_uuid=self.uuid))

    def delete_tablet(self, request: tpb.DeleteTabletRequestPB, ctx: CallContext) -> tpb.DeleteTabletResponsePB:
        if request.dest_uuid != self.uuid:
            raise InvalidArgument(f"request is for server {request.dest_uuid!r} but reached server {self.uuid!r}")
        self._tablet(request.tablet_id)
        self.deletes.append(request)
        self.cluster.tablet_states[(self.uuid, request.tablet_id)] = tpb.TOMBSTONED
        return tpb.DeleteTabletResponsePB()

    def consensus_state(
        self, request: cpb.GetConsensusStateRequestPB, ctx: CallContext
    ) -> cpb.GetConsensusStateResponsePB:
        out = []
        for tablet in self.cluster.tablets.values():
            if self.uuid not in tablet.replicas or (request.tablet_ids and tablet.id not in request.tablet_ids):
                continue
            leader = self.cluster.reported_leaders.get((self.uuid, tablet.id), tablet.leader)
            last_term, last_index = self.cluster.log_positions.get((self.uuid, tablet.id), (1, tablet.op_index))
            config = cspb.RaftConfigPB(
                peers=[cspb.RaftPeerPB(permanent_uuid=u, member_type=cspb.VOTER) for u in tablet.replicas]
            )
            out.append(
                cpb.ConsensusStatePB(
                    tablet_id=tablet.id,
                    current_term=1,
                    leader_uuid=leader,
                    role=common_pb2.LEADER if leader == self.uuid else common_pb2.FOLLOWER,
                    committed_config=config,
                    last_term=last_term,
                    last_index=last_index,
                )
            )
        return cpb.GetConsensusStateResponsePB(tablets=out)


def _full_row(schema: Schema, row: dict[str, Any]) -> dict[str, Any]:
    return {c.name: row.get(c.name, c.default) for c in schema.columns}


class FakeMaster:
    """One master; only the cluster's leader serves catalog calls."""

    def __init__(self, cluster: FakeCluster, index: int) -> None:
        self.cluster = cluster
        self.index = index
        self.uuid = f"{index:032x}"
        self.rpc = RpcServer()
        self.address: HostPort | None = None
        self.calls: dict[str, int] = {}
        methods: list[tuple[RpcMethod[Any, Any], Callable[[Any, CallContext], Any]]] = [
            (CONNECT_TO_MASTER, self.connect_to_master),
            (GET_TABLE_SCHEMA, self.get_table_schema),
            (GET_TABLE_LOCATIONS, self.get_table_locations),
            (GET_TABLET_LOCATIONS, self.get_tablet_locations),
            (CREATE_TABLE, self.create_table),
            (DELETE_TABLE, self.delete_table),
            (ALTER_TABLE, self.alter_table),
            (LIST_TABLES, self.list_tables),
            (LIST_TABLET_SERVERS, self.list_tablet_servers),
            (LIST_MASTERS, self.list_masters),
        ]
        for method, handler in methods:
            self.rpc.add_method(method, self._wrap(method.name, handler))

    def _wrap(self, name: str, handler: Callable[[Any, CallContext], Any]) -> Callable[[Any, CallContext], Any]:
        def wrapped(request: Any, ctx: CallContext) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if name not in ("ConnectToMaster", "ListMasters") and not self._follower_may_answer(request):
                self._check_leader()
            return handler(request, ctx)

        return wrapped

    def _follower_may_answer(self, request: Any) -> bool:
        """A follower read: the request allows at least this master's staleness."""
        bound = getattr(request, "max_staleness_ms", 0)
        if not bound or self.cluster.leader_master == self.index:
            return False
        staleness = self.cluster.follower_staleness_ms.get(self.index, 0)
        if staleness > bound:
            raise NotTheLeader(
                f"catalog may be {staleness} ms old, more than the {bound} ms the request allows",
                leader_hint=str(self.cluster.masters[self.cluster.leader_master].address),
            )
        return True

    def _check_leader(self) -> None:
        cluster = self.cluster
        if cluster.leader_master != self.index:
            raise NotTheLeader("not the leader master", leader_hint=str(cluster.masters[cluster.leader_master].address))
        if cluster.unavailable_catalog_calls > 0:
            cluster.unavailable_catalog_calls -= 1
            raise ServiceUnavailable("catalog is loading")

    def connect_to_master(self, request: Any, ctx: CallContext) -> mpb.ConnectToMasterResponsePB:
        leads = self.cluster.leader_master == self.index
        hint = self.cluster.masters[self.cluster.leader_master].address if self.cluster.hints else None
        return mpb.ConnectToMasterResponsePB(
            role=common_pb2.LEADER if leads else common_pb2.FOLLOWER,
            cluster_id="fake-cluster",
            leader_address=str(hint) if hint and not leads else "",
        )

    def _table(self, ident: common_pb2.TableIdentifierPB) -> FakeTable:
        for table in self.cluster.tables.values():
            by_id = ident.table_id and table.id == ident.table_id
            if by_id or (not ident.table_id and table.name == ident.table_name):
                return table
        raise NotFound(f"table {ident.table_name or ident.table_id!r} not found")

    def get_table_schema(self, request: mpb.GetTableSchemaRequestPB, ctx: CallContext) -> mpb.GetTableSchemaResponsePB:
        table = self._table(request.table)
        return mpb.GetTableSchemaResponsePB(
            table_id=table.id,
            table_name=table.name,
            schema=table.schema.to_json(),
            partitioner=table.partitioner.to_json(),
            num_replicas=table.num_replicas,
            schema_version=table.version,
            create_table_done=True,
        )

    def get_table_locations(
        self, request: mpb.GetTableLocationsRequestPB, ctx: CallContext
    ) -> mpb.GetTableLocationsResponsePB:
        table = self._table(request.table)
        start, end = request.partition_key_start, request.partition_key_end
        tablets = sorted(table.tablets, key=lambda t: t.partition.partition_key_start)
        chosen = [
            t
            for t in tablets
            if (not t.partition.partition_key_end or t.partition.partition_key_end > start)
            and (not end or t.partition.partition_key_start < end)
        ]
        for i, t in enumerate(chosen):  # like the real master: stop before a tablet not running yet
            if t.id in self.cluster.creating_tablets:
                if i == 0:
                    raise ServiceUnavailable(f"tablet {t.id} is not running yet")
                chosen = chosen[:i]
                break
        if request.max_returned_locations:
            chosen = chosen[: request.max_returned_locations]
        servers = list(self.cluster.tservers)
        response = mpb.GetTableLocationsResponsePB(ttl_millis=self.cluster.ttl_millis)
        for ts in self.cluster.tservers.values():
            assert ts.address is not None
            hp = common_pb2.HostPortPB(host=ts.address.host, port=ts.address.port)
            response.ts_infos.add(permanent_uuid=ts.uuid, rpc_addresses=[hp])
        for t in chosen:
            replicas = [
                mpb.TabletLocationsPB.Replica(
                    ts_info_idx=servers.index(u),
                    role=common_pb2.LEADER if u == self.cluster.master_view_leader(t) else common_pb2.FOLLOWER,
                )
                for u in t.replicas
            ]
            response.tablet_locations.add(
                tablet_id=t.id, partition=json.dumps(t.partition.to_dict()).encode(), replicas=replicas
            )
        return response

    def get_tablet_locations(
        self, request: mpb.GetTabletLocationsRequestPB, ctx: CallContext
    ) -> mpb.GetTabletLocationsResponsePB:
        response = mpb.GetTabletLocationsResponsePB()
        servers = list(self.cluster.tservers)
        for ts in self.cluster.tservers.values():
            assert ts.address is not None
            hp = common_pb2.HostPortPB(host=ts.address.host, port=ts.address.port)
            response.ts_infos.add(permanent_uuid=ts.uuid, rpc_addresses=[hp])
        for tablet_id in request.tablet_ids:
            t = self.cluster.tablets.get(tablet_id)
            if t is None:
                response.errors.add(tablet_id=tablet_id, message=f"tablet {tablet_id} not found")
                continue
            replicas = [
                mpb.TabletLocationsPB.Replica(
                    ts_info_idx=servers.index(u),
                    role=common_pb2.LEADER if u == self.cluster.master_view_leader(t) else common_pb2.FOLLOWER,
                )
                for u in t.replicas
            ]
            response.tablet_locations.add(
                tablet_id=t.id, partition=json.dumps(t.partition.to_dict()).encode(), replicas=replicas
            )
        return response

    def create_table(self, request: mpb.CreateTableRequestPB, ctx: CallContext) -> mpb.CreateTableResponsePB:
        if any(t.name == request.name for t in self.cluster.tables.values()):
            raise AlreadyPresent(f"table {request.name!r} already exists")
        schema = Schema.from_json(request.schema)
        partitioner = Partitioner.from_json(request.partitioner)
        servers = list(self.cluster.tservers)
        if request.num_replicas not in (1, 3, 5) or request.num_replicas > len(servers):
            raise InvalidArgument(f"num_replicas {request.num_replicas} with {len(servers)} tablet servers")
        table = FakeTable(uuidlib.uuid4().hex, request.name, schema, partitioner, request.num_replicas)
        for partition in partitioner.partitions:
            self.cluster.add_tablet(table, partition)
        self.cluster.tables[table.id] = table
        if self.cluster.lose_ddl_responses > 0:
            self.cluster.lose_ddl_responses -= 1
            raise TimedOut("the response was lost")
        return mpb.CreateTableResponsePB(table_id=table.id)

    def delete_table(self, request: mpb.DeleteTableRequestPB, ctx: CallContext) -> mpb.DeleteTableResponsePB:
        table = self._table(request.table)
        for t in table.tablets:
            del self.cluster.tablets[t.id]
        del self.cluster.tables[table.id]
        if self.cluster.lose_ddl_responses > 0:
            self.cluster.lose_ddl_responses -= 1
            raise TimedOut("the response was lost")
        return mpb.DeleteTableResponsePB()

    def alter_table(self, request: mpb.AlterTableRequestPB, ctx: CallContext) -> mpb.AlterTableResponsePB:
        table = self._table(request.table)
        schema, partitioner = table.schema, table.partitioner
        added, dropped = [], []
        for step in request.steps:
            kind = step.WhichOneof("step")
            if kind == "add_column":
                schema = schema.add_column(ColumnSchema.from_dict(json.loads(step.add_column.column)))
            elif kind == "drop_column":
                schema = schema.drop_column(step.drop_column.name)
            elif kind == "rename_column":
                schema = schema.rename_column(step.rename_column.old_name, step.rename_column.new_name)
            else:
                r = step.add_range_partition if kind == "add_range_partition" else step.drop_range_partition
                lo = json.loads(r.lower_bound) if r.lower_bound else None
                hi = json.loads(r.upper_bound) if r.upper_bound else None
                bounds = partitioner.bounds(lo, hi)
                if kind == "add_range_partition":
                    partitioner = partitioner.add_range(bounds)
                    added.append(bounds)
                else:
                    partitioner = partitioner.drop_range(bounds)
                    dropped.append(bounds)
        table.schema = schema
        table.partitioner = Partitioner(schema, partitioner.partition_schema, partitioner.ranges)
        for bounds in added:
            for p in table.partitioner.partitions_of_range(bounds):
                self.cluster.add_tablet(table, p)
        for t in [t for t in table.tablets if t.partition.range in dropped]:
            table.tablets.remove(t)
            del self.cluster.tablets[t.id]
        if request.new_table_name:
            table.name = request.new_table_name
        table.version += 1
        return mpb.AlterTableResponsePB(schema_version=table.version)

    def list_tables(self, request: mpb.ListTablesRequestPB, ctx: CallContext) -> mpb.ListTablesResponsePB:
        return mpb.ListTablesResponsePB(
            tables=[
                mpb.ListTablesResponsePB.TableInfo(
                    id=t.id, name=t.name, num_tablets=len(t.tablets), num_replicas=t.num_replicas
                )
                for t in self.cluster.tables.values()
                if request.name_filter in t.name
            ]
        )

    def list_tablet_servers(
        self, request: mpb.ListTabletServersRequestPB, ctx: CallContext
    ) -> mpb.ListTabletServersResponsePB:
        out = []
        for ts in self.cluster.tservers.values():
            assert ts.address is not None
            out.append(
                mpb.ListTabletServersResponsePB.Entry(
                    instance=common_pb2.NodeInstancePB(permanent_uuid=ts.uuid, instance_seqno=1),
                    registration=common_pb2.ServerRegistrationPB(
                        rpc_addresses=[common_pb2.HostPortPB(host=ts.address.host, port=ts.address.port)]
                    ),
                    live=ts.uuid not in self.cluster.dead_tservers,
                    millis_since_heartbeat=5,
                    num_live_replicas=sum(ts.uuid in t.replicas for t in self.cluster.tablets.values()),
                )
            )
        return mpb.ListTabletServersResponsePB(servers=out)

    def list_masters(self, request: mpb.ListMastersRequestPB, ctx: CallContext) -> mpb.ListMastersResponsePB:
        out = []
        for m in self.cluster.masters:
            assert m.address is not None
            out.append(
                mpb.MasterEntryPB(
                    instance=common_pb2.NodeInstancePB(permanent_uuid=m.uuid),
                    registration=common_pb2.ServerRegistrationPB(
                        rpc_addresses=[common_pb2.HostPortPB(host=m.address.host, port=m.address.port)]
                    ),
                    role=common_pb2.LEADER if m.index == self.cluster.leader_master else common_pb2.FOLLOWER,
                    term=3,
                    member_type=cspb.VOTER,
                )
            )
        return mpb.ListMastersResponsePB(masters=out)


class FakeCluster:
    """Masters and tablet servers on 127.0.0.1, running on a background event loop."""

    def __init__(self, num_masters: int = 1, num_tservers: int = 3) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-cluster", daemon=True)
        self._thread.start()
        self.tables: dict[str, FakeTable] = {}
        self.tablets: dict[str, FakeTablet] = {}
        self.leader_master = 0
        self.hints = True
        #: Follower reads: master index -> how stale its catalog is (default 0: it answers any bound).
        self.follower_staleness_ms: dict[int, int] = {}
        self.unavailable_catalog_calls = 0
        #: Apply this many CreateTable/DeleteTable calls and then answer TIMED_OUT.
        self.lose_ddl_responses = 0
        self.ttl_millis = 300_000
        self.rows_per_batch = 1000
        self.dead_tservers: set[str] = set()
        #: Tablets the master treats as still being created (not in locations yet).
        self.creating_tablets: set[str] = set()
        #: (tserver uuid, tablet id) -> leader that replica reports (for ksck tests).
        self.reported_leaders: dict[tuple[str, str], str] = {}
        self.tablet_states: dict[tuple[str, str], Any] = {}
        #: (tserver uuid, tablet id) -> (last term, last index) that replica reports.
        self.log_positions: dict[tuple[str, str], tuple[int, int]] = {}
        #: Tablet id -> the leader the master reports (defaults to the real leader).
        self.master_leaders: dict[str, str] = {}
        self._placement = itertools.count()
        self.masters = [FakeMaster(self, i) for i in range(num_masters)]
        self.tservers = {u: FakeTServer(self, u) for u in (f"{i + 1:032x}" for i in range(num_tservers))}
        self.do(self._start)

    async def _start(self) -> None:
        for master in self.masters:
            master.address = await master.rpc.start("127.0.0.1:0")
        for ts in self.tservers.values():
            ts.address = await ts.rpc.start("127.0.0.1:0")

    def do(self, function: Callable[[], Any]) -> Any:
        """Run ``function`` (or the coroutine it returns) on the fake's loop and return the result."""

        async def runner() -> Any:
            result = function()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        future: Future[Any] = asyncio.run_coroutine_threadsafe(runner(), self.loop)
        return future.result(timeout=30)

    @property
    def master_addresses(self) -> str:
        return ",".join(str(m.address) for m in self.masters)

    def table(self, name: str) -> FakeTable:
        return next(t for t in self.tables.values() if t.name == name)

    def table_of(self, tablet: FakeTablet) -> FakeTable:
        return next(t for t in self.tables.values() if tablet in t.tablets)

    def master_view_leader(self, tablet: FakeTablet) -> str:
        return self.master_leaders.get(tablet.id, tablet.leader)

    def add_tablet(self, table: FakeTable, partition: Partition) -> FakeTablet:
        servers = list(self.tservers)
        start = next(self._placement)
        replicas = [servers[(start + i) % len(servers)] for i in range(table.num_replicas)]
        tablet = FakeTablet(uuidlib.uuid4().hex, partition, replicas, replicas[0])
        table.tablets.append(tablet)
        self.tablets[tablet.id] = tablet
        return tablet

    def all_rows(self, name: str) -> dict[tuple[Any, ...], dict[str, Any]]:
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for tablet in self.table(name).tablets:
            out.update(tablet.rows)
        return out

    def stop_tserver(self, uuid: str) -> None:
        self.dead_tservers.add(uuid)
        self.do(self.tservers[uuid].rpc.stop)

    def close(self) -> None:
        async def stop_all() -> None:
            servers = [m.rpc for m in self.masters] + [t.rpc for t in self.tservers.values()]
            for server in servers:
                await server.stop()

        self.do(stop_all)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
