from nyala.proto import common_pb2 as _common_pb2
from nyala.proto import consensus_pb2 as _consensus_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChangeConfigType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_CHANGE: _ClassVar[ChangeConfigType]
    ADD_PEER: _ClassVar[ChangeConfigType]
    REMOVE_PEER: _ClassVar[ChangeConfigType]
    MODIFY_PEER: _ClassVar[ChangeConfigType]

class PeerHealthPB(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HEALTH_UNKNOWN: _ClassVar[PeerHealthPB]
    HEALTHY: _ClassVar[PeerHealthPB]
    FAILED: _ClassVar[PeerHealthPB]
    FAILED_UNRECOVERABLE: _ClassVar[PeerHealthPB]
UNKNOWN_CHANGE: ChangeConfigType
ADD_PEER: ChangeConfigType
REMOVE_PEER: ChangeConfigType
MODIFY_PEER: ChangeConfigType
HEALTH_UNKNOWN: PeerHealthPB
HEALTHY: PeerHealthPB
FAILED: PeerHealthPB
FAILED_UNRECOVERABLE: PeerHealthPB

class LogEntryPB(_message.Message):
    __slots__ = ("term", "index", "type", "payload", "payload_sidecar")
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIDECAR_FIELD_NUMBER: _ClassVar[int]
    term: int
    index: int
    type: int
    payload: bytes
    payload_sidecar: int
    def __init__(self, term: _Optional[int] = ..., index: _Optional[int] = ..., type: _Optional[int] = ..., payload: _Optional[bytes] = ..., payload_sidecar: _Optional[int] = ...) -> None: ...

class AppendRequestPB(_message.Message):
    __slots__ = ("prev_index", "prev_term", "entries", "commit_index")
    PREV_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREV_TERM_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    prev_index: int
    prev_term: int
    entries: _containers.RepeatedCompositeFieldContainer[LogEntryPB]
    commit_index: int
    def __init__(self, prev_index: _Optional[int] = ..., prev_term: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[LogEntryPB, _Mapping]]] = ..., commit_index: _Optional[int] = ...) -> None: ...

class AppendResponsePB(_message.Message):
    __slots__ = ("success", "index", "hint_index", "hint_term", "last_index")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    HINT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HINT_TERM_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    success: bool
    index: int
    hint_index: int
    hint_term: int
    last_index: int
    def __init__(self, success: _Optional[bool] = ..., index: _Optional[int] = ..., hint_index: _Optional[int] = ..., hint_term: _Optional[int] = ..., last_index: _Optional[int] = ...) -> None: ...

class VoteRequestPB(_message.Message):
    __slots__ = ("last_index", "last_term", "pre_vote", "ignore_live_leader")
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_TERM_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    IGNORE_LIVE_LEADER_FIELD_NUMBER: _ClassVar[int]
    last_index: int
    last_term: int
    pre_vote: bool
    ignore_live_leader: bool
    def __init__(self, last_index: _Optional[int] = ..., last_term: _Optional[int] = ..., pre_vote: _Optional[bool] = ..., ignore_live_leader: _Optional[bool] = ...) -> None: ...

class VoteResponsePB(_message.Message):
    __slots__ = ("pre_vote", "granted")
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    pre_vote: bool
    granted: bool
    def __init__(self, pre_vote: _Optional[bool] = ..., granted: _Optional[bool] = ...) -> None: ...

class HeartbeatPB(_message.Message):
    __slots__ = ("commit_index", "read_seq", "leader_commit")
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    READ_SEQ_FIELD_NUMBER: _ClassVar[int]
    LEADER_COMMIT_FIELD_NUMBER: _ClassVar[int]
    commit_index: int
    read_seq: int
    leader_commit: int
    def __init__(self, commit_index: _Optional[int] = ..., read_seq: _Optional[int] = ..., leader_commit: _Optional[int] = ...) -> None: ...

class HeartbeatResponsePB(_message.Message):
    __slots__ = ("read_seq", "last_index")
    READ_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    read_seq: int
    last_index: int
    def __init__(self, read_seq: _Optional[int] = ..., last_index: _Optional[int] = ...) -> None: ...

