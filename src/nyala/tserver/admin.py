"""TabletServerAdminService (CreateTablet, DeleteTablet, AlterSchema) and the per-tablet
ConsensusService calls (GetConsensusState, LeaderStepDown); the config-change calls are in
:mod:`nyala.tserver.consensus_admin`.

The master calls the admin methods and retries them, so each is idempotent: creating a
tablet that exists with the same members succeeds, deleting a tombstone again succeeds, a
schema version already in place is a no-op.  Every request is validated in full before
anything changes; ``dest_uuid`` guards against a master talking to a stale address.
"""

from __future__ import annotations

import json
from typing import Any

from nyala.common.hostport import HostPort
from nyala.consensus.core import RaftConfig, decode_config
from nyala.consensus.runtime import PeerDirectory
from nyala.errors import InvalidArgument, NyalaError
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext, RpcServer
from nyala.schema import Partition, PartitionSchema, Schema
from nyala.services import ALTER_SCHEMA, CREATE_TABLET, DELETE_TABLET, GET_CONSENSUS_STATE, LEADER_STEP_DOWN
from nyala.tserver.manager import TabletManager
from nyala.tserver.metadata import TABLET_ID_PATTERN, TabletMetadata
from nyala.tserver.partition_filter import PartitionFilter
from nyala.tserver.scanners import ScannerRegistry

__all__ = ["AdminService", "parse_create_tablet"]


def parse_create_tablet(request: tpb.CreateTabletRequestPB, self_uuid: str) -> tuple[TabletMetadata, RaftConfig]:
    """Validate a CreateTablet request in full; InvalidArgument names the first problem."""
    if not TABLET_ID_PATTERN.match(request.tablet_id):
        raise InvalidArgument(f"tablet id {request.tablet_id!r} must be 1-128 letters, digits, '_' or '-'")
    if not request.table_id:
        raise InvalidArgument("CreateTablet needs a table_id")
    if request.schema_version < 0:
        raise InvalidArgument(f"schema_version must be >= 0, got {request.schema_version}")
    schema = Schema.from_json(request.schema)
    partition_schema = PartitionSchema.from_dict(_json_object(request.partition_schema, "partition_schema"))
    partition = Partition.from_dict(_json_object(request.partition, "partition"))
    PartitionFilter(schema, partition_schema, partition)  # checks that the three agree
    try:
        config = decode_config(request.config.SerializeToString())
    except NyalaError as e:
        raise InvalidArgument(f"CreateTablet config is invalid: {e}") from None
    if not config.voters:
        raise InvalidArgument("CreateTablet config has no voters")
    if not config.contains(self_uuid):
        raise InvalidArgument(f"CreateTablet config {list(config.peer_ids)} does not include this server {self_uuid}")
    meta = TabletMetadata(
        tablet_id=request.tablet_id,
        table_id=request.table_id,
        table_name=request.table_name,
        partition=partition,
        partition_schema=partition_schema,
        schema=schema,
        schema_version=request.schema_version,
    )
    return meta, config


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"{what} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    return value


class AdminService:
    """Tablet lifecycle calls from the master and per-tablet consensus calls."""

    def __init__(self, uuid: str, tablets: TabletManager, scanners: ScannerRegistry, directory: PeerDirectory) -> None:
        self._uuid = uuid
        self._tablets = tablets
        self._scanners = scanners
        self._directory = directory

    def register(self, rpc: RpcServer) -> None:
        rpc.add_method(CREATE_TABLET, self.create_tablet)
        rpc.add_method(DELETE_TABLET, self.delete_tablet)
        rpc.add_method(ALTER_SCHEMA, self.alter_schema)
        rpc.add_method(GET_CONSENSUS_STATE, self.get_consensus_state)
        rpc.add_method(LEADER_STEP_DOWN, self.leader_step_down)

    def _check_dest(self, dest_uuid: str, *, required: bool = True) -> None:
        if dest_uuid != self._uuid and (required or dest_uuid):
            raise InvalidArgument(f"request is for server {dest_uuid!r} but reached server {self._uuid!r}")

    async def create_tablet(self, request: tpb.CreateTabletRequestPB, ctx: CallContext) -> tpb.CreateTabletResponsePB:
        self._check_dest(request.dest_uuid)
        meta, config = parse_create_tablet(request, self._uuid)
        peers = []
        for peer in request.peer_addresses:
            if not peer.permanent_uuid or not peer.rpc_address.host or not 0 < peer.rpc_address.port < 65536:
                raise InvalidArgument(f"peer address entry {peer} needs a uuid, a host and a port")
            peers.append((peer.permanent_uuid, HostPort(peer.rpc_address.host, peer.rpc_address.port)))
        for uuid, address in peers:
            self._directory.learn(uuid, address)
        await self._tablets.create(meta, config)
        return tpb.CreateTabletResponsePB()

    async def delete_tablet(self, request: tpb.DeleteTabletRequestPB, ctx: CallContext) -> tpb.DeleteTabletResponsePB:
        self._check_dest(request.dest_uuid)
        self._tablets.get(request.tablet_id)
        cas = request.cas_config_opid_index_less_or_equal
        self._scanners.close_tablet(request.tablet_id)
        await self._tablets.delete(
            request.tablet_id,
            tombstone=request.tombstone,
            reason=request.reason,
            cas_config_index=cas if cas > 0 else None,
        )
        return tpb.DeleteTabletResponsePB()

    async def alter_schema(self, request: tpb.AlterSchemaRequestPB, ctx: CallContext) -> tpb.AlterSchemaResponsePB:
        self._check_dest(request.dest_uuid)
        tablet = self._tablets.get(request.tablet_id)
        schema = Schema.from_json(request.schema)
        if request.schema_version < 0:
            raise InvalidArgument(f"schema_version must be >= 0, got {request.schema_version}")
        await tablet.alter_schema(schema, request.schema_version)
        return tpb.AlterSchemaResponsePB()

    def get_consensus_state(
        self, request: cpb.GetConsensusStateRequestPB, ctx: CallContext
    ) -> cpb.GetConsensusStateResponsePB:
        self._check_dest(request.dest_uuid, required=False)
        if request.tablet_ids:
            tablets = [self._tablets.get(t) for t in request.tablet_ids]
        else:
            tablets = [t for t in self._tablets.tablets() if t.raft is not None]
        response = cpb.GetConsensusStateResponsePB()
        for tablet in sorted(tablets, key=lambda t: t.tablet_id):
            state = tablet.consensus_state()
            if state is not None:
                response.tablets.append(state)
        return response

    def leader_step_down(self, request: cpb.LeaderStepDownRequestPB, ctx: CallContext) -> cpb.LeaderStepDownResponsePB:
        self._check_dest(request.dest_uuid, required=False)
        raft = self._tablets.get(request.tablet_id).require_leader()
        if request.abrupt:
            raft.step_down()
        else:
            raft.transfer_leadership(request.new_leader_uuid)
        return cpb.LeaderStepDownResponsePB()
