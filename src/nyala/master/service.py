"""MasterService: every RPC handler of the master, thin over the catalog manager and the registries.

Served by every master at all times: Ping, GetMasterRegistration, ConnectToMaster,
ListMasters, ListTabletServers and TSHeartbeat (ListTabletServers adds the catalog's view of
each server, its state and replica count, only from a view that may serve catalog reads).
AddMaster and RemoveMaster need the leader (``nyala.master.membership``).
ListTables, GetTableSchema, GetTableLocations and GetTabletLocations need the ready leader
(:meth:`CatalogManager.leader` raises NotTheLeader with the leader's address, or
ServiceUnavailable), unless the request carries ``max_staleness_ms`` and this master's applied
catalog is provably that fresh (:mod:`.follower_reads`).  Everything else needs the ready
leader.  Handlers that only read memory run inline; the others run as tasks under the
caller's deadline.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from nyala.catalog import placement_pb, range_placement_pbs
from nyala.common.hostport import HostPort
from nyala.errors import NotTheLeader, NyalaError, ServiceUnavailable
from nyala.master.locations import CatalogReadView, table_locations, tablet_locations
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc import CallContext, RpcServer
from nyala.services import (
    ADD_MASTER,
    ALTER_TABLE,
    CHANGE_TSERVER_STATE,
    CONNECT_TO_MASTER,
    CREATE_TABLE,
    DELETE_TABLE,
    GET_MASTER_REGISTRATION,
    GET_TABLE_LOCATIONS,
    GET_TABLE_SCHEMA,
    GET_TABLET_LOCATIONS,
    IS_CREATE_TABLE_DONE,
    LIST_MASTERS,
    LIST_TABLES,
    LIST_TABLET_SERVERS,
    REBALANCE_LEASE,
    REMOVE_MASTER,
    TS_HEARTBEAT,
    UNREGISTER_TSERVER,
)

if TYPE_CHECKING:
    from nyala.master.server import Master

__all__ = ["MasterService"]

# Answer a waiting request a little before the caller's deadline, so it gets our TimedOut
# (naming what it waited for) rather than the RPC layer's.
_DEADLINE_MARGIN_S = 0.05
_DEADLINE_MARGIN_SHARE = 0.1


def _wait_budget(ctx: CallContext) -> float | None:
    remaining = ctx.remaining()
    if remaining is None:
        return None
    return max(0.0, remaining - _DEADLINE_MARGIN_S - min(1.0, _DEADLINE_MARGIN_SHARE * remaining))


def _peer_host(peer: str) -> str:
    """The host of a connection's peer, ``"host:port"`` or ``"[v6]:port"``; "" when unknown ("?")."""
    if peer == "?":
        return ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")


