from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RaftRolePB(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_ROLE: _ClassVar[RaftRolePB]
    LEADER: _ClassVar[RaftRolePB]
    FOLLOWER: _ClassVar[RaftRolePB]
    LEARNER: _ClassVar[RaftRolePB]
    NON_PARTICIPANT: _ClassVar[RaftRolePB]
    CANDIDATE: _ClassVar[RaftRolePB]

class ReplicaSelectionPB(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEADER_ONLY: _ClassVar[ReplicaSelectionPB]
    CLOSEST_REPLICA: _ClassVar[ReplicaSelectionPB]
UNKNOWN_ROLE: RaftRolePB
LEADER: RaftRolePB
FOLLOWER: RaftRolePB
LEARNER: RaftRolePB
NON_PARTICIPANT: RaftRolePB
CANDIDATE: RaftRolePB
LEADER_ONLY: ReplicaSelectionPB
CLOSEST_REPLICA: ReplicaSelectionPB

class HostPortPB(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class NodeInstancePB(_message.Message):
    __slots__ = ("permanent_uuid", "instance_seqno")
    PERMANENT_UUID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_SEQNO_FIELD_NUMBER: _ClassVar[int]
    permanent_uuid: str
    instance_seqno: int
    def __init__(self, permanent_uuid: _Optional[str] = ..., instance_seqno: _Optional[int] = ...) -> None: ...

class ServerRegistrationPB(_message.Message):
    __slots__ = ("rpc_addresses", "http_addresses", "software_version", "start_time_us")
    RPC_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_US_FIELD_NUMBER: _ClassVar[int]
    rpc_addresses: _containers.RepeatedCompositeFieldContainer[HostPortPB]
    http_addresses: _containers.RepeatedCompositeFieldContainer[HostPortPB]
    software_version: str
    start_time_us: int
    def __init__(self, rpc_addresses: _Optional[_Iterable[_Union[HostPortPB, _Mapping]]] = ..., http_addresses: _Optional[_Iterable[_Union[HostPortPB, _Mapping]]] = ..., software_version: _Optional[str] = ..., start_time_us: _Optional[int] = ...) -> None: ...

class TableIdentifierPB(_message.Message):
    __slots__ = ("table_id", "table_name")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    table_id: str
    table_name: str
    def __init__(self, table_id: _Optional[str] = ..., table_name: _Optional[str] = ...) -> None: ...

class TSInfoPB(_message.Message):
    __slots__ = ("permanent_uuid", "rpc_addresses", "location")
    PERMANENT_UUID_FIELD_NUMBER: _ClassVar[int]
    RPC_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    permanent_uuid: str
    rpc_addresses: _containers.RepeatedCompositeFieldContainer[HostPortPB]
    location: str
    def __init__(self, permanent_uuid: _Optional[str] = ..., rpc_addresses: _Optional[_Iterable[_Union[HostPortPB, _Mapping]]] = ..., location: _Optional[str] = ...) -> None: ...
