"""Every RPC method Nyala serves: its service, name and message types, in one place.

Servers register handlers for these descriptors and clients call them, so both ends always
agree on names and types.  Service names follow Kudu's where one exists.  This module holds
only the contract; the implementations live in ``nyala.master``, ``nyala.tserver`` and
``nyala.consensus.runtime``.

The contract includes the per-row errors of a Write answer (``RowErrorPB``), which the tablet
server builds and the client reads: both convert them here, from and to a
:class:`~nyala.schema.RowFailure` (the row's position in the Write's batch and the error,
its status code mapped by :mod:`nyala.rpc.status`), so the two ends cannot drift apart.
"""

from __future__ import annotations

from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc.method import PING, RpcMethod
from nyala.rpc.status import error_to_status, status_to_error
from nyala.schema import RowFailure

__all__ = [
    "ADD_MASTER",
    "ALTER_SCHEMA",
    "ALTER_TABLE",
    "BEGIN_TABLET_COPY_SESSION",
    "BULK_CHANGE_CONFIG",
    "CHANGE_CONFIG",
    "CHANGE_TSERVER_STATE",
    "CHECKSUM",
    "CHECK_TABLET_COPY_SESSION_ACTIVE",
    "CONNECT_TO_MASTER",
    "CREATE_TABLE",
    "CREATE_TABLET",
    "DELETE_TABLE",
    "DELETE_TABLET",
    "DELIVER",
    "END_TABLET_COPY_SESSION",
    "FETCH_DATA",
    "GET_CONSENSUS_STATE",
    "GET_MASTER_REGISTRATION",
    "GET_TABLET_LOCATIONS",
    "GET_TABLET_SERVER_STATUS",
    "GET_TABLE_LOCATIONS",
    "GET_TABLE_SCHEMA",
    "IS_CREATE_TABLE_DONE",
    "LEADER_STEP_DOWN",
    "LIST_MASTERS",
    "LIST_TABLES",
    "LIST_TABLETS",
    "LIST_TABLET_SERVERS",
    "PING",
    "REBALANCE_LEASE",
    "REMOVE_MASTER",
    "RUN_LEADER_ELECTION",
    "SCAN",
    "START_TABLET_COPY",
    "TS_HEARTBEAT",
    "UNREGISTER_TSERVER",
    "UNSAFE_CHANGE_CONFIG",
    "WRITE",
    "row_failure_from_pb",
    "row_failure_to_pb",
]

_MASTER = "MasterService"
_TSERVER = "TabletServerService"
_TSERVER_ADMIN = "TabletServerAdminService"
_CONSENSUS = "ConsensusService"
_TABLET_COPY = "TabletCopyService"

# MasterService
GET_MASTER_REGISTRATION = RpcMethod(
    _MASTER, "GetMasterRegistration", mpb.GetMasterRegistrationRequestPB, mpb.GetMasterRegistrationResponsePB
)
CONNECT_TO_MASTER = RpcMethod(_MASTER, "ConnectToMaster", mpb.ConnectToMasterRequestPB, mpb.ConnectToMasterResponsePB)
LIST_MASTERS = RpcMethod(_MASTER, "ListMasters", mpb.ListMastersRequestPB, mpb.ListMastersResponsePB)
ADD_MASTER = RpcMethod(_MASTER, "AddMaster", mpb.AddMasterRequestPB, mpb.AddMasterResponsePB)
REMOVE_MASTER = RpcMethod(_MASTER, "RemoveMaster", mpb.RemoveMasterRequestPB, mpb.RemoveMasterResponsePB)
LIST_TABLET_SERVERS = RpcMethod(
    _MASTER, "ListTabletServers", mpb.ListTabletServersRequestPB, mpb.ListTabletServersResponsePB
)
TS_HEARTBEAT = RpcMethod(_MASTER, "TSHeartbeat", mpb.TSHeartbeatRequestPB, mpb.TSHeartbeatResponsePB)
CHANGE_TSERVER_STATE = RpcMethod(
    _MASTER, "ChangeTServerState", mpb.ChangeTServerStateRequestPB, mpb.ChangeTServerStateResponsePB
)
UNREGISTER_TSERVER = RpcMethod(
    _MASTER, "UnregisterTServer", mpb.UnregisterTServerRequestPB, mpb.UnregisterTServerResponsePB
)
REBALANCE_LEASE = RpcMethod(_MASTER, "RebalanceLease", mpb.RebalanceLeaseRequestPB, mpb.RebalanceLeaseResponsePB)
CREATE_TABLE = RpcMethod(_MASTER, "CreateTable", mpb.CreateTableRequestPB, mpb.CreateTableResponsePB)
IS_CREATE_TABLE_DONE = RpcMethod(
    _MASTER, "IsCreateTableDone", mpb.IsCreateTableDoneRequestPB, mpb.IsCreateTableDoneResponsePB
)
DELETE_TABLE = RpcMethod(_MASTER, "DeleteTable", mpb.DeleteTableRequestPB, mpb.DeleteTableResponsePB)
ALTER_TABLE = RpcMethod(_MASTER, "AlterTable", mpb.AlterTableRequestPB, mpb.AlterTableResponsePB)
LIST_TABLES = RpcMethod(_MASTER, "ListTables", mpb.ListTablesRequestPB, mpb.ListTablesResponsePB)
GET_TABLE_SCHEMA = RpcMethod(_MASTER, "GetTableSchema", mpb.GetTableSchemaRequestPB, mpb.GetTableSchemaResponsePB)
GET_TABLE_LOCATIONS = RpcMethod(
    _MASTER, "GetTableLocations", mpb.GetTableLocationsRequestPB, mpb.GetTableLocationsResponsePB
)
GET_TABLET_LOCATIONS = RpcMethod(
    _MASTER, "GetTabletLocations", mpb.GetTabletLocationsRequestPB, mpb.GetTabletLocationsResponsePB
)

