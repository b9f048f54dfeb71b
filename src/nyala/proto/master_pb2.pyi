from nyala.proto import common_pb2 as _common_pb2
from nyala.proto import consensus_pb2 as _consensus_pb2
from nyala.proto import consensus_rpc_pb2 as _consensus_rpc_pb2
from nyala.proto import tserver_pb2 as _tserver_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TServerStatePB(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[TServerStatePB]
    MAINTENANCE_MODE: _ClassVar[TServerStatePB]

class CatalogEntryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_ENTRY: _ClassVar[CatalogEntryType]
    TABLES_ENTRY: _ClassVar[CatalogEntryType]
    TABLETS_ENTRY: _ClassVar[CatalogEntryType]
    TSERVER_STATE: _ClassVar[CatalogEntryType]
    CLUSTER_ID: _ClassVar[CatalogEntryType]
    MASTER_ENTRY: _ClassVar[CatalogEntryType]
NONE: TServerStatePB
MAINTENANCE_MODE: TServerStatePB
UNKNOWN_ENTRY: CatalogEntryType
TABLES_ENTRY: CatalogEntryType
TABLETS_ENTRY: CatalogEntryType
TSERVER_STATE: CatalogEntryType
CLUSTER_ID: CatalogEntryType
MASTER_ENTRY: CatalogEntryType

class PlacementPolicyPB(_message.Message):
    __slots__ = ("locations", "leader_location")
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    LEADER_LOCATION_FIELD_NUMBER: _ClassVar[int]
    locations: _containers.RepeatedScalarFieldContainer[str]
    leader_location: str
    def __init__(self, locations: _Optional[_Iterable[str]] = ..., leader_location: _Optional[str] = ...) -> None: ...

class RangePlacementPB(_message.Message):
    __slots__ = ("lower", "upper", "policy", "shown")
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SHOWN_FIELD_NUMBER: _ClassVar[int]
    lower: bytes
    upper: bytes
    policy: PlacementPolicyPB
    shown: str
    def __init__(self, lower: _Optional[bytes] = ..., upper: _Optional[bytes] = ..., policy: _Optional[_Union[PlacementPolicyPB, _Mapping]] = ..., shown: _Optional[str] = ...) -> None: ...

class SysTablesEntryPB(_message.Message):
    __slots__ = ("name", "version", "schema", "partitioner", "num_replicas", "state", "state_msg", "create_time_us", "placement", "range_placements")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[SysTablesEntryPB.State]
        PREPARING: _ClassVar[SysTablesEntryPB.State]
        RUNNING: _ClassVar[SysTablesEntryPB.State]
        ALTERING: _ClassVar[SysTablesEntryPB.State]
        REMOVED: _ClassVar[SysTablesEntryPB.State]
    UNKNOWN: SysTablesEntryPB.State
    PREPARING: SysTablesEntryPB.State
    RUNNING: SysTablesEntryPB.State
    ALTERING: SysTablesEntryPB.State
    REMOVED: SysTablesEntryPB.State
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARTITIONER_FIELD_NUMBER: _ClassVar[int]
    NUM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_MSG_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_US_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    RANGE_PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    schema: bytes
    partitioner: bytes
    num_replicas: int
    state: SysTablesEntryPB.State
    state_msg: str
    create_time_us: int
    placement: PlacementPolicyPB
    range_placements: _containers.RepeatedCompositeFieldContainer[RangePlacementPB]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., schema: _Optional[bytes] = ..., partitioner: _Optional[bytes] = ..., num_replicas: _Optional[int] = ..., state: _Optional[_Union[SysTablesEntryPB.State, str]] = ..., state_msg: _Optional[str] = ..., create_time_us: _Optional[int] = ..., placement: _Optional[_Union[PlacementPolicyPB, _Mapping]] = ..., range_placements: _Optional[_Iterable[_Union[RangePlacementPB, _Mapping]]] = ...) -> None: ...

