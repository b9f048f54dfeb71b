from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemberType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NON_VOTER: _ClassVar[MemberType]
    VOTER: _ClassVar[MemberType]
NON_VOTER: MemberType
VOTER: MemberType

class RaftPeerAttrsPB(_message.Message):
    __slots__ = ("promote", "replace")
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    promote: bool
    replace: bool
    def __init__(self, promote: _Optional[bool] = ..., replace: _Optional[bool] = ...) -> None: ...

class RaftPeerPB(_message.Message):
    __slots__ = ("permanent_uuid", "member_type", "attrs")
    PERMANENT_UUID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    permanent_uuid: str
    member_type: MemberType
    attrs: RaftPeerAttrsPB
    def __init__(self, permanent_uuid: _Optional[str] = ..., member_type: _Optional[_Union[MemberType, str]] = ..., attrs: _Optional[_Union[RaftPeerAttrsPB, _Mapping]] = ...) -> None: ...

class RaftConfigPB(_message.Message):
    __slots__ = ("opid_index", "peers", "unsafe_config_change")
    OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    UNSAFE_CONFIG_CHANGE_FIELD_NUMBER: _ClassVar[int]
    opid_index: int
    peers: _containers.RepeatedCompositeFieldContainer[RaftPeerPB]
    unsafe_config_change: bool
    def __init__(self, opid_index: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[RaftPeerPB, _Mapping]]] = ..., unsafe_config_change: _Optional[bool] = ...) -> None: ...

class ConsensusMetadataPB(_message.Message):
    __slots__ = ("committed_config", "current_term", "voted_for", "commit_index")
    COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TERM_FIELD_NUMBER: _ClassVar[int]
    VOTED_FOR_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    committed_config: RaftConfigPB
    current_term: int
    voted_for: str
    commit_index: int
    def __init__(self, committed_config: _Optional[_Union[RaftConfigPB, _Mapping]] = ..., current_term: _Optional[int] = ..., voted_for: _Optional[str] = ..., commit_index: _Optional[int] = ...) -> None: ...