class TimeoutNowPB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RaftMessagePB(_message.Message):
    __slots__ = ("group_id", "sender", "recipient", "term", "append_request", "append_response", "vote_request", "vote_response", "heartbeat", "heartbeat_response", "timeout_now")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    APPEND_REQUEST_FIELD_NUMBER: _ClassVar[int]
    APPEND_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    VOTE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NOW_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    sender: str
    recipient: str
    term: int
    append_request: AppendRequestPB
    append_response: AppendResponsePB
    vote_request: VoteRequestPB
    vote_response: VoteResponsePB
    heartbeat: HeartbeatPB
    heartbeat_response: HeartbeatResponsePB
    timeout_now: TimeoutNowPB
    def __init__(self, group_id: _Optional[str] = ..., sender: _Optional[str] = ..., recipient: _Optional[str] = ..., term: _Optional[int] = ..., append_request: _Optional[_Union[AppendRequestPB, _Mapping]] = ..., append_response: _Optional[_Union[AppendResponsePB, _Mapping]] = ..., vote_request: _Optional[_Union[VoteRequestPB, _Mapping]] = ..., vote_response: _Optional[_Union[VoteResponsePB, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatPB, _Mapping]] = ..., heartbeat_response: _Optional[_Union[HeartbeatResponsePB, _Mapping]] = ..., timeout_now: _Optional[_Union[TimeoutNowPB, _Mapping]] = ...) -> None: ...

class DeliverRequestPB(_message.Message):
    __slots__ = ("sender_uuid", "sender_address", "dest_uuid", "messages")
    SENDER_UUID_FIELD_NUMBER: _ClassVar[int]
    SENDER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    sender_uuid: str
    sender_address: _common_pb2.HostPortPB
    dest_uuid: str
    messages: _containers.RepeatedCompositeFieldContainer[RaftMessagePB]
    def __init__(self, sender_uuid: _Optional[str] = ..., sender_address: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ..., dest_uuid: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[RaftMessagePB, _Mapping]]] = ...) -> None: ...

class DeliverResponsePB(_message.Message):
    __slots__ = ("unknown_groups",)
    UNKNOWN_GROUPS_FIELD_NUMBER: _ClassVar[int]
    unknown_groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, unknown_groups: _Optional[_Iterable[str]] = ...) -> None: ...

class GetConsensusStateRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_ids")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_IDS_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsensusStatePB(_message.Message):
    __slots__ = ("tablet_id", "current_term", "leader_uuid", "role", "committed_config", "pending_config", "last_index", "commit_index", "applied_index", "peers", "transfer_target_uuid", "last_term")
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_UUID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    PENDING_CONFIG_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_TARGET_UUID_FIELD_NUMBER: _ClassVar[int]
    LAST_TERM_FIELD_NUMBER: _ClassVar[int]
    tablet_id: str
    current_term: int
    leader_uuid: str
    role: _common_pb2.RaftRolePB
    committed_config: _consensus_pb2.RaftConfigPB
    pending_config: _consensus_pb2.RaftConfigPB
    last_index: int
    commit_index: int
    applied_index: int
    peers: _containers.RepeatedCompositeFieldContainer[PeerProgressPB]
    transfer_target_uuid: str
    last_term: int
    def __init__(self, tablet_id: _Optional[str] = ..., current_term: _Optional[int] = ..., leader_uuid: _Optional[str] = ..., role: _Optional[_Union[_common_pb2.RaftRolePB, str]] = ..., committed_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ..., pending_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ..., last_index: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[PeerProgressPB, _Mapping]]] = ..., transfer_target_uuid: _Optional[str] = ..., last_term: _Optional[int] = ...) -> None: ...

class GetConsensusStateResponsePB(_message.Message):
    __slots__ = ("tablets",)
    TABLETS_FIELD_NUMBER: _ClassVar[int]
    tablets: _containers.RepeatedCompositeFieldContainer[ConsensusStatePB]
    def __init__(self, tablets: _Optional[_Iterable[_Union[ConsensusStatePB, _Mapping]]] = ...) -> None: ...

class LeaderStepDownRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "new_leader_uuid", "abrupt")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_LEADER_UUID_FIELD_NUMBER: _ClassVar[int]
    ABRUPT_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    new_leader_uuid: str
    abrupt: bool
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., new_leader_uuid: _Optional[str] = ..., abrupt: _Optional[bool] = ...) -> None: ...