class SysTabletsEntryPB(_message.Message):
    __slots__ = ("table_id", "partition", "state", "state_msg", "committed_config", "leader_uuid", "reported_term")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[SysTabletsEntryPB.State]
        PREPARING: _ClassVar[SysTabletsEntryPB.State]
        CREATING: _ClassVar[SysTabletsEntryPB.State]
        RUNNING: _ClassVar[SysTabletsEntryPB.State]
        REPLACED: _ClassVar[SysTabletsEntryPB.State]
        DELETED: _ClassVar[SysTabletsEntryPB.State]
    UNKNOWN: SysTabletsEntryPB.State
    PREPARING: SysTabletsEntryPB.State
    CREATING: SysTabletsEntryPB.State
    RUNNING: SysTabletsEntryPB.State
    REPLACED: SysTabletsEntryPB.State
    DELETED: SysTabletsEntryPB.State
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_MSG_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    LEADER_UUID_FIELD_NUMBER: _ClassVar[int]
    REPORTED_TERM_FIELD_NUMBER: _ClassVar[int]
    table_id: str
    partition: bytes
    state: SysTabletsEntryPB.State
    state_msg: str
    committed_config: _consensus_pb2.RaftConfigPB
    leader_uuid: str
    reported_term: int
    def __init__(self, table_id: _Optional[str] = ..., partition: _Optional[bytes] = ..., state: _Optional[_Union[SysTabletsEntryPB.State, str]] = ..., state_msg: _Optional[str] = ..., committed_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ..., leader_uuid: _Optional[str] = ..., reported_term: _Optional[int] = ...) -> None: ...

class SysClusterIdEntryPB(_message.Message):
    __slots__ = ("cluster_id", "create_time_us")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_US_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    create_time_us: int
    def __init__(self, cluster_id: _Optional[str] = ..., create_time_us: _Optional[int] = ...) -> None: ...

class SysTServerStateEntryPB(_message.Message):
    __slots__ = ("state", "timestamp_us")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_US_FIELD_NUMBER: _ClassVar[int]
    state: TServerStatePB
    timestamp_us: int
    def __init__(self, state: _Optional[_Union[TServerStatePB, str]] = ..., timestamp_us: _Optional[int] = ...) -> None: ...

class SysMasterEntryPB(_message.Message):
    __slots__ = ("address", "removed")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.HostPortPB
    removed: bool
    def __init__(self, address: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ..., removed: _Optional[bool] = ...) -> None: ...

class CatalogMutationPB(_message.Message):
    __slots__ = ("entry_type", "entry_id", "value")
    ENTRY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    entry_type: CatalogEntryType
    entry_id: str
    value: bytes
    def __init__(self, entry_type: _Optional[_Union[CatalogEntryType, str]] = ..., entry_id: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class CatalogWritePB(_message.Message):
    __slots__ = ("mutations", "unregistered_tservers")
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    UNREGISTERED_TSERVERS_FIELD_NUMBER: _ClassVar[int]
    mutations: _containers.RepeatedCompositeFieldContainer[CatalogMutationPB]
    unregistered_tservers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mutations: _Optional[_Iterable[_Union[CatalogMutationPB, _Mapping]]] = ..., unregistered_tservers: _Optional[_Iterable[str]] = ...) -> None: ...

class ReportedTabletPB(_message.Message):
    __slots__ = ("tablet_id", "state", "error", "schema_version", "consensus_state")
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_STATE_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    state: _tserver_pb2.TabletStatePB
    error: str
    schema_version: int
    consensus_state: _consensus_rpc_pb2.ConsensusStatePB
    def __init__(self, tablet_id: _Optional[str] = ..., state: _Optional[_Union[_tserver_pb2.TabletStatePB, str]] = ..., error: _Optional[str] = ..., schema_version: _Optional[int] = ..., consensus_state: _Optional[_Union[_consensus_rpc_pb2.ConsensusStatePB, _Mapping]] = ...) -> None: ...