class MasterService:
    """Binds the master's handlers to its RPC server."""

    def __init__(self, master: Master) -> None:
        self.m = master

    def register(self, rpc: RpcServer) -> None:
        rpc.add_method(GET_MASTER_REGISTRATION, self.get_master_registration)
        rpc.add_method(CONNECT_TO_MASTER, self.connect_to_master)
        rpc.add_method(LIST_MASTERS, self.list_masters)
        rpc.add_method(LIST_TABLET_SERVERS, self.list_tablet_servers)
        rpc.add_method(TS_HEARTBEAT, self.m.heartbeats.handle)
        rpc.add_method(REBALANCE_LEASE, self.rebalance_lease)
        rpc.add_method(CREATE_TABLE, self.create_table)
        rpc.add_method(IS_CREATE_TABLE_DONE, self.is_create_table_done)
        rpc.add_method(DELETE_TABLE, self.delete_table)
        rpc.add_method(ALTER_TABLE, self.alter_table)
        rpc.add_method(LIST_TABLES, self.list_tables)
        rpc.add_method(GET_TABLE_SCHEMA, self.get_table_schema)
        rpc.add_method(GET_TABLE_LOCATIONS, self.get_table_locations)
        rpc.add_method(GET_TABLET_LOCATIONS, self.get_tablet_locations)
        rpc.add_method(CHANGE_TSERVER_STATE, self.change_tserver_state)
        rpc.add_method(UNREGISTER_TSERVER, self.unregister_tserver)
        rpc.add_method(ADD_MASTER, self.add_master)
        rpc.add_method(REMOVE_MASTER, self.remove_master)

    # -- served by every master ---------------------------------------------------------------

    def get_master_registration(
        self, request: mpb.GetMasterRegistrationRequestPB, ctx: CallContext
    ) -> mpb.GetMasterRegistrationResponsePB:
        cm = self.m.catalog_manager
        return mpb.GetMasterRegistrationResponsePB(
            instance=self.m.instance,
            registration=self.m.registration(),
            role=cm.role,
            cluster_id=cm.cluster_id,
            term=cm.term,
        )

    async def connect_to_master(
        self, request: mpb.ConnectToMasterRequestPB, ctx: CallContext
    ) -> mpb.ConnectToMasterResponsePB:
        # The client's location, by the address it connects from (seed 000); "" when unknown.
        mapper = self.m.locations
        host = _peer_host(ctx.peer)
        client_location = "" if mapper is None or not host else await mapper.location_of_client(host)
        cm = self.m.catalog_manager
        # Kudu: only a ready leader calls itself LEADER, so clients never pick a leader that cannot serve.
        role = (
            common_pb2.LEADER if cm.leader_ready else (cm.role if cm.role != common_pb2.LEADER else common_pb2.FOLLOWER)
        )
        return mpb.ConnectToMasterResponsePB(
            role=role,
            cluster_id=cm.cluster_id,
            master_addresses=[common_pb2.HostPortPB(host=a.host, port=a.port) for a in self.m.peers.addresses],
            leader_address=cm.leader_address(),
            client_location=client_location,
        )

    async def list_masters(self, request: mpb.ListMastersRequestPB, ctx: CallContext) -> mpb.ListMastersResponsePB:
        timeout = min(ctx.remaining() or 2.0, 2.0)
        entries = await asyncio.gather(*(self._master_entry(a, timeout) for a in self.m.peers.addresses))
        membership = self.m.membership
        for entry in entries:
            entry.member_type = membership.member_type(entry.instance.permanent_uuid)  # type: ignore[assignment]
        replica = self.m.catalog_manager.replica
        index = 0 if replica is None else replica.committed_config.opid_index
        return mpb.ListMastersResponsePB(masters=entries, config_opid_index=index)

    async def _master_entry(self, address: HostPort, timeout_s: float) -> mpb.MasterEntryPB:
        if address == self.m.peers.self_address:
            cm = self.m.catalog_manager
            return mpb.MasterEntryPB(
                instance=self.m.instance, registration=self.m.registration(), role=cm.role, term=cm.term
            )
        try:
            answer = await self.m.messenger.call(
                address, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB(), timeout=timeout_s
            )
        except NyalaError as e:
            return mpb.MasterEntryPB(
                registration=common_pb2.ServerRegistrationPB(
                    rpc_addresses=[common_pb2.HostPortPB(host=address.host, port=address.port)]
                ),
                error=f"{type(e).__name__}: {e}",
            )
        # Each master reports its own term: a follower knows it from its sys-catalog replica.
        return mpb.MasterEntryPB(
            instance=answer.instance, registration=answer.registration, role=answer.role, term=answer.term
        )

    def list_tablet_servers(
        self, request: mpb.ListTabletServersRequestPB, ctx: CallContext
    ) -> mpb.ListTabletServersResponsePB:
        ts = self.m.ts_manager
        now = ts.clock()
        try:
            view: CatalogReadView | None = self._read_view(request.max_staleness_ms)
        except NyalaError:
            view = None  # registrations and liveness only: every master knows those
        counts = {} if view is None else view.catalog.replica_counts()
        response = mpb.ListTabletServersResponsePB(catalog_known=view is not None)
        for d in ts.all():
            response.servers.add(
                instance=common_pb2.NodeInstancePB(permanent_uuid=d.uuid, instance_seqno=d.instance_seqno),
                registration=d.registration,
                millis_since_heartbeat=int(d.since_heartbeat_s(now) * 1000),
                location=d.location,
                live=ts.is_live(d),
                num_live_replicas=d.num_live_tablets,
                state=mpb.NONE if view is None else view.catalog.tserver_state(d.uuid),
                num_replicas=counts.get(d.uuid, 0),
            )
        return response

    # -- catalog reads: the leader, or a follower within the request's staleness bound ---------

    def _read_view(self, max_staleness_ms: int) -> CatalogReadView:
        """The ready leader's view; with a staleness bound, else this master's applied catalog if
        it is provably that fresh (NotTheLeader with the leader's address otherwise)."""
        cm = self.m.catalog_manager
        if not max_staleness_ms:
            return cm.leader()
        try:
            return cm.leader()
        except (NotTheLeader, ServiceUnavailable):
            return self.m.follower_catalog.view(max_staleness_ms, cm.leader_address())

    def list_tables(self, request: mpb.ListTablesRequestPB, ctx: CallContext) -> mpb.ListTablesResponsePB:
        view = self._read_view(request.max_staleness_ms)
        response = mpb.ListTablesResponsePB()
        for table in view.catalog.live_tables():
            if request.name_filter in table.name:
                response.tables.add(
                    id=table.table_id,
                    name=table.name,
                    num_tablets=len(view.catalog.tablets_of(table.table_id)),
                    num_replicas=table.num_replicas,
                )
        return response

    def get_table_schema(self, request: mpb.GetTableSchemaRequestPB, ctx: CallContext) -> mpb.GetTableSchemaResponsePB:
        view = self._read_view(request.max_staleness_ms)
        table = view.catalog.find_table(request.table)
        return mpb.GetTableSchemaResponsePB(
            table_id=table.table_id,
            table_name=table.name,
            schema=table.entry.schema,
            partitioner=table.entry.partitioner,
            num_replicas=table.num_replicas,
            schema_version=table.version,
            create_table_done=view.create_done(table),
            placement=placement_pb(table.placement.table),
            range_placements=range_placement_pbs(table.placement, table.partitioner),
        )

    def get_table_locations(
        self, request: mpb.GetTableLocationsRequestPB, ctx: CallContext
    ) -> mpb.GetTableLocationsResponsePB:
        view = self._read_view(request.max_staleness_ms)
        return table_locations(view, self.m.ts_manager, request, self.m.master_options.table_locations_ttl_ms)

    def get_tablet_locations(
        self, request: mpb.GetTabletLocationsRequestPB, ctx: CallContext
    ) -> mpb.GetTabletLocationsResponsePB:
        view = self._read_view(request.max_staleness_ms)
        return tablet_locations(view, self.m.ts_manager, list(request.tablet_ids))

    # -- leader only -----------------------------------------------------------------------------

    async def create_table(self, request: mpb.CreateTableRequestPB, ctx: CallContext) -> mpb.CreateTableResponsePB:
        table_id = await self.m.ddl.create_table(request, _wait_budget(ctx))
        return mpb.CreateTableResponsePB(table_id=table_id)

    def is_create_table_done(
        self, request: mpb.IsCreateTableDoneRequestPB, ctx: CallContext
    ) -> mpb.IsCreateTableDoneResponsePB:
        return mpb.IsCreateTableDoneResponsePB(done=self.m.ddl.is_create_table_done(request.table))

    async def delete_table(self, request: mpb.DeleteTableRequestPB, ctx: CallContext) -> mpb.DeleteTableResponsePB:
        await self.m.ddl.delete_table(request)
        return mpb.DeleteTableResponsePB()

    async def alter_table(self, request: mpb.AlterTableRequestPB, ctx: CallContext) -> mpb.AlterTableResponsePB:
        version = await self.m.ddl.alter_table(request, _wait_budget(ctx))
        return mpb.AlterTableResponsePB(schema_version=version)

    async def change_tserver_state(
        self, request: mpb.ChangeTServerStateRequestPB, ctx: CallContext
    ) -> mpb.ChangeTServerStateResponsePB:
        changed = await self.m.tserver_lifecycle.change_state(request)
        return mpb.ChangeTServerStateResponsePB(changed=changed)

    async def unregister_tserver(
        self, request: mpb.UnregisterTServerRequestPB, ctx: CallContext
    ) -> mpb.UnregisterTServerResponsePB:
        held = await self.m.tserver_lifecycle.unregister(request)
        return mpb.UnregisterTServerResponsePB(num_replicas=held)

    async def add_master(self, request: mpb.AddMasterRequestPB, ctx: CallContext) -> mpb.AddMasterResponsePB:
        return await self.m.membership.add_master(request)

    async def remove_master(self, request: mpb.RemoveMasterRequestPB, ctx: CallContext) -> mpb.RemoveMasterResponsePB:
        return await self.m.membership.remove_master(request)

    def rebalance_lease(self, request: mpb.RebalanceLeaseRequestPB, ctx: CallContext) -> mpb.RebalanceLeaseResponsePB:
        """Take, renew or release a CLI rebalance's lease (the auto rebalancer pauses while one is held)."""
        self.m.catalog_manager.leader()  # only the leader's auto rebalancer runs, so only it holds leases
        granted_s = self.m.rebalance_lease.grant(request.holder, request.duration_ms / 1000)
        return mpb.RebalanceLeaseResponsePB(
            granted_ms=int(granted_s * 1000),
            auto_rebalancing_enabled=self.m.master_options.auto_rebalancing_enabled,
        )