class LeaderStepDownResponsePB(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ChangeConfigPeerPB(_message.Message):
    __slots__ = ("permanent_uuid", "member_type", "promote", "replace", "last_known_addr")
    PERMANENT_UUID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ADDR_FIELD_NUMBER: _ClassVar[int]
    permanent_uuid: str
    member_type: _consensus_pb2.MemberType
    promote: bool
    replace: bool
    last_known_addr: _common_pb2.HostPortPB
    def __init__(self, permanent_uuid: _Optional[str] = ..., member_type: _Optional[_Union[_consensus_pb2.MemberType, str]] = ..., promote: _Optional[bool] = ..., replace: _Optional[bool] = ..., last_known_addr: _Optional[_Union[_common_pb2.HostPortPB, _Mapping]] = ...) -> None: ...

class ConfigChangeItemPB(_message.Message):
    __slots__ = ("type", "peer")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    type: ChangeConfigType
    peer: ChangeConfigPeerPB
    def __init__(self, type: _Optional[_Union[ChangeConfigType, str]] = ..., peer: _Optional[_Union[ChangeConfigPeerPB, _Mapping]] = ...) -> None: ...

class ChangeConfigRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "type", "peer", "cas_config_opid_index")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    CAS_CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    type: ChangeConfigType
    peer: ChangeConfigPeerPB
    cas_config_opid_index: int
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., type: _Optional[_Union[ChangeConfigType, str]] = ..., peer: _Optional[_Union[ChangeConfigPeerPB, _Mapping]] = ..., cas_config_opid_index: _Optional[int] = ...) -> None: ...

class ChangeConfigResponsePB(_message.Message):
    __slots__ = ("committed_config",)
    COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    committed_config: _consensus_pb2.RaftConfigPB
    def __init__(self, committed_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ...) -> None: ...

class BulkChangeConfigRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "changes", "cas_config_opid_index")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    CAS_CONFIG_OPID_INDEX_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    changes: _containers.RepeatedCompositeFieldContainer[ConfigChangeItemPB]
    cas_config_opid_index: int
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., changes: _Optional[_Iterable[_Union[ConfigChangeItemPB, _Mapping]]] = ..., cas_config_opid_index: _Optional[int] = ...) -> None: ...

class BulkChangeConfigResponsePB(_message.Message):
    __slots__ = ("committed_config",)
    COMMITTED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    committed_config: _consensus_pb2.RaftConfigPB
    def __init__(self, committed_config: _Optional[_Union[_consensus_pb2.RaftConfigPB, _Mapping]] = ...) -> None: ...

class RunLeaderElectionRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ...) -> None: ...

class RunLeaderElectionResponsePB(_message.Message):
    __slots__ = ("already_leader",)
    ALREADY_LEADER_FIELD_NUMBER: _ClassVar[int]
    already_leader: bool
    def __init__(self, already_leader: _Optional[bool] = ...) -> None: ...

class UnsafeChangeConfigRequestPB(_message.Message):
    __slots__ = ("dest_uuid", "tablet_id", "new_config_uuids")
    DEST_UUID_FIELD_NUMBER: _ClassVar[int]
    TABLET_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_CONFIG_UUIDS_FIELD_NUMBER: _ClassVar[int]
    dest_uuid: str
    tablet_id: str
    new_config_uuids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dest_uuid: _Optional[str] = ..., tablet_id: _Optional[str] = ..., new_config_uuids: _Optional[_Iterable[str]] = ...) -> None: ...

class UnsafeChangeConfigResponsePB(_message.Message):
    __slots__ = ("term", "index")
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    term: int
    index: int
    def __init__(self, term: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class PeerProgressPB(_message.Message):
    __slots__ = ("permanent_uuid", "match_index", "next_index", "state", "health")
    PERMANENT_UUID_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    NEXT_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    permanent_uuid: str
    match_index: int
    next_index: int
    state: str
    health: PeerHealthPB
    def __init__(self, permanent_uuid: _Optional[str] = ..., match_index: _Optional[int] = ..., next_index: _Optional[int] = ..., state: _Optional[str] = ..., health: _Optional[_Union[PeerHealthPB, str]] = ...) -> None: ...