class TabletReportPB(_message.Message):
    __slots__ = ("is_incremental", "updated_tablets", "removed_tablet_ids", "sequence_number")
    IS_INCREMENTAL_FIELD_NUMBER: _ClassVar[int]
    UPDATED_TABLETS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_TABLET_IDS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    is_incremental: bool
    updated_tablets: _containers.RepeatedCompositeFieldContainer[ReportedTabletPB]
    removed_tablet_ids: _containers.RepeatedScalarFieldContainer[str]
    sequence_number: int
    def __init__(self, is_incremental: _Optional[bool] = ..., updated_tablets: _Optional[_Iterable[_Union[ReportedTabletPB, _Mapping]]] = ..., removed_tablet_ids: _Optional[_Iterable[str]] = ..., sequence_number: _Optional[int] = ...) -> None: ...

class TSHeartbeatRequestPB(_message.Message):
    __slots__ = ("instance", "registration", "tablet_report", "num_live_tablets", "tserver_addresses_version")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    TABLET_REPORT_FIELD_NUMBER: _ClassVar[int]
    NUM_LIVE_TABLETS_FIELD_NUMBER: _ClassVar[int]
    TSERVER_ADDRESSES_VERSION_FIELD_NUMBER: _ClassVar[int]
    instance: _common_pb2.NodeInstancePB
    registration: _common_pb2.ServerRegistrationPB
    tablet_report: TabletReportPB
    num_live_tablets: int
    tserver_addresses_version: int
    def __init__(self, instance: _Optional[_Union[_common_pb2.NodeInstancePB, _Mapping]] = ..., registration: _Optional[_Union[_common_pb2.ServerRegistrationPB, _Mapping]] = ..., tablet_report: _Optional[_Union[TabletReportPB, _Mapping]] = ..., num_live_tablets: _Optional[int] = ..., tserver_addresses_version: _Optional[int] = ...) -> None: ...

class TSHeartbeatResponsePB(_message.Message):
    __slots__ = ("master_instance", "leader_master", "needs_reregister", "needs_full_tablet_report", "tablet_report_sequence_number", "location", "tserver_addresses", "tserver_addresses_version", "master_addresses")
    MASTER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    LEADER_MASTER_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REREGISTER_FIELD_NUMBER: _ClassVar[int]
    NEEDS_FULL_TABLET_REPORT_FIELD_NUMBER: _ClassVar[int]
    TABLET_REPORT_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    TSERVER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    TSERVER_ADDRESSES_VERSION_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    master_instance: _common_pb2.NodeInstancePB
    leader_master: bool
    needs_reregister: bool
    needs_full_tablet_report: bool
    tablet_report_sequence_number: int
    location: str
    tserver_addresses: _containers.RepeatedCompositeFieldContainer[_tserver_pb2.PeerAddressPB]
    tserver_addresses_version: int
    master_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.HostPortPB]
    def __init__(self, master_instance: _Optional[_Union[_common_pb2.NodeInstancePB, _Mapping]] = ..., leader_master: _Optional[bool] = ..., needs_reregister: _Optional[bool] = ..., needs_full_tablet_report: _Optional[bool] = ..., tablet_report_sequence_number: _Optional[int] = ..., location: _Optional[str] = ..., tserver_addresses: _Optional[_Iterable[_Union[_tserver_pb2.PeerAddressPB, _Mapping]]] = ..., tserver_addresses_version: _Optional[int] = ..., master_addresses: _Optional[_Iterable[_Union[_common_pb2.HostPortPB, _Mapping]]] = ...) -> None: ...

class ConnectToMasterRequestPB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConnectToMasterResponsePB(_message.Message):
    __slots__ = ("role", "cluster_id", "master_addresses", "leader_address", "client_location")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_LOCATION_FIELD_NUMBER: _ClassVar[int]
    role: _common_pb2.RaftRolePB
    cluster_id: str
    master_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.HostPortPB]
    leader_address: str
    client_location: str
    def __init__(self, role: _Optional[_Union[_common_pb2.RaftRolePB, str]] = ..., cluster_id: _Optional[str] = ..., master_addresses: _Optional[_Iterable[_Union[_common_pb2.HostPortPB, _Mapping]]] = ..., leader_address: _Optional[str] = ..., client_location: _Optional[str] = ...) -> None: ...

