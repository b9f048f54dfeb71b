from nyala.proto import common_pb2 as _common_pb2
from nyala.proto import consensus_pb2 as _consensus_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TabletStatePB(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_STATE: _ClassVar[TabletStatePB]
    NOT_INITIALIZED: _ClassVar[TabletStatePB]
    BOOTSTRAPPING: _ClassVar[TabletStatePB]
    RUNNING: _ClassVar[TabletStatePB]
    FAILED: _ClassVar[TabletStatePB]
    STOPPING: _ClassVar[TabletStatePB]
    TOMBSTONED: _ClassVar[TabletStatePB]
    COPYING: _ClassVar[TabletStatePB]

class ReadModePB(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_LATEST: _ClassVar[ReadModePB]
    READ_YOUR_WRITES: _ClassVar[ReadModePB]
UNKNOWN_STATE: TabletStatePB
NOT_INITIALIZED: TabletStatePB
BOOTSTRAPPING: TabletStatePB
RUNNING: TabletStatePB
FAILED: TabletStatePB
STOPPING: TabletStatePB
TOMBSTONED: TabletStatePB
COPYING: TabletStatePB
READ_LATEST: ReadModePB
READ_YOUR_WRITES: ReadModePB

class PeerAddressPB(_message.Message):
    __slots__ = ("permanent_uuid", "rpc_address", "location")
    PERMANENT_UUID_FIELD_NUMBER: _ClassVar[int]
    RPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    permanent_uuid: str
    rpc_address: _common_pb2.HostPortPB
    location: str
    def __init__(self, permanent_uuid: _Optional[str] = ..., rpc_address: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ..., location: _Optional[str] = ...) -> None: ...

class CreateTabletRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "table_id", "table_name", "tablet_id", "partition", "partition_schema", "schema", "schema_version", "config", "peer_addresses")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    table_id: str
    table_name: str
    tablet_id: str
    partition: bytes
    partition_schema: bytes
    schema: bytes
    schema_version: int
    config: _consensus_pb2.RaftConfigPB
    peer_addresses: _containers.RepeatedCompositeFieldContainer[PeerAddressPB]
    def __init__(self, dest_uuid: _Optional[str] = ..., table_id: _Optional[str] = ..., table_name: _Optional[str] = ..., tablet_id: _Optional[str] = ..., partition: _Optional[bytes] = ..., partition_schema: _Optional[bytes] = ..., schema: _Optional[bytes] = ..., schema_version: _Optional[int] = ..., config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ..., peer_addresses: _Optional[_Iterable[_Union[PeerAddressPB, _Mapping]]] = ...) -> None: ...

class CreateTabletResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteTabletRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "reason", "tombstone", "cas_config_opid_index_less_or_equal")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    CAS_CONFIG_OPID_INDEX_LESS_OR_EQUAL_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    reason: str
    tombstone: bool
    cas_config_opid_index_less_or_equal: int
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., reason: _Optional[str] = ..., tombstone: _Optional[bool] = ..., cas_config_opid_index_less_or_equal: _Optional[int] = ...) -> None: ...

class DeleteTabletResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AlterSchemaRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "schema", "schema_version")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    schema: bytes
    schema_version: int
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., schema: _Optional[bytes] = ..., schema_version: _Optional[int] = ...) -> None: ...

class AlterSchemaResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RowErrorPB(_message.Message):
    __slots__ = ("row_index", "code", "message")
    ROW_INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    row_index: int
    code: int
    message: str
    def __init__(self, row_index: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class RequestIdPB(_message.Message):
    __slots__ = ("client_id", "seq_no", "first_incomplete_seq_no", "attempt_no")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_NO_FIELD_NUMBER: _ClassVar[int]
    FIRST_INCOMPLETE_SEQ_NO_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    seq_no: int
    first_incomplete_seq_no: int
    attempt_no: int
    def __init__(self, client_id: _Optional[str] = ..., seq_no: _Optional[int] = ..., first_incomplete_seq_no: _Optional[int] = ..., attempt_no: _Optional[int] = ...) -> None: ...

class WriteRequestPB(_message.Message):
    __slots__ = ("tablet_id", "schema_version", "request_id")
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    schema_version: int
    request_id: RequestIdPB
    def __init__(self, tablet_id: _Optional[str] = ..., schema_version: _Optional[int] = ..., request_id: _Optional[_Union[RequestIdPB, _Mapping]] = ...) -> None: ...

class WriteResponsePB(_message.Message):
    __slots__ = ("per_row_errors", "op_index")
    PER_ROW_ERRORS_FIELD_NUMBER: _ClassVar[int]
    OP_INDEX_FIELD_NUMBER: _ClassVar[int]
    per_row_errors: _containers.RepeatedCompositeFieldContainer[RowErrorPB]
    op_index: int
    def __init__(self, per_row_errors: _Optional[_Iterable[_Union[RowErrorPB, _Mapping]]] = ..., op_index: _Optional[int] = ...) -> None: ...

class NewScanRequestPB(_message.Message):
    __slots__ = ("tablet_id", "projected_columns", "predicates", "lower_bound_primary_key", "exclusive_upper_bound_primary_key", "limit", "read_mode", "min_applied_index", "order_by_primary_key", "last_primary_key", "schema_version", "leader_only")
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECTED_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    LOWER_BOUND_PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_UPPER_BOUND_PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    READ_MODE_FIELD_NUMBER: _ClassVar[int]
    MIN_APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    LAST_PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    LEADER_ONLY_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    projected_columns: _containers.RepeatedScalarFieldContainer[str]
    predicates: bytes
    lower_bound_primary_key: bytes
    exclusive_upper_bound_primary_key: bytes
    limit: int
    read_mode: ReadModePB
    min_applied_index: int
    order_by_primary_key: bool
    last_primary_key: bytes
    schema_version: int
    leader_only: bool
    def __init__(self, tablet_id: _Optional[str] = ..., projected_columns: _Optional[_Iterable[str]] = ..., predicates: _Optional[bytes] = ..., lower_bound_primary_key: _Optional[bytes] = ..., exclusive_upper_bound_primary_key: _Optional[bytes] = ..., limit: _Optional[int] = ..., read_mode: _Optional[_Union[ReadModePB, str]] = ..., min_applied_index: _Optional[int] = ..., order_by_primary_key: _Optional[bool] = ..., last_primary_key: _Optional[bytes] = ..., schema_version: _Optional[int] = ..., leader_only: _Optional[bool] = ...) -> None: ...

class ScanRequestPB(_message.Message):
    __slots__ = ("new_scan_request", "scanner_id", "call_seq_id", "batch_size_bytes", "close_scanner")
    NEW_SCAN_REQUEST_FIELD_NUMBER: _ClassVar[int]
    SCANNER_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_SEQ_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CLOSE_SCANNER_FIELD_NUMBER: _ClassVar[int]
    new_scan_request: NewScanRequestPB
    scanner_id: bytes
    call_seq_id: int
    batch_size_bytes: int
    close_scanner: bool
    def __init__(self, new_scan_request: _Optional[_Union[NewScanRequestPB, _Mapping]] = ..., scanner_id: _Optional[bytes] = ..., call_seq_id: _Optional[int] = ..., batch_size_bytes: _Optional[int] = ..., close_scanner: _Optional[bool] = ...) -> None: ...

class ScanResponsePB(_message.Message):
    __slots__ = ("scanner_id", "has_more_results", "num_rows", "last_primary_key")
    SCANNER_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NUM_ROWS_FIELD_NUMBER: _ClassVar[int]
    LAST_PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    scanner_id: bytes
    has_more_results: bool
    num_rows: int
    last_primary_key: bytes
    def __init__(self, scanner_id: _Optional[bytes] = ..., has_more_results: _Optional[bool] = ..., num_rows: _Optional[int] = ..., last_primary_key: _Optional[bytes] = ...) -> None: ...

class ChecksumRequestPB(_message.Message):
    __slots__ = ("tablet_id", "marker_index")
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    MARKER_INDEX_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    marker_index: int
    def __init__(self, tablet_id: _Optional[str] = ..., marker_index: _Optional[int] = ...) -> None: ...

class ChecksumResponsePB(_message.Message):
    __slots__ = ("checksum", "rows_checksummed", "marker_index")
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    ROWS_CHECKSUMMED_FIELD_NUMBER: _ClassVar[int]
    MARKER_INDEX_FIELD_NUMBER: _ClassVar[int]
    checksum: int
    rows_checksummed: int
    marker_index: int
    def __init__(self, checksum: _Optional[int] = ..., rows_checksummed: _Optional[int] = ..., marker_index: _Optional[int] = ...) -> None: ...

class ListTabletsRequestPB(_message.Message):
    __slots__ = ("need_metadata",)
    NEED_METADATA_FIELD_NUMBER: _ClassVar[int]
    need_metadata: bool
    def __init__(self, need_metadata: _Optional[bool] = ...) -> None: ...

class ListTabletsResponsePB(_message.Message):
    __slots__ = ("tablets",)
    class StatusPB(_message.Message):
        __slots__ = ("tablet_id", "table_id", "table_name", "state", "error", "applied_index", "num_rows", "partition", "partition_schema", "schema", "schema_version", "committed_config")
        TABLET_ID_FIELD_NUMBER: _ClassVar[int]
        TABLE_ID_FIELD_NUMBER: _ClassVar[int]
        TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
        STATE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
        NUM_ROWS_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        PARTITION_SCHEMA_FIELD_NUMBER: _ClassVar[int]
        SCHEMA_FIELD_NUMBER: _ClassVar[int]
        SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
        tablet_id: str
        table_id: str
        table_name: str
        state: TabletStatePB
        error: str
        applied_index: int
        num_rows: int
        partition: bytes
        partition_schema: bytes
        schema: bytes
        schema_version: int
        committed_config: _consensus_pb2.RaftConfigPB
        def __init__(self, tablet_id: _Optional[str] = ..., table_id: _Optional[str] = ..., table_name: _Optional[str] = ..., state: _Optional[_Union[TabletStatePB, str]] = ..., error: _Optional[str] = ..., applied_index: _Optional[int] = ..., num_rows: _Optional[int] = ..., partition: _Optional[bytes] = ..., partition_schema: _Optional[bytes] = ..., schema: _Optional[bytes] = ..., schema_version: _Optional[int] = ..., committed_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ...) -> None: ...
    TABLETS_FIELD_NUMBER: _ClassVar[int]
    tablets: _containers.RepeatedCompositeFieldContainer[ListTabletsResponsePB.StatusPB]
    def __init__(self, tablets: _Optional[_Iterable[_Union[ListTabletsResponsePB.StatusPB, _Mapping]]] = ...) -> None: ...

class GetTabletServerStatusRequestPB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTabletServerStatusResponsePB(_message.Message):
    __slots__ = ("instance", "registration", "scans_served", "writes_served", "tablet_copies_started", "tablet_copies_completed", "tablet_copies_failed", "tablet_copy_bytes_within_location", "tablet_copy_bytes_across_locations", "tablet_copy_bytes_served", "location", "tablet_copies")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    SCANS_SERVED_FIELD_NUMBER: _ClassVar[int]
    WRITES_SERVED_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPIES_STARTED_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPIES_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPIES_FAILED_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPY_BYTES_WITHIN_LOCATION_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPY_BYTES_ACROSS_LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPY_BYTES_SERVED_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    TABLET_COPIES_FIELD_NUMBER: _ClassVar[int]
    instance: _common_pb2.NodeInstancePB
    registration: _common_pb2.ServerRegistrationPB
    scans_served: int
    writes_served: int
    tablet_copies_started: int
    tablet_copies_completed: int
    tablet_copies_failed: int
    tablet_copy_bytes_within_location: int
    tablet_copy_bytes_across_locations: int
    tablet_copy_bytes_served: int
    location: str
    tablet_copies: _containers.RepeatedCompositeFieldContainer[TabletCopyStatusPB]
    def __init__(self, instance: _Optional[_Union[_common_pb2.NodeInstancePB, _Mapping]] = ..., registration: _Optional[_Union[_common_pb2.ServerRegistrationPB, _Mapping]] = ..., scans_served: _Optional[int] = ..., writes_served: _Optional[int] = ..., tablet_copies_started: _Optional[int] = ..., tablet_copies_completed: _Optional[int] = ..., tablet_copies_failed: _Optional[int] = ..., tablet_copy_bytes_within_location: _Optional[int] = ..., tablet_copy_bytes_across_locations: _Optional[int] = ..., tablet_copy_bytes_served: _Optional[int] = ..., location: _Optional[str] = ..., tablet_copies: _Optional[_Iterable[_Union[TabletCopyStatusPB, _Mapping]]] = ...) -> None: ...

class TabletCopyStatusPB(_message.Message):
    __slots__ = ("tablet_id", "source_uuid", "state", "error", "total_bytes")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[TabletCopyStatusPB.State]
        IN_PROGRESS: _ClassVar[TabletCopyStatusPB.State]
        COMPLETED: _ClassVar[TabletCopyStatusPB.State]
        FAILED: _ClassVar[TabletCopyStatusPB.State]
    UNKNOWN: TabletCopyStatusPB.State
    IN_PROGRESS: TabletCopyStatusPB.State
    COMPLETED: TabletCopyStatusPB.State
    FAILED: TabletCopyStatusPB.State
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_UUID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    source_uuid: str
    state: TabletCopyStatusPB.State
    error: str
    total_bytes: int
    def __init__(self, tablet_id: _Optional[str] = ..., source_uuid: _Optional[str] = ..., state: _Optional[_Union[TabletCopyStatusPB.State, str]] = ..., error: _Optional[str] = ..., total_bytes: _Optional[int] = ...) -> None: ...
