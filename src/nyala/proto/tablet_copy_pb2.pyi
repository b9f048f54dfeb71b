from nyala.proto import common_pb2 as _common_pb2
from nyala.proto import consensus_pb2 as _consensus_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataFileKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_FILE: _ClassVar[DataFileKind]
    STORE_FILE: _ClassVar[DataFileKind]
    STORE_WAL_FILE: _ClassVar[DataFileKind]
    WAL_SEGMENT: _ClassVar[DataFileKind]
UNKNOWN_FILE: DataFileKind
STORE_FILE: DataFileKind
STORE_WAL_FILE: DataFileKind
WAL_SEGMENT: DataFileKind

class StartTabletCopyRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "copy_peer_uuid", "copy_peer_addr", "caller_uuid", "caller_term", "replace_live_replica", "leader_first_index")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    COPY_PEER_UUID_FIELD_NUMBER: _ClassVar[int]
    COPY_PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    CALLER_UUID_FIELD_NUMBER: _ClassVar[int]
    CALLER_TERM_FIELD_NUMBER: _ClassVar[int]
    REPLACE_LIVE_REPLICA_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    copy_peer_uuid: str
    copy_peer_addr: _common_pb2.HostPortPB
    caller_uuid: str
    caller_term: int
    replace_live_replica: bool
    leader_first_index: int
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., copy_peer_uuid: _Optional[str] = ..., copy_peer_addr: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ..., caller_uuid: _Optional[str] = ..., caller_term: _Optional[int] = ..., replace_live_replica: _Optional[bool] = ..., leader_first_index: _Optional[int] = ...) -> None: ...

class StartTabletCopyResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DataFilePB(_message.Message):
    __slots__ = ("file_id", "kind", "name", "size_bytes", "crc32c")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    kind: DataFileKind
    name: str
    size_bytes: int
    crc32c: int
    def __init__(self, file_id: _Optional[int] = ..., kind: _Optional[_Union[DataFileKind, str]] = ..., name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., crc32c: _Optional[int] = ...) -> None: ...

class TabletCopyMetadataPB(_message.Message):
    __slots__ = ("table_id", "table_name", "schema", "schema_version", "partition", "partition_schema")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    table_id: str
    table_name: str
    schema: bytes
    schema_version: int
    partition: bytes
    partition_schema: bytes
    def __init__(self, table_id: _Optional[str] = ..., table_name: _Optional[str] = ..., schema: _Optional[bytes] = ..., schema_version: _Optional[int] = ..., partition: _Optional[bytes] = ..., partition_schema: _Optional[bytes] = ...) -> None: ...

class BeginTabletCopySessionRequestPB(_message.Message):
    __slots__ = ("requestor_uuid", "tablet_id")
    REQUESTOR_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    requestor_uuid: str
    tablet_id: str
    def __init__(self, requestor_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ...) -> None: ...

class BeginTabletCopySessionResponsePB(_message.Message):
    __slots__ = ("session_id", "session_idle_timeout_ms", "metadata", "current_term", "committed_config", "applied_index", "files", "source_location", "committed_index")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDLE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TERM_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_INDEX_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    session_idle_timeout_ms: int
    metadata: TabletCopyMetadataPB
    current_term: int
    committed_config: _consensus_pb2.RaftConfigPB
    applied_index: int
    files: _containers.RepeatedCompositeFieldContainer[DataFilePB]
    source_location: str
    committed_index: int
    def __init__(self, session_id: _Optional[bytes] = ..., session_idle_timeout_ms: _Optional[int] = ..., metadata: _Optional[_Union[TabletCopyMetadataPB, _Mapping]] = ..., current_term: _Optional[int] = ..., committed_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ..., applied_index: _Optional[int] = ..., files: _Optional[_Iterable[_Union[DataFilePB, _Mapping]]] = ..., source_location: _Optional[str] = ..., committed_index: _Optional[int] = ...) -> None: ...

class FetchDataRequestPB(_message.Message):
    __slots__ = ("session_id", "file_id", "offset", "max_length")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    file_id: int
    offset: int
    max_length: int
    def __init__(self, session_id: _Optional[bytes] = ..., file_id: _Optional[int] = ..., offset: _Optional[int] = ..., max_length: _Optional[int] = ...) -> None: ...

class FetchDataResponsePB(_message.Message):
    __slots__ = ("file_id", "offset", "length", "chunk_crc32c", "file_size_bytes")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_CRC32C_FIELD_NUMBER: _ClassVar[int]
    FILE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    offset: int
    length: int
    chunk_crc32c: int
    file_size_bytes: int
    def __init__(self, file_id: _Optional[int] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., chunk_crc32c: _Optional[int] = ..., file_size_bytes: _Optional[int] = ...) -> None: ...

class CheckTabletCopySessionActiveRequestPB(_message.Message):
    __slots__ = ("session_id", "keepalive")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    keepalive: bool
    def __init__(self, session_id: _Optional[bytes] = ..., keepalive: _Optional[bool] = ...) -> None: ...

class CheckTabletCopySessionActiveResponsePB(_message.Message):
    __slots__ = ("session_is_active",)
    SESSION_IS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    session_is_active: bool
    def __init__(self, session_is_active: _Optional[bool] = ...) -> None: ...

class EndTabletCopySessionRequestPB(_message.Message):
    __slots__ = ("session_id", "is_success")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IS_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    is_success: bool
    def __init__(self, session_id: _Optional[bytes] = ..., is_success: _Optional[bool] = ...) -> None: ...

class EndTabletCopySessionResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