class GetMasterRegistrationRequestPB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetMasterRegistrationResponsePB(_message.Message):
    __slots__ = ("instance", "registration", "role", "cluster_id", "term")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    instance: _common_pb2.NodeInstancePB
    registration: _common_pb2.ServerRegistrationPB
    role: _common_pb2.RaftRolePB
    cluster_id: str
    term: int
    def __init__(self, instance: _Optional[_Union[_common_pb2.NodeInstancePB, _Mapping]] = ..., registration: _Optional[_Union[_common_pb2.ServerRegistrationPB, _Mapping]] = ..., role: _Optional[_Union[_common_pb2.RaftRolePB, str]] = ..., cluster_id: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class MasterEntryPB(_message.Message):
    __slots__ = ("instance", "registration", "role", "term", "error", "member_type")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MEMBER_TYPE_FIELD_NUMBER: _ClassVar[int]
    instance: _common_pb2.NodeInstancePB
    registration: _common_pb2.ServerRegistrationPB
    role: _common_pb2.RaftRolePB
    term: int
    error: str
    member_type: _consensus_pb2.MemberType
    def __init__(self, instance: _Optional[_Union[_common_pb2.NodeInstancePB, _Mapping]] = ..., registration: _Optional[_Union[_common_pb2.ServerRegistrationPB, _Mapping]] = ..., role: _Optional[_Union[_common_pb2.RaftRolePB, str]] = ..., term: _Optional[int] = ..., error: _Optional[str] = ..., member_type: _Optional[_Union[_consensus_pb2.MemberType, str]] = ...) -> None: ...

class ListMastersRequestPB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListMastersResponsePB(_message.Message):
    __slots__ = ("masters", "config_opid_index")
    MASTERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    masters: _containers.RepeatedCompositeFieldContainer[MasterEntryPB]
    config_opid_index: int
    def __init__(self, masters: _Optional[_Iterable[_Union[MasterEntryPB, _Mapping]]] = ..., config_opid_index: _Optional[int] = ...) -> None: ...

class AddMasterRequestPB(_message.Message):
    __slots__ = ("address", "cas_config_opid_index")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CAS_CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.HostPortPB
    cas_config_opid_index: int
    def __init__(self, address: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ..., cas_config_opid_index: _Optional[int] = ...) -> None: ...

class AddMasterResponsePB(_message.Message):
    __slots__ = ("uuid", "already_present", "config_opid_index")
    UUID_FIELD_NUMBER: _ClassVar[int]
    ALREADY_PRESENT_FIELD_NUMBER: _ClassVar[int]
    CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    already_present: bool
    config_opid_index: int
    def __init__(self, uuid: _Optional[str] = ..., already_present: _Optional[bool] = ..., config_opid_index: _Optional[int] = ...) -> None: ...

class RemoveMasterRequestPB(_message.Message):
    __slots__ = ("address", "uuid", "cas_config_opid_index")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    CAS_CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.HostPortPB
    uuid: str
    cas_config_opid_index: int
    def __init__(self, address: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ..., uuid: _Optional[str] = ..., cas_config_opid_index: _Optional[int] = ...) -> None: ...

class RemoveMasterResponsePB(_message.Message):
    __slots__ = ("uuid", "already_removed", "config_opid_index")
    UUID_FIELD_NUMBER: _ClassVar[int]
    ALREADY_REMOVED_FIELD_NUMBER: _ClassVar[int]
    CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    already_removed: bool
    config_opid_index: int
    def __init__(self, uuid: _Optional[str] = ..., already_removed: _Optional[bool] = ..., config_opid_index: _Optional[int] = ...) -> None: ...

class ListTabletServersRequestPB(_message.Message):
    __slots__ = ("max_staleness_ms",)
    MAX_STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    max_staleness_ms: int
    def __init__(self, max_staleness_ms: _Optional[int] = ...) -> None: ...

class ListTabletServersResponsePB(_message.Message):
    __slots__ = ("servers", "catalog_known")
    class Entry(_message.Message):
        __slots__ = ("instance", "registration", "millis_since_heartbeat", "location", "live", "num_live_replicas", "state", "num_replicas")
        INSTANCE_FIELD_NUMBER: _ClassVar[int]
        REGISTRATION_FIELD_NUMBER: _ClassVar[int]
        MILLIS_SINCE_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
        LOCATION_FIELD_NUMBER: _ClassVar[int]
        LIVE_FIELD_NUMBER: _ClassVar[int]
        NUM_LIVE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        STATE_FIELD_NUMBER: _ClassVar[int]
        NUM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        instance: _common_pb2.NodeInstancePB
        registration: _common_pb2.ServerRegistrationPB
        millis_since_heartbeat: int
        location: str
        live: bool
        num_live_replicas: int
        state: TServerStatePB
        num_replicas: int
        def __init__(self, instance: _Optional[_Union[_common_pb2.NodeInstancePB, _Mapping]] = ..., registration: _Optional[_Union[_common_pb2.ServerRegistrationPB, _Mapping]] = ..., millis_since_heartbeat: _Optional[int] = ..., location: _Optional[str] = ..., live: _Optional[bool] = ..., num_live_replicas: _Optional[int] = ..., state: _Optional[_Union[TServerStatePB, str]] = ..., num_replicas: _Optional[int] = ...) -> None: ...
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    CATALOG_KNOWN_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[ListTabletServersResponsePB.Entry]
    catalog_known: bool
    def __init__(self, servers: _Optional[_Iterable[_Union[ListTabletServersResponsePB.Entry, _Mapping]]] = ..., catalog_known: _Optional[bool] = ...) -> None: ...

class TServerStateChangePB(_message.Message):
    __slots__ = ("uuid", "change")
    class StateChange(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_STATE_CHANGE: _ClassVar[TServerStateChangePB.StateChange]
        ENTER_MAINTENANCE_MODE: _ClassVar[TServerStateChangePB.StateChange]
        EXIT_MAINTENANCE_MODE: _ClassVar[TServerStateChangePB.StateChange]
    UNKNOWN_STATE_CHANGE: TServerStateChangePB.StateChange
    ENTER_MAINTENANCE_MODE: TServerStateChangePB.StateChange
    EXIT_MAINTENANCE_MODE: TServerStateChangePB.StateChange
    UUID_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    change: TServerStateChangePB.StateChange
    def __init__(self, uuid: _Optional[str] = ..., change: _Optional[_Union[TServerStateChangePB.StateChange, str]] = ...) -> None: ...

class ChangeTServerStateRequestPB(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: TServerStateChangePB
    def __init__(self, change: _Optional[_Union[TServerStateChangePB, _Mapping]] = ...) -> None: ...

class ChangeTServerStateResponsePB(_message.Message):
    __slots__ = ("changed",)
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    def __init__(self, changed: _Optional[bool] = ...) -> None: ...

class UnregisterTServerRequestPB(_message.Message):
    __slots__ = ("uuid", "force")
    UUID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    force: bool
    def __init__(self, uuid: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class UnregisterTServerResponsePB(_message.Message):
    __slots__ = ("num_replicas",)
    NUM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    num_replicas: int
    def __init__(self, num_replicas: _Optional[int] = ...) -> None: ...

class RebalanceLeaseRequestPB(_message.Message):
    __slots__ = ("holder", "duration_ms")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    holder: str
    duration_ms: int
    def __init__(self, holder: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class RebalanceLeaseResponsePB(_message.Message):
    __slots__ = ("granted_ms", "auto_rebalancing_enabled")
    GRANTED_MS_FIELD_NUMBER: _ClassVar[int]
    AUTO_REBALANCING_ENABLED_FIELD_NUMBER: _ClassVar[int]
    granted_ms: int
    auto_rebalancing_enabled: bool
    def __init__(self, granted_ms: _Optional[int] = ..., auto_rebalancing_enabled: _Optional[bool] = ...) -> None: ...

class CreateTableRequestPB(_message.Message):
    __slots__ = ("name", "schema", "partitioner", "num_replicas", "wait", "placement", "range_placements")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARTITIONER_FIELD_NUMBER: _ClassVar[int]
    NUM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    RANGE_PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema: bytes
    partitioner: bytes
    num_replicas: int
    wait: bool
    placement: PlacementPolicyPB
    range_placements: _containers.RepeatedCompositeFieldContainer[AlterTableStepPB.SetPlacement]
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[bytes] = ..., partitioner: _Optional[bytes] = ..., num_replicas: _Optional[int] = ..., wait: _Optional[bool] = ..., placement: _Optional[_Union[PlacementPolicyPB, _Mapping]] = ..., range_placements: _Optional[_Iterable[_Union[AlterTableStepPB.SetPlacement, _Mapping]]] = ...) -> None: ...

class CreateTableResponsePB(_message.Message):
    __slots__ = ("table_id",)
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    table_id: str
    def __init__(self, table_id: _Optional[str] = ...) -> None: ...

class IsCreateTableDoneRequestPB(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableIdentifierPB
    def __init__(self, table: _Optional[_Union[_common_pb2.TableIdentifierPB, _Mapping]] = ...) -> None: ...

class IsCreateTableDoneResponsePB(_message.Message):
    __slots__ = ("done",)
    DONE_FIELD_NUMBER: _ClassVar[int]
    done: bool
    def __init__(self, done: _Optional[bool] = ...) -> None: ...

class DeleteTableRequestPB(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableIdentifierPB
    def __init__(self, table: _Optional[_Union[_common_pb2.TableIdentifierPB, _Mapping]] = ...) -> None: ...

class DeleteTableResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AlterTableStepPB(_message.Message):
    __slots__ = ("add_column", "drop_column", "rename_column", "add_range_partition", "drop_range_partition", "set_placement")
    class AddColumn(_message.Message):
        __slots__ = ("column",)
        COLUMN_FIELD_NUMBER: _ClassVar[int]
        column: bytes
        def __init__(self, column: _Optional[bytes] = ...) -> None: ...
    class DropColumn(_message.Message):
        __slots__ = ("name",)
        NAME_FIELD_NUMBER: _ClassVar[int]
        name: str
        def __init__(self, name: _Optional[str] = ...) -> None: ...
    class RenameColumn(_message.Message):
        __slots__ = ("old_name", "new_name")
        OLD_NAME_FIELD_NUMBER: _ClassVar[int]
        NEW_NAME_FIELD_NUMBER: _ClassVar[int]
        old_name: str
        new_name: str
        def __init__(self, old_name: _Optional[str] = ..., new_name: _Optional[str] = ...) -> None: ...
    class RangePartition(_message.Message):
        __slots__ = ("lower_bound", "upper_bound")
        LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
        UPPER_BOUND_FIELD_NUMBER: _ClassVar[int]
        lower_bound: bytes
        upper_bound: bytes
        def __init__(self, lower_bound: _Optional[bytes] = ..., upper_bound: _Optional[bytes] = ...) -> None: ...
    class SetPlacement(_message.Message):
        __slots__ = ("policy", "range")
        POLICY_FIELD_NUMBER: _ClassVar[int]
        RANGE_FIELD_NUMBER: _ClassVar[int]
        policy: PlacementPolicyPB
        range: AlterTableStepPB.RangePartition
        def __init__(self, policy: _Optional[_Union[PlacementPolicyPB, _Mapping]] = ..., range: _Optional[_Union[AlterTableStepPB.RangePartition, _Mapping]] = ...) -> None: ...
    ADD_COLUMN_FIELD_NUMBER: _ClassVar[int]
    DROP_COLUMN_FIELD_NUMBER: _ClassVar[int]
    RENAME_COLUMN_FIELD_NUMBER: _ClassVar[int]
    ADD_RANGE_PARTITION_FIELD_NUMBER: _ClassVar[int]
    DROP_RANGE_PARTITION_FIELD_NUMBER: _ClassVar[int]
    SET_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    add_column: AlterTableStepPB.AddColumn
    drop_column: AlterTableStepPB.DropColumn
    rename_column: AlterTableStepPB.RenameColumn
    add_range_partition: AlterTableStepPB.RangePartition
    drop_range_partition: AlterTableStepPB.RangePartition
    set_placement: AlterTableStepPB.SetPlacement
    def __init__(self, add_column: _Optional[_Union[AlterTableStepPB.AddColumn, _Mapping]] = ..., drop_column: _Optional[_Union[AlterTableStepPB.DropColumn, _Mapping]] = ..., rename_column: _Optional[_Union[AlterTableStepPB.RenameColumn, _Mapping]] = ..., add_range_partition: _Optional[_Union[AlterTableStepPB.RangePartition, _Mapping]] = ..., drop_range_partition: _Optional[_Union[AlterTableStepPB.RangePartition, _Mapping]] = ..., set_placement: _Optional[_Union[AlterTableStepPB.SetPlacement, _Mapping]] = ...) -> None: ...

class AlterTableRequestPB(_message.Message):
    __slots__ = ("table", "new_table_name", "steps", "wait")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    NEW_TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableIdentifierPB
    new_table_name: str
    steps: _containers.RepeatedCompositeFieldContainer[AlterTableStepPB]
    wait: bool
    def __init__(self, table: _Optional[_Union[_common_pb2.TableIdentifierPB, _Mapping]] = ..., new_table_name: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[AlterTableStepPB, _Mapping]]] = ..., wait: _Optional[bool] = ...) -> None: ...

class AlterTableResponsePB(_message.Message):
    __slots__ = ("schema_version",)
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    def __init__(self, schema_version: _Optional[int] = ...) -> None: ...

class ListTablesRequestPB(_message.Message):
    __slots__ = ("name_filter", "max_staleness_ms")
    NAME_FILTER_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    name_filter: str
    max_staleness_ms: int
    def __init__(self, name_filter: _Optional[str] = ..., max_staleness_ms: _Optional[int] = ...) -> None: ...

class ListTablesResponsePB(_message.Message):
    __slots__ = ("tables",)
    class TableInfo(_message.Message):
        __slots__ = ("id", "name", "num_tablets", "num_replicas")
        ID_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        NUM_TABLETS_FIELD_NUMBER: _ClassVar[int]
        NUM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        id: str
        name: str
        num_tablets: int
        num_replicas: int
        def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., num_tablets: _Optional[int] = ..., num_replicas: _Optional[int] = ...) -> None: ...
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[ListTablesResponsePB.TableInfo]
    def __init__(self, tables: _Optional[_Iterable[_Union[ListTablesResponsePB.TableInfo, _Mapping]]] = ...) -> None: ...

class GetTableSchemaRequestPB(_message.Message):
    __slots__ = ("table", "max_staleness_ms")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableIdentifierPB
    max_staleness_ms: int
    def __init__(self, table: _Optional[_Union[_common_pb2.TableIdentifierPB, _Mapping]] = ..., max_staleness_ms: _Optional[int] = ...) -> None: ...

class GetTableSchemaResponsePB(_message.Message):
    __slots__ = ("table_id", "table_name", "schema", "partitioner", "num_replicas", "schema_version", "create_table_done", "placement", "range_placements")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARTITIONER_FIELD_NUMBER: _ClassVar[int]
    NUM_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TABLE_DONE_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    RANGE_PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    table_id: str
    table_name: str
    schema: bytes
    partitioner: bytes
    num_replicas: int
    schema_version: int
    create_table_done: bool
    placement: PlacementPolicyPB
    range_placements: _containers.RepeatedCompositeFieldContainer[RangePlacementPB]
    def __init__(self, table_id: _Optional[str] = ..., table_name: _Optional[str] = ..., schema: _Optional[bytes] = ..., partitioner: _Optional[bytes] = ..., num_replicas: _Optional[int] = ..., schema_version: _Optional[int] = ..., create_table_done: _Optional[bool] = ..., placement: _Optional[_Union[PlacementPolicyPB, _Mapping]] = ..., range_placements: _Optional[_Iterable[_Union[RangePlacementPB, _Mapping]]] = ...) -> None: ...

class TabletLocationsPB(_message.Message):
    __slots__ = ("tablet_id", "partition", "replicas")
    class Replica(_message.Message):
        __slots__ = ("ts_info_idx", "role")
        TS_INFO_IDX_FIELD_NUMBER: _ClassVar[int]
        ROLE_FIELD_NUMBER: _ClassVar[int]
        ts_info_idx: int
        role: _common_pb2.RaftRolePB
        def __init__(self, ts_info_idx: _Optional[int] = ..., role: _Optional[_Union[_common_pb2.RaftRolePB, str]] = ...) -> None: ...
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    partition: bytes
    replicas: _containers.RepeatedCompositeFieldContainer[TabletLocationsPB.Replica]
    def __init__(self, tablet_id: _Optional[str] = ..., partition: _Optional[bytes] = ..., replicas: _Optional[_Iterable[_Union[TabletLocationsPB.Replica, _Mapping]]] = ...) -> None: ...

class GetTableLocationsRequestPB(_message.Message):
    __slots__ = ("table", "partition_key_start", "partition_key_end", "max_returned_locations", "max_staleness_ms")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_START_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_END_FIELD_NUMBER: _ClassVar[int]
    MAX_RETURNED_LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableIdentifierPB
    partition_key_start: bytes
    partition_key_end: bytes
    max_returned_locations: int
    max_staleness_ms: int
    def __init__(self, table: _Optional[_Union[_common_pb2.TableIdentifierPB, _Mapping]] = ..., partition_key_start: _Optional[bytes] = ..., partition_key_end: _Optional[bytes] = ..., max_returned_locations: _Optional[int] = ..., max_staleness_ms: _Optional[int] = ...) -> None: ...

class GetTableLocationsResponsePB(_message.Message):
    __slots__ = ("tablet_locations", "ts_infos", "ttl_millis")
    TABLET_LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    TS_INFOS_FIELD_NUMBER: _ClassVar[int]
    TTL_MILLIS_FIELD_NUMBER: _ClassVar[int]
    tablet_locations: _containers.RepeatedCompositeFieldContainer[TabletLocationsPB]
    ts_infos: _containers.RepeatedCompositeFieldContainer[_common_pb2.TSInfoPB]
    ttl_millis: int
    def __init__(self, tablet_locations: _Optional[_Iterable[_Union[TabletLocationsPB, _Mapping]]] = ..., ts_infos: _Optional[_Iterable[_Union[_common_pb2.TSInfoPB, _Mapping]]] = ..., ttl_millis: _Optional[int] = ...) -> None: ...

class GetTabletLocationsRequestPB(_message.Message):
    __slots__ = ("tablet_ids", "max_staleness_ms")
    TABLET_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    tablet_ids: _containers.RepeatedScalarFieldContainer[str]
    max_staleness_ms: int
    def __init__(self, tablet_ids: _Optional[_Iterable[str]] = ..., max_staleness_ms: _Optional[int] = ...) -> None: ...

class GetTabletLocationsResponsePB(_message.Message):
    __slots__ = ("tablet_locations", "ts_infos", "errors")
    class Error(_message.Message):
        __slots__ = ("tablet_id", "message")
        TABLET_ID_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_FIELD_NUMBER: _ClassVar[int]
        tablet_id: str
        message: str
        def __init__(self, tablet_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
    TABLET_LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    TS_INFOS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    tablet_locations: _containers.RepeatedCompositeFieldContainer[TabletLocationsPB]
    ts_infos: _containers.RepeatedCompositeFieldContainer[_common_pb2.TSInfoPB]
    errors: _containers.RepeatedCompositeFieldContainer[GetTabletLocationsResponsePB.Error]
    def __init__(self, tablet_locations: _Optional[_Iterable[_Union[TabletLocationsPB, _Mapping]]] = ..., ts_infos: _Optional[_Iterable[_Union[_common_pb2.TSInfoPB, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[GetTabletLocationsResponsePB.Error, _Mapping]]] = ...) -> None: ...
