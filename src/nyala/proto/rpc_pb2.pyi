from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

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