# TabletServerService
WRITE = RpcMethod(_TSERVER, "Write", tpb.WriteRequestPB, tpb.WriteResponsePB)
SCAN = RpcMethod(_TSERVER, "Scan", tpb.ScanRequestPB, tpb.ScanResponsePB)
LIST_TABLETS = RpcMethod(_TSERVER, "ListTablets", tpb.ListTabletsRequestPB, tpb.ListTabletsResponsePB)
CHECKSUM = RpcMethod(_TSERVER, "Checksum", tpb.ChecksumRequestPB, tpb.ChecksumResponsePB)
GET_TABLET_SERVER_STATUS = RpcMethod(
    _TSERVER, "GetStatus", tpb.GetTabletServerStatusRequestPB, tpb.GetTabletServerStatusResponsePB
)

# TabletServerAdminService
CREATE_TABLET = RpcMethod(_TSERVER_ADMIN, "CreateTablet", tpb.CreateTabletRequestPB, tpb.CreateTabletResponsePB)
DELETE_TABLET = RpcMethod(_TSERVER_ADMIN, "DeleteTablet", tpb.DeleteTabletRequestPB, tpb.DeleteTabletResponsePB)
ALTER_SCHEMA = RpcMethod(_TSERVER_ADMIN, "AlterSchema", tpb.AlterSchemaRequestPB, tpb.AlterSchemaResponsePB)

# ConsensusService
DELIVER = RpcMethod(_CONSENSUS, "Deliver", cpb.DeliverRequestPB, cpb.DeliverResponsePB)
GET_CONSENSUS_STATE = RpcMethod(
    _CONSENSUS, "GetConsensusState", cpb.GetConsensusStateRequestPB, cpb.GetConsensusStateResponsePB
)
LEADER_STEP_DOWN = RpcMethod(_CONSENSUS, "LeaderStepDown", cpb.LeaderStepDownRequestPB, cpb.LeaderStepDownResponsePB)
CHANGE_CONFIG = RpcMethod(_CONSENSUS, "ChangeConfig", cpb.ChangeConfigRequestPB, cpb.ChangeConfigResponsePB)
BULK_CHANGE_CONFIG = RpcMethod(
    _CONSENSUS, "BulkChangeConfig", cpb.BulkChangeConfigRequestPB, cpb.BulkChangeConfigResponsePB
)
RUN_LEADER_ELECTION = RpcMethod(
    _CONSENSUS, "RunLeaderElection", cpb.RunLeaderElectionRequestPB, cpb.RunLeaderElectionResponsePB
)
UNSAFE_CHANGE_CONFIG = RpcMethod(
    _CONSENSUS, "UnsafeChangeConfig", cpb.UnsafeChangeConfigRequestPB, cpb.UnsafeChangeConfigResponsePB
)
# Sent by a tablet's leader to a server that needs a copy of the tablet (Kudu puts it here too).
START_TABLET_COPY = RpcMethod(
    _CONSENSUS, "StartTabletCopy", tcpb.StartTabletCopyRequestPB, tcpb.StartTabletCopyResponsePB
)

# TabletCopyService: a copy source's sessions (tablet_copy.proto)
BEGIN_TABLET_COPY_SESSION = RpcMethod(
    _TABLET_COPY,
    "BeginTabletCopySession",
    tcpb.BeginTabletCopySessionRequestPB,
    tcpb.BeginTabletCopySessionResponsePB,
)
FETCH_DATA = RpcMethod(_TABLET_COPY, "FetchData", tcpb.FetchDataRequestPB, tcpb.FetchDataResponsePB)
CHECK_TABLET_COPY_SESSION_ACTIVE = RpcMethod(
    _TABLET_COPY,
    "CheckSessionActive",
    tcpb.CheckTabletCopySessionActiveRequestPB,
    tcpb.CheckTabletCopySessionActiveResponsePB,
)
END_TABLET_COPY_SESSION = RpcMethod(
    _TABLET_COPY, "EndTabletCopySession", tcpb.EndTabletCopySessionRequestPB, tcpb.EndTabletCopySessionResponsePB
)


def row_failure_to_pb(failure: RowFailure) -> tpb.RowErrorPB:
    """The wire form of a row a Write did not apply (the tablet server's side)."""
    code, message, _ = error_to_status(failure.error)
    return tpb.RowErrorPB(row_index=failure.row, code=code, message=message)


def row_failure_from_pb(pb: tpb.RowErrorPB) -> RowFailure:
    """A row a Write did not apply, from its wire form (the client's side)."""
    return RowFailure(pb.row_index, status_to_error(pb.code, pb.message))
