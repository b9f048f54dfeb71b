from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatusCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OK: _ClassVar[StatusCode]
    NOT_FOUND: _ClassVar[StatusCode]
    ALREADY_PRESENT: _ClassVar[StatusCode]
    INVALID_ARGUMENT: _ClassVar[StatusCode]
    ILLEGAL_STATE: _ClassVar[StatusCode]
    SERVICE_UNAVAILABLE: _ClassVar[StatusCode]
    TIMED_OUT: _ClassVar[StatusCode]
    NOT_THE_LEADER: _ClassVar[StatusCode]
    CORRUPTION: _ClassVar[StatusCode]
    IO_ERROR: _ClassVar[StatusCode]
    ABORTED: _ClassVar[StatusCode]
    NETWORK_ERROR: _ClassVar[StatusCode]
    INTERNAL: _ClassVar[StatusCode]
OK: StatusCode
NOT_FOUND: StatusCode
ALREADY_PRESENT: StatusCode
INVALID_ARGUMENT: StatusCode
ILLEGAL_STATE: StatusCode
SERVICE_UNAVAILABLE: StatusCode
TIMED_OUT: StatusCode
NOT_THE_LEADER: StatusCode
CORRUPTION: StatusCode
IO_ERROR: StatusCode
ABORTED: StatusCode
NETWORK_ERROR: StatusCode
INTERNAL: StatusCode

class RequestHeader(_message.Message):
    __slots__ = ("call_id", "service", "method", "timeout_ms", "body_size", "sidecar_sizes")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    BODY_SIZE_FIELD_NUMBER: _ClassVar[int]
    SIDECAR_SIZES_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    service: str
    method: str
    timeout_ms: int
    body_size: int
    sidecar_sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, call_id: _Optional[int] = ..., service: _Optional[str] = ..., method: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., body_size: _Optional[int] = ..., sidecar_sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class ResponseHeader(_message.Message):
    __slots__ = ("call_id", "code", "message", "leader_hint", "body_size", "sidecar_sizes")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_HINT_FIELD_NUMBER: _ClassVar[int]
    BODY_SIZE_FIELD_NUMBER: _ClassVar[int]
    SIDECAR_SIZES_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    code: StatusCode
    message: str
    leader_hint: str
    body_size: int
    sidecar_sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, call_id: _Optional[int] = ..., code: _Optional[_Union[StatusCode, str]] = ..., message: _Optional[str] = ..., leader_hint: _Optional[str] = ..., body_size: _Optional[int] = ..., sidecar_sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...
