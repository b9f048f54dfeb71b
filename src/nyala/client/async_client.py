"""The asynchronous client: DDL, cluster listings, tables and scan tokens.

One :class:`AsyncClient` lives on one event loop (the caller's, or the background loop of the
synchronous :class:`nyala.client.Client`); its messenger, caches and sessions are used only
from that loop, so no locks are needed.  Calling it from another loop raises IllegalState.

DDL retries follow :mod:`.masters`.  CreateTable and DeleteTable retried after an attempt of
unknown outcome treat "already present" / "not found" as their own earlier attempt's success
when the table matches what was asked for; every other conflict is reported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import ssl
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from nyala.common.hostport import HostPort, parse_address, parse_address_list
from nyala.errors import AlreadyPresent, IllegalState, InvalidArgument, NotFound
from nyala.proto import common_pb2
from nyala.proto import consensus_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.schema import ColumnSchema, Partitioner, RangeBounds, Schema
from nyala.schema.partition import show_value
from nyala.services import (
    ADD_MASTER,
    ALTER_TABLE,
    CHANGE_TSERVER_STATE,
    CREATE_TABLE,
    DELETE_TABLE,
    GET_TABLE_SCHEMA,
    GET_TABLET_LOCATIONS,
    LIST_MASTERS,
    LIST_TABLES,
    LIST_TABLET_SERVERS,
    REBALANCE_LEASE,
    REMOVE_MASTER,
    UNREGISTER_TSERVER,
)

from ._context import ClientContext
from ._retry import Backoff, Deadline
from .info import MasterInfo, ReplicaInfo, TableSummary, TabletInfo, TabletServerInfo, role_name
from .masters import CallTracker, MasterProxy
from .meta_cache import MetaCache, TableInfo
from .options import ClientOptions
from .placement import PlacementLike, PlacementPolicy
from .replicas import local_host_addresses
from .scan_spec import ScanSpec
from .scanner import AsyncScanner, ScanToken
from .schemas import Partitioning, RangePartition, RangeValues, schema_from_arrow
from .table import AsyncTable

__all__ = ["DEFAULT_MASTER_PORT", "AsyncClient", "connect_async", "show_range", "show_value"]

DEFAULT_MASTER_PORT = 7051

ColumnLike = ColumnSchema | tuple[str, str] | tuple[str, str, bool] | tuple[str, str, bool, Any]
#: A range partition to add or drop: a RangePartition (with bound types) or a ``(lower, upper)`` pair.
RangeLike = RangePartition | tuple[RangeValues, RangeValues]


class AsyncClient:
    """A connection to a Nyala cluster for asyncio code; ``await AsyncClient.connect(masters)``."""

    def __init__(
        self,
        master_addresses: str | Sequence[str | HostPort],
        *,
        options: ClientOptions | None = None,
        ssl_context: ssl.SSLContext | None = None,
        master_read_staleness_ms: int | None = None,
    ) -> None:
        self.options = with_read_staleness(options or ClientOptions(), master_read_staleness_ms)
        addresses = _parse_masters(master_addresses)
        rng = random.Random()
        messenger = Messenger(self.options.rpc, ssl_context)
        masters = MasterProxy(addresses, messenger, self.options, rng)
        self._ctx = ClientContext(
            messenger=messenger,
            masters=masters,
            meta=MetaCache(masters, self.options),
            options=self.options,
            rng=rng,
            salt=rng.getrandbits(32),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @classmethod
    async def connect(
        cls,
        master_addresses: str | Sequence[str | HostPort],
        *,
        timeout_s: float | None = None,
        options: ClientOptions | None = None,
        ssl_context: ssl.SSLContext | None = None,
        master_read_staleness_ms: int | None = None,
        lazy: bool = False,
    ) -> AsyncClient:
        """A client that has found the leader master (TimedOut names every master's answer).

        ``master_read_staleness_ms`` (default: the options', 0) lets any master whose catalog
        is provably at most that old answer catalog reads (``ClientOptions.master_read_staleness_ms``).
        ``lazy``: do not look for the leader master now but at the first master call (as Kudu's
        Java client does), for a client that may need none: one that only reads scan tokens.
        """
        client = cls(
            master_addresses,
            options=options,
            ssl_context=ssl_context,
            master_read_staleness_ms=master_read_staleness_ms,
        )
        try:
            await client.start(timeout_s, find_leader=not lazy)
        except BaseException:
            await client.close()
            raise
        return client

    async def start(self, timeout_s: float | None = None, *, find_leader: bool = True) -> None:
        """Bind to the running loop, learn this host's addresses and find the leader master
        (now, or with ``find_leader`` false at the first master call)."""
        self._loop = asyncio.get_running_loop()
        self._ctx.local_hosts = await self._loop.run_in_executor(None, local_host_addresses)
        if find_leader:
            deadline = Deadline(self._admin_timeout(timeout_s), "connecting to the masters")
            await self._ctx.masters.find_leader(deadline)

    async def close(self) -> None:
        """Close every connection; the client cannot be used afterwards."""
        self._closed = True
        if self._ctx.write_batcher is not None:
            self._ctx.write_batcher.close(IllegalState("the client is closed"))
        await self._ctx.messenger.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- state -----------------------------------------------------------------------------

    @property
    def master_addresses(self) -> list[str]:
        return [str(a) for a in self._ctx.masters.addresses]

    @property
    def leader_master(self) -> str | None:
        leader = self._ctx.masters.leader
        return None if leader is None else str(leader)

    @property
    def cluster_id(self) -> str:
        return self._ctx.masters.cluster_id

    @property
    def client_location(self) -> str:
        return self._ctx.masters.client_location

    @property
    def messenger(self) -> Messenger:
        """The client's RPC connections, for operator tools that call servers directly (ksck)."""
        return self._ctx.messenger

    def _check(self) -> None:
        if self._closed:
            raise IllegalState("the client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise IllegalState("this AsyncClient belongs to another event loop; use it only from that loop")

    def _admin_timeout(self, timeout_s: float | None) -> float:
        return timeout_s if timeout_s is not None else self.options.admin_operation_timeout_ms / 1000

    def _deadline(self, timeout_s: float | None, what: str) -> Deadline:
        self._check()
        return Deadline(self._admin_timeout(timeout_s), what)

    # --- DDL -------------------------------------------------------------------------------

    async def create_table(
        self,
        name: str,
        schema: Schema | pa.Schema,
        partitioning: Partitioning | Partitioner | None = None,
        *,
        primary_key: Sequence[str] | str | None = None,
        num_replicas: int = 3,
        placement: PlacementLike | None = None,
        range_placements: Sequence[tuple[RangeLike, PlacementLike]] = (),
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> AsyncTable:
        """Create a table; ``wait`` returns only once every tablet has a leader.

        ``placement``: the table's own placement policy (a :class:`PlacementPolicy`, a location
        or a list of locations: the subtrees its replicas must stay in); ``range_placements``:
        ``(range, policy)`` pairs giving a range partition a policy of its own, replacing the
        table's for that range.  The master refuses a policy it cannot meet (too few live tablet
        servers in the subtrees) and creates nothing.
        """
        deadline = self._deadline(timeout_s, f"creating table {name!r}")
        table_schema = _table_schema(schema, primary_key)
        partitioner = _partitioner(table_schema, partitioning)
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise InvalidArgument(f"num_replicas must be a positive number (1, 3 or 5), got {num_replicas!r}")
        request = mpb.CreateTableRequestPB(
            name=name,
            schema=table_schema.to_json(),
            partitioner=partitioner.to_json(),
            num_replicas=num_replicas,
            wait=wait,
        )
        if placement is not None:
            request.placement.CopyFrom(PlacementPolicy.of(placement).to_pb())
        info = TableInfo("", name, table_schema, partitioner, 0, num_replicas)
        for spec, policy in range_placements:
            request.range_placements.add(
                range=_range_pb(info, RangePartition.of(spec)), policy=PlacementPolicy.of(policy).to_pb()
            )
        tracker = CallTracker()
        try:
            await self._ctx.masters.call(CREATE_TABLE, request, deadline, tracker)
        except AlreadyPresent:
            if not tracker.ambiguous or not await self._is_same_table(name, table_schema, partitioner, deadline):
                raise
        if wait:
            await self._wait_created(name, deadline)
        return AsyncTable(self, await self._ctx.meta.table(deadline, name=name, refresh=True))

    async def _is_same_table(self, name: str, schema: Schema, partitioner: Partitioner, deadline: Deadline) -> bool:
        """Whether the existing table is the one our own earlier attempt created."""
        info = await self._ctx.meta.table(deadline, name=name, refresh=True)
        same_columns = [(c.name, c.type, c.nullable) for c in info.schema.columns] == [
            (c.name, c.type, c.nullable) for c in schema.columns
        ]
        return (
            same_columns
            and info.partitioner.to_json()
            == Partitioner(info.schema, partitioner.partition_schema, partitioner.ranges).to_json()
        )

    async def _wait_created(self, name: str, deadline: Deadline) -> None:
        backoff = Backoff(self.options, self._ctx.rng)
        request = mpb.GetTableSchemaRequestPB(table=common_pb2.TableIdentifierPB(table_name=name))
        while not (await self._ctx.masters.call(GET_TABLE_SCHEMA, request, deadline)).create_table_done:
            await backoff.wait(deadline)

    async def delete_table(self, name: str, *, timeout_s: float | None = None) -> None:
        """Delete a table (its tablets are deleted from the tablet servers in the background)."""
        deadline = self._deadline(timeout_s, f"deleting table {name!r}")
        request = mpb.DeleteTableRequestPB(table=common_pb2.TableIdentifierPB(table_name=name))
        tracker = CallTracker()
        try:
            await self._ctx.masters.call(DELETE_TABLE, request, deadline, tracker)
        except NotFound:
            if not tracker.ambiguous:
                raise
        finally:
            self._ctx.meta.forget_table(name=name)

    async def alter_table(
        self,
        name: str,
        *,
        rename_to: str | None = None,
        add_columns: Sequence[ColumnLike] = (),
        drop_columns: Sequence[str] = (),
        rename_columns: dict[str, str] | None = None,
        add_range_partitions: Sequence[RangeLike] = (),
        drop_range_partitions: Sequence[RangeLike] = (),
        set_placement: PlacementLike | None = None,
        set_range_placements: Sequence[tuple[RangeLike, PlacementLike]] = (),
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> int:
        """Alter a table in one catalog operation; returns the new schema version.

        ``set_placement`` replaces the table's placement policy (``PlacementPolicy()`` clears
        it); ``set_range_placements`` replaces the policies of the ranges named (an empty
        policy makes a range follow the table's again).  Replicas already outside a new policy
        are moved by the rebalancer's policy fixer (the master's, or ``nyala cluster rebalance``).

        A range partition is a ``(lower, upper)`` pair (``[lower, upper)``, None unbounded) or a
        :class:`RangePartition` with Kudu's bound types; a range to drop must match an existing
        range exactly.  Steps apply in order: add and drop columns, rename columns, add ranges,
        drop ranges.
        """
        deadline = self._deadline(timeout_s, f"altering table {name!r}")
        info = await self._ctx.meta.table(deadline, name=name, refresh=True)
        steps = _alter_steps(
            info, add_columns, drop_columns, rename_columns or {}, add_range_partitions, drop_range_partitions
        )
        step = mpb.AlterTableStepPB
        if set_placement is not None:
            steps.append(step(set_placement=step.SetPlacement(policy=PlacementPolicy.of(set_placement).to_pb())))
        for spec, policy in set_range_placements:
            set_range = step.SetPlacement(
                policy=PlacementPolicy.of(policy).to_pb(), range=_range_pb(info, RangePartition.of(spec))
            )
            steps.append(step(set_placement=set_range))
        if not steps and not rename_to:
            raise InvalidArgument(f"alter_table({name!r}) was given nothing to change")
        request = mpb.AlterTableRequestPB(
            table=common_pb2.TableIdentifierPB(table_id=info.id), new_table_name=rename_to or "", steps=steps, wait=wait
        )
        try:
            response = await self._ctx.masters.call(ALTER_TABLE, request, deadline)
        finally:
            self._ctx.meta.forget_table(table_id=info.id)
        return response.schema_version

    # --- tables ----------------------------------------------------------------------------

    async def open_table(self, name: str, *, timeout_s: float | None = None) -> AsyncTable:
        """The table named ``name``, with its current schema; NotFound when there is none."""
        deadline = self._deadline(timeout_s, f"opening table {name!r}")
        return AsyncTable(self, await self._ctx.meta.table(deadline, name=name, refresh=True))

    async def table_exists(self, name: str, *, timeout_s: float | None = None) -> bool:
        try:
            await self.open_table(name, timeout_s=timeout_s)
        except NotFound:
            return False
        return True

    async def list_tables(self, name_filter: str = "", *, timeout_s: float | None = None) -> list[str]:
        """Names of the tables whose name contains ``name_filter``, sorted."""
        return sorted(t.name for t in await self.list_table_summaries(name_filter, timeout_s=timeout_s))

    async def list_table_summaries(
        self, name_filter: str = "", *, timeout_s: float | None = None
    ) -> list[TableSummary]:
        deadline = self._deadline(timeout_s, "listing tables")
        response = await self._ctx.masters.read(LIST_TABLES, mpb.ListTablesRequestPB(name_filter=name_filter), deadline)
        return sorted(
            (TableSummary(t.id, t.name, t.num_tablets, t.num_replicas) for t in response.tables), key=lambda t: t.name
        )

    async def table_tablets(self, name: str, *, timeout_s: float | None = None) -> list[TabletInfo]:
        """Every tablet of a table with its partition and replicas, fetched from the master now."""
        deadline = self._deadline(timeout_s, f"locating the tablets of {name!r}")
        info = await self._ctx.meta.table(deadline, name=name, refresh=True)
        locations = await self._ctx.meta.locations(info, deadline, refresh=True)
        out = []
        for tablet in locations.tablets:
            replicas = []
            for uuid, role in tablet.replicas:
                server = self._ctx.meta.servers.get(uuid)
                address = str(server.address) if server is not None and server.address is not None else ""
                replicas.append(ReplicaInfo(uuid, address, server.location if server else "", role_name(role)))
            described = _describe_partition(info, tablet.partition)
            out.append(TabletInfo(tablet.tablet_id, described, tuple(replicas), tablet.partition.range.lower))
        return out

    async def tablet_info(self, tablet_id: str, *, timeout_s: float | None = None) -> TabletInfo:
        """One tablet's replicas (uuid, address, role) as the leader master knows them now.

        The replicas are the tablet's committed Raft config; NotFound when the master has no
        such tablet or it was deleted.  The partition is left empty: it needs the table.
        """
        deadline = self._deadline(timeout_s, f"locating tablet {tablet_id!r}")
        response = await self._ctx.masters.read(
            GET_TABLET_LOCATIONS, mpb.GetTabletLocationsRequestPB(tablet_ids=[tablet_id]), deadline
        )
        for error in response.errors:
            raise NotFound(error.message)
        if not response.tablet_locations:
            raise NotFound(f"tablet {tablet_id} not found")
        replicas = []
        for replica in response.tablet_locations[0].replicas:
            if not 0 <= replica.ts_info_idx < len(response.ts_infos):
                raise InvalidArgument(f"tablet {tablet_id}: replica refers to unknown ts_info {replica.ts_info_idx}")
            ts = response.ts_infos[replica.ts_info_idx]
            address = (
                str(parse_address((ts.rpc_addresses[0].host, ts.rpc_addresses[0].port))) if ts.rpc_addresses else ""
            )
            replicas.append(ReplicaInfo(ts.permanent_uuid, address, ts.location, role_name(replica.role)))
        return TabletInfo(tablet_id, "", tuple(replicas))

    async def scanner_from_token(self, token: ScanToken) -> AsyncScanner:
        """A scanner reading the one tablet of ``token``.

        The token carries the table's schema and the tablet's replicas (Kudu's table and tablet
        metadata), so this asks the master nothing; only a token without them (an older
        client's) makes the table be looked up. Stale replicas or a changed schema are found
        out by the scan, which then asks the master as every scan does.
        """
        carried = token.table_info()
        cached = self._ctx.meta.cached_table(token.table_id)
        info = (
            cached
            if cached is not None and (carried is None or cached.schema_version >= carried.schema_version)
            else carried
        )
        if info is None:
            deadline = self._deadline(None, f"opening table {token.table_name!r} for a scan token")
            info = await self._ctx.meta.table(deadline, table_id=token.table_id)
        for uuid, address, location, _role in token.replicas:
            self._ctx.meta.remember_server(uuid, address, location)
        spec = ScanSpec.from_dict(token.spec, info.schema)
        return AsyncScanner(
            self._ctx, info, spec, tablet=token.tablet_location(), min_applied_index=token.min_applied_index
        )

    # --- cluster ---------------------------------------------------------------------------

    async def list_tablet_servers(self, *, timeout_s: float | None = None) -> list[TabletServerInfo]:
        deadline = self._deadline(timeout_s, "listing tablet servers")
        response = await self._ctx.masters.read(LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB(), deadline)
        return sorted(
            (
                TabletServerInfo(
                    uuid=s.instance.permanent_uuid,
                    rpc_addresses=tuple(str(parse_address((a.host, a.port))) for a in s.registration.rpc_addresses),
                    location=s.location,
                    live=s.live,
                    millis_since_heartbeat=s.millis_since_heartbeat,
                    num_live_replicas=s.num_live_replicas,
                    software_version=s.registration.software_version,
                    start_time_us=s.registration.start_time_us,
                    maintenance=s.state == mpb.MAINTENANCE_MODE,
                    num_replicas=s.num_replicas if response.catalog_known else None,
                )
                for s in response.servers
            ),
            key=lambda s: s.rpc_addresses,
        )

    async def change_tserver_state(self, uuid: str, *, maintenance: bool, timeout_s: float | None = None) -> bool:
        """Put a tablet server into maintenance mode or take it out (Kudu's ChangeTServerState).

        True when the state changed, False when it already was so.  NotFound for a uuid neither
        registered nor named by any tablet.
        """
        what = "entering" if maintenance else "exiting"
        deadline = self._deadline(timeout_s, f"{what} maintenance mode of tablet server {uuid}")
        changes = mpb.TServerStateChangePB
        change = changes.ENTER_MAINTENANCE_MODE if maintenance else changes.EXIT_MAINTENANCE_MODE
        request = mpb.ChangeTServerStateRequestPB(change=mpb.TServerStateChangePB(uuid=uuid, change=change))
        response = await self._ctx.masters.call(CHANGE_TSERVER_STATE, request, deadline)
        return response.changed

    async def unregister_tserver(self, uuid: str, *, force: bool = False, timeout_s: float | None = None) -> int:
        """Make every master forget a dead tablet server (Kudu's UnregisterTServer).

        Refused (IllegalState) while it is live, and while it holds replicas unless ``force``;
        returns the replicas it still held (non-zero only with ``force``).
        """
        deadline = self._deadline(timeout_s, f"unregistering tablet server {uuid}")
        request = mpb.UnregisterTServerRequestPB(uuid=uuid, force=force)
        response = await self._ctx.masters.call(UNREGISTER_TSERVER, request, deadline)
        return response.num_replicas

    async def rebalance_lease(self, holder: str, duration_s: float, *, timeout_s: float | None = None) -> bool:
        """Take or renew ``holder``'s rebalance lease on the leader master for ``duration_s``, or
        release it with 0: while one is held the master's auto rebalancer starts no moves.
        Returns whether the master's auto rebalancing is enabled at all."""
        deadline = self._deadline(timeout_s, f"rebalance lease of {holder!r}")
        request = mpb.RebalanceLeaseRequestPB(holder=holder, duration_ms=int(duration_s * 1000))
        response = await self._ctx.masters.call(REBALANCE_LEASE, request, deadline)
        return response.auto_rebalancing_enabled

    async def list_masters(self, *, timeout_s: float | None = None) -> list[MasterInfo]:
        deadline = self._deadline(timeout_s, "listing masters")
        response = await self._ctx.masters.call(LIST_MASTERS, mpb.ListMastersRequestPB(), deadline)
        return [
            MasterInfo(
                uuid=m.instance.permanent_uuid,
                rpc_addresses=tuple(str(parse_address((a.host, a.port))) for a in m.registration.rpc_addresses),
                role=role_name(m.role),
                term=m.term,
                error=m.error,
                member_type=cpb.MemberType.Name(m.member_type),
            )
            for m in response.masters
        ]

    async def add_master(self, address: str, *, timeout_s: float | None = None) -> tuple[str, bool]:
        """Add the running master at ``address`` (host:port) to the masters as a NON_VOTER that
        the leader promotes once caught up; returns its uuid and whether it was a member already."""
        host_port = parse_address(address)
        deadline = self._deadline(timeout_s, f"adding master {address}")
        request = mpb.AddMasterRequestPB(address=common_pb2.HostPortPB(host=host_port.host, port=host_port.port))
        response = await self._ctx.masters.call(ADD_MASTER, request, deadline)
        return response.uuid, response.already_present

    async def remove_master(self, master: str, *, timeout_s: float | None = None) -> tuple[str, bool]:
        """Remove a master named by host:port or uuid; returns its uuid and whether it had been
        removed already."""
        deadline = self._deadline(timeout_s, f"removing master {master}")
        request = mpb.RemoveMasterRequestPB()
        if ":" in master:
            host_port = parse_address(master)
            request.address.CopyFrom(common_pb2.HostPortPB(host=host_port.host, port=host_port.port))
        else:
            request.uuid = master
        response = await self._ctx.masters.call(REMOVE_MASTER, request, deadline)
        return response.uuid, response.already_removed


async def connect_async(
    master_addresses: str | Sequence[str | HostPort],
    *,
    timeout_s: float | None = None,
    options: ClientOptions | None = None,
    ssl_context: ssl.SSLContext | None = None,
    master_read_staleness_ms: int | None = None,
    lazy: bool = False,
) -> AsyncClient:
    """``await connect_async("127.0.0.1:7051")``: an AsyncClient on the running loop."""
    return await AsyncClient.connect(
        master_addresses,
        timeout_s=timeout_s,
        options=options,
        ssl_context=ssl_context,
        master_read_staleness_ms=master_read_staleness_ms,
        lazy=lazy,
    )


def with_read_staleness(options: ClientOptions, master_read_staleness_ms: int | None) -> ClientOptions:
    """``options`` with the follower-read bound replaced when one is given (validated)."""
    if master_read_staleness_ms is None:
        return options
    return dataclasses.replace(options, master_read_staleness_ms=master_read_staleness_ms)


def _parse_masters(master_addresses: str | Sequence[str | HostPort]) -> list[HostPort]:
    if isinstance(master_addresses, str):
        return parse_address_list(master_addresses, DEFAULT_MASTER_PORT)
    addresses = [parse_address(a, DEFAULT_MASTER_PORT) for a in master_addresses]
    if not addresses:
        raise InvalidArgument("expected at least one master address")
    return addresses


def _table_schema(schema: Schema | pa.Schema, primary_key: Sequence[str] | str | None) -> Schema:
    if isinstance(schema, Schema):
        if primary_key is not None and list([primary_key] if isinstance(primary_key, str) else primary_key) != (
            schema.key_names
        ):
            raise InvalidArgument(f"primary_key {primary_key!r} differs from the schema's key {schema.key_names}")
        return schema
    if isinstance(schema, pa.Schema):
        if primary_key is None:
            raise InvalidArgument("a table made from an Arrow schema needs primary_key=[...]")
        return schema_from_arrow(schema, primary_key)
    raise InvalidArgument(f"schema must be a nyala.schema.Schema or a pyarrow.Schema, not {type(schema).__name__}")


def _partitioner(schema: Schema, partitioning: Partitioning | Partitioner | None) -> Partitioner:
    if partitioning is None:
        return Partitioning().build(schema)
    if isinstance(partitioning, Partitioning):
        return partitioning.build(schema)
    if isinstance(partitioning, Partitioner):
        if partitioning.schema.key_names != schema.key_names:
            raise InvalidArgument("the Partitioner was built for a schema with a different primary key")
        return Partitioner(schema, partitioning.partition_schema, partitioning.ranges)
    raise InvalidArgument(f"partitioning must be a Partitioning or a Partitioner, not {type(partitioning).__name__}")


def _alter_steps(
    info: TableInfo,
    add_columns: Sequence[ColumnLike],
    drop_columns: Sequence[str],
    rename_columns: dict[str, str],
    add_ranges: Sequence[RangeLike],
    drop_ranges: Sequence[RangeLike],
) -> list[mpb.AlterTableStepPB]:
    step = mpb.AlterTableStepPB
    steps = [step(add_column=step.AddColumn(column=_column_json(c))) for c in add_columns]
    steps += [step(drop_column=step.DropColumn(name=c)) for c in drop_columns]
    steps += [step(rename_column=step.RenameColumn(old_name=o, new_name=n)) for o, n in rename_columns.items()]
    steps += [step(add_range_partition=_range_pb(info, RangePartition.of(r))) for r in add_ranges]
    steps += [step(drop_range_partition=_range_pb(info, RangePartition.of(r))) for r in drop_ranges]
    return steps


def _column_json(column: ColumnLike) -> bytes:
    if isinstance(column, tuple):
        if not 2 <= len(column) <= 4:
            raise InvalidArgument(f"a new column is (name, type[, nullable[, default]]), not {column!r}")
        nullable = bool(column[2]) if len(column) > 2 else True
        default = column[3] if len(column) > 3 else None
        column = ColumnSchema.of(column[0], column[1], nullable=nullable, default=default)
    if not isinstance(column, ColumnSchema):
        raise InvalidArgument(f"a new column is a ColumnSchema or a tuple, not {type(column).__name__}")
    column = column.validated()
    if not column.nullable and column.default is None:
        raise InvalidArgument(f"new non-null column {column.name!r} needs a default for existing rows")
    return json.dumps(column.to_dict()).encode()


def _range_pb(info: TableInfo, spec: RangePartition) -> mpb.AlterTableStepPB.RangePartition:
    columns = info.partitioner.partition_schema.range_columns
    if not columns:
        raise InvalidArgument(f"table {info.name!r} has no range partition columns")
    lo, hi = spec.values(info.partitioner)  # InvalidArgument for wrong arity or types
    info.partitioner.bounds(lo, hi)  # InvalidArgument when lower is not below upper

    def encode(vals: list[Any] | None) -> bytes:
        if vals is None:
            return b""
        types = [info.schema.column(c).type for c in columns]
        return json.dumps([t.to_json(v) for t, v in zip(types, vals, strict=True)]).encode()

    # Sent as [inclusive, exclusive) values: the bound types never reach the master.
    return mpb.AlterTableStepPB.RangePartition(lower_bound=encode(lo), upper_bound=encode(hi))


def _describe_partition(info: TableInfo, partition: Any) -> str:
    parts = [
        f"HASH({', '.join(d.columns)}) bucket {b}"
        for d, b in zip(info.partitioner.partition_schema.hash_dimensions, partition.hash_buckets, strict=True)
    ]
    if info.partitioner.partition_schema.range_columns:
        parts.append(f"RANGE {show_range(info.partitioner, partition.range.lower, partition.range.upper)}")
    return "; ".join(parts) or "the whole table"


def show_range(partitioner: Partitioner, lower: bytes, upper: bytes) -> str:
    """``[(2024-01-01), (+inf))``: a range partition's bounds as people write them."""
    return partitioner.show_range(RangeBounds(lower, upper))
